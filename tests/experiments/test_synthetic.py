"""The synthetic LoCoMo-format generator: loadable, deterministic, latest-state answers."""

import dataclasses

from memjax.data.categories import MULTI_HOP, SINGLE_HOP, TEMPORAL
from memjax.data.locomo import load_locomo
from memjax.experiments.synthetic import (
    SyntheticConfig,
    generate_conversations,
    generate_locomo_json,
    write_synthetic_locomo,
)


def test_deterministic_and_seed_dependent():
    cfg = SyntheticConfig(num_conversations=3, seed=7)
    assert generate_locomo_json(cfg) == generate_locomo_json(cfg)
    assert generate_locomo_json(cfg) != generate_locomo_json(dataclasses.replace(cfg, seed=8))


def test_file_round_trip_through_the_loader(tmp_path):
    cfg = SyntheticConfig(num_conversations=3, seed=1)
    path = write_synthetic_locomo(tmp_path / "syn.json", cfg)
    assert load_locomo(path) == generate_conversations(cfg)


def test_evidence_points_at_real_turns_and_answers_are_latest_state():
    convs = generate_conversations(SyntheticConfig(num_conversations=8, seed=3))
    seen_second_dog = seen_refined_allergy = False
    for conv in convs:
        turns = conv.turn_by_dia_id()
        for qa in conv.qa:
            assert qa.evidence, qa
            texts = [turns[e][1].text for e in qa.evidence]  # KeyError if evidence is wrong
            sessions = [turns[e][0] for e in qa.evidence]
            last = texts[-1]
            if qa.category == TEMPORAL:
                # The date answered is the date of the session where the change was said.
                ts = sessions[-1].timestamp
                assert qa.answer == f"{ts.day} {ts.strftime('%B')} {ts.year}"
            elif qa.category == SINGLE_HOP and "How many dogs" in qa.question:
                assert qa.answer == ("two" if len(texts) == 2 else "one")
                seen_second_dog |= qa.answer == "two" and "second dog" in last
            elif qa.category == SINGLE_HOP:
                # The answer is stated in the *latest* evidence turn, not the first.
                assert qa.answer in last, (qa, texts)
                if "allergic" in qa.question and len(texts) == 2:
                    assert last.startswith(f"Update: it's only {qa.answer}, not all")
                    assert qa.answer not in texts[0]  # refined, not repeated
                    seen_refined_allergy = True
                if len(texts) == 2 and "allergic" not in qa.question:
                    assert qa.answer not in texts[0]  # contradicted: the old fact is wrong
            elif qa.category == MULTI_HOP:
                first, second = qa.answer.split(" and ")
                assert first in texts[0] and second in texts[1]
            # Evidence is in chronological order.
            assert [s.index for s in sessions] == sorted(s.index for s in sessions)
    assert seen_second_dog and seen_refined_allergy


def test_turns_and_answers_are_short():
    convs = generate_conversations(SyntheticConfig(num_conversations=6, seed=5))
    for conv in convs:
        for _, turn in conv.turns():
            assert len(turn.text.split()) <= 10, turn.text
        for qa in conv.qa:
            assert len(qa.answer.split()) <= 3, qa.answer
        # Sessions are dated in increasing order.
        stamps = [s.timestamp for s in conv.sessions]
        assert None not in stamps and stamps == sorted(stamps)
