"""The loader on the real locomo10.json (skipped with a message when ../shared/data is absent)."""

import functools
from collections import Counter

import pytest

from memjax.data.categories import CATEGORY_MAPPING_NOTE, CATEGORY_NAMES
from memjax.data.locomo import load_locomo
from memjax.data.splits import memory_r1_split

# From ../shared/data/README.md: per conversation, {cat: n} for categories 1..5.
PER_CONVERSATION = {
    "conv-26": (32, 37, 13, 70, 47),
    "conv-30": (11, 26, 0, 44, 24),
    "conv-41": (31, 27, 8, 86, 41),
    "conv-42": (37, 40, 11, 111, 61),
    "conv-43": (31, 26, 14, 107, 64),
    "conv-44": (30, 24, 7, 62, 35),
    "conv-47": (20, 34, 13, 83, 40),
    "conv-48": (21, 42, 10, 118, 48),
    "conv-49": (37, 33, 13, 73, 40),
    "conv-50": (32, 32, 7, 87, 46),
}


@functools.cache
def _load(path):
    return load_locomo(path)


@pytest.fixture
def conversations(shared_data):
    return _load(shared_data / "locomo10.json")  # parsed once per session


def test_counts(conversations):
    assert [c.sample_id for c in conversations] == list(PER_CONVERSATION)
    assert sum(len(c.qa) for c in conversations) == 1986
    assert sum(len(c.sessions) for c in conversations) == 272
    assert sum(len(s.turns) for c in conversations for s in c.sessions) == 5882
    by_cat = Counter(q.category for c in conversations for q in c.qa)
    assert dict(sorted(by_cat.items())) == {1: 282, 2: 321, 3: 96, 4: 841, 5: 446}
    for c in conversations:
        counts = Counter(q.category for q in c.qa)
        assert tuple(counts.get(k, 0) for k in range(1, 6)) == PER_CONVERSATION[c.sample_id]


def test_memory_r1_split(conversations):
    split = memory_r1_split(conversations)
    assert (len(split.train), len(split.validation), len(split.test)) == (152, 81, 1307)
    assert {e.conversation_id for e in split.train} == {"conv-26"}
    assert {e.conversation_id for e in split.validation} == {"conv-30"}
    test_cats = Counter(e.category for e in split.test)
    assert dict(sorted(test_cats.items())) == {1: 239, 2: 258, 3: 83, 4: 727}
    with_adv = memory_r1_split(conversations, include_adversarial=True)
    assert (len(with_adv.train), len(with_adv.validation), len(with_adv.test)) == (199, 105, 1682)
    # The reported names follow Mem0/Memory-R1, and the note says so.
    assert split.test[0].category_name == CATEGORY_NAMES[split.test[0].category]
    assert "1 single-hop, 2 temporal, 3 multi-hop, 4 open-domain" in CATEGORY_MAPPING_NOTE


def test_quirks(conversations):
    conv26 = conversations[0]
    # Dates for sessions 20..35 without the sessions: kept aside, not turned into sessions.
    assert [s.index for s in conv26.sessions] == list(range(1, 20))
    assert sorted(conv26.orphan_session_dates) == list(range(20, 36))
    assert conv26.sessions[0].date_time == "1:56 pm on 8 May, 2023"
    assert conv26.sessions[0].timestamp.strftime("%Y-%m-%d %H:%M") == "2023-05-08 13:56"
    items = [q for c in conversations for q in c.qa]
    # Int answers become strings (the official scorer compares str(answer)).
    assert sorted(q.answer for q in items if q.answer in {"2022", "2", "3"}).count("2022") >= 4
    assert all(q.answer is None or isinstance(q.answer, str) for q in items)
    # Category 5: answers missing except twice in conv-26; adversarial answers on all 446.
    cat5 = [q for q in items if q.category == 5]
    assert sum(q.has_answer for q in cat5) == 2
    assert all(q.adversarial_answer for q in cat5)
    # Empty and malformed evidence.
    assert sum(not q.raw_evidence for q in items) == 4
    by_raw = {e: q for q in items for e in q.raw_evidence}
    assert by_raw["D8:6; D9:17"].evidence[:2] == ("D8:6", "D9:17")
    assert "D11:26" in by_raw["D:11:26"].evidence
    assert by_raw["D9:1 D4:4 D4:6"].evidence == ("D9:1", "D4:4", "D4:6")
    assert "D" not in by_raw["D"].evidence
    # Images: captions and urls on the documented number of turns.
    turns = [t for c in conversations for _, t in c.turns()]
    assert sum(t.blip_caption is not None for t in turns) == 1226
    assert sum(bool(t.image_urls) for t in turns) == 910
    assert sum(t.re_download is not None for t in turns) == 206
    captioned = next(t for t in turns if t.blip_caption)
    assert captioned.blip_caption in captioned.display_text()
