"""The loader's quirk handling and its errors, on small files the tests write."""

import json

import pytest

from memjax.data.evidence import clean_evidence
from memjax.data.locomo import LocomoFormatError, load_locomo, parse_locomo


def _sample(**qa_overrides):
    qa = {"question": "Where?", "answer": "Paris", "evidence": ["D1:1"], "category": 4}
    qa.update(qa_overrides)
    return {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I live in Paris."},
                {
                    "speaker": "Bo",
                    "dia_id": "D1:2",
                    "text": "Look!",
                    "img_url": ["http://x/y.jpg"],
                    "blip_caption": "a photo of a cat",
                    "query": "cat",
                    "re-download": True,
                },
            ],
            "session_2_date_time": "2:00 pm on 9 May, 2023",  # a date without a session
        },
        "qa": [qa],
    }


def test_quirks_are_absorbed():
    data = [_sample(answer=2022, evidence=["D1:1; D1:2", "D", "D:1:2"])]
    data[0]["qa"].append(
        {"question": "Q?", "evidence": [], "category": 5, "adversarial_answer": "x"}
    )
    (conv,) = parse_locomo(data)
    assert [s.index for s in conv.sessions] == [1]
    assert conv.orphan_session_dates == {2: "2:00 pm on 9 May, 2023"}
    qa0, qa1 = conv.qa
    assert qa0.answer == "2022" and qa0.evidence == ("D1:1", "D1:2")
    assert qa0.raw_evidence == ("D1:1; D1:2", "D", "D:1:2")
    assert qa1.answer is None and not qa1.has_answer and qa1.evidence == ()
    assert qa1.adversarial_answer == "x"
    turn = conv.sessions[0].turns[1]
    assert turn.image_urls == ("http://x/y.jpg",) and turn.image_query == "cat"
    assert turn.display_text() == "Look! [shares a photo of a cat]"
    assert conv.turn_by_dia_id()["D1:1"][1].text == "I live in Paris."


def test_clean_evidence_rules():
    assert clean_evidence(["D8:6; D9:17"]) == ("D8:6", "D9:17")
    assert clean_evidence(["D21:18 D21:22 D11:15"]) == ("D21:18", "D21:22", "D11:15")
    assert clean_evidence(["D:11:26"]) == ("D11:26",)
    assert clean_evidence(["D", "", "x1:2"]) == ()
    assert clean_evidence(["D1:1", "D1:1", "D01:1"]) == ("D1:1",)  # duplicates merged


@pytest.mark.parametrize(
    "mutate, field, problem",
    [
        (lambda s: s["qa"][0].pop("question"), "[0].qa[0].question", "missing"),
        (lambda s: s["qa"][0].update(category=7), "[0].qa[0].category", "1..5"),
        (lambda s: s["qa"][0].update(category=True), "[0].qa[0].category", "got bool"),
        (lambda s: s["qa"][0].pop("answer"), "[0].qa[0].answer", "missing for category 4"),
        (lambda s: s["qa"][0].update(evidence="D1:1"), "[0].qa[0].evidence", "expected list"),
        (
            lambda s: s["conversation"]["session_1"][0].update(dia_id=3),
            "[0].conversation.session_1[0].dia_id",
            "expected str, got int",
        ),
        (
            lambda s: s["conversation"].pop("session_1_date_time"),
            "[0].conversation.session_1_date_time",
            "missing",
        ),
        (lambda s: s["conversation"].pop("speaker_b"), "[0].conversation.speaker_b", "missing"),
    ],
)
def test_malformed_input_names_file_and_field(tmp_path, mutate, field, problem):
    sample = _sample()
    mutate(sample)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([sample]))
    with pytest.raises(LocomoFormatError) as err:
        load_locomo(path)
    message = str(err.value)
    assert message.startswith(f"{path}: {field}: "), message
    assert problem in message


def test_file_level_errors(tmp_path):
    with pytest.raises(LocomoFormatError, match="file not found"):
        load_locomo(tmp_path / "absent.json")
    broken = tmp_path / "broken.json"
    broken.write_text("[{")
    with pytest.raises(LocomoFormatError, match=r"broken\.json:1: invalid JSON"):
        load_locomo(broken)
    empty = tmp_path / "empty.json"
    for content, problem in ((b"", "the file is empty"), (b"[]", "no conversations")):
        empty.write_bytes(content)
        with pytest.raises(LocomoFormatError, match=problem):
            load_locomo(empty)
    empty.write_bytes(b'[\n{"sample_id": "\xfe"}]')
    with pytest.raises(LocomoFormatError, match=r"empty\.json:2: not UTF-8"):
        load_locomo(empty)
    with pytest.raises(LocomoFormatError, match="<top level>: expected list"):
        parse_locomo({"sample_id": "x"})
    with pytest.raises(LocomoFormatError, match=r"\[1\]\.sample_id: duplicate"):
        parse_locomo([_sample(), _sample()])
