"""The evaluation job end to end with scripted agents and judge: banks, answers, both reports."""

import json
import re
import types

from memjax.agents.memory_r1 import evaluation
from memjax.agents.memory_r1 import job_setup as S
from memjax.agents.memory_r1.policy import TimedPolicy
from memjax.agents.memory_r1.run_settings import DataSection, MemoryR1Run
from memjax.recipes.memory_r1 import memory_r1_config
from tests.agents.memory_r1 import helpers


def _judge(batch):
    out = []
    for messages in batch:
        text = helpers.user_text(messages)
        gold = text.split("Gold answer: ", 1)[1].splitlines()[0].strip().lower()
        answer = text.split("Generated answer: ", 1)[1].splitlines()[0].strip().lower()
        label = "CORRECT" if answer and answer == gold else "WRONG"
        out.append(f'The answer matches or not. {{"label": "{label}"}}')
    return out


def _use_scripted_models(monkeypatch, roles: dict) -> None:
    """Every role's policy scripted (`roles` by role name), a bag-of-words embedder and a
    byte tokenizer: the job runs whole with no model loaded."""
    monkeypatch.setattr(
        S, "policy_for", lambda run, role, n, b, name=None: TimedPolicy(roles[name or role])
    )
    monkeypatch.setattr(S, "load_embedder", lambda embedder: helpers.BagOfWords())
    monkeypatch.setattr(
        evaluation,
        "load_agent_model",
        lambda spec: types.SimpleNamespace(tokenizer=helpers.ByteTokenizer()),
    )


def _oracle_for_single_hop(conversations):
    """Answers single-hop questions with their gold answer and everything else wrongly, so
    every number of the report is known in advance."""
    gold = {(*c.speakers, q.question): (q.answer, q.category) for c in conversations for q in c.qa}

    def answer(batch):
        out = []
        for messages in batch:
            prompt = helpers.user_text(messages)
            question = prompt.split("Question: ", 1)[1].splitlines()[0]
            speakers = re.findall(r"^Memories for user (\w+):", prompt, re.MULTILINE)
            text, category = gold[(*speakers, question)]
            out.append(f"**Answer:** {text if category == 1 else 'no idea'}")
        return out

    return answer


def test_eval_builds_answers_judges_and_reports(tmp_path, monkeypatch):
    config = memory_r1_config("scripted", locomo_path="synthetic")
    config.data.split = "test"
    data = DataSection.from_config(config.data)
    conversations = S.select_conversations(S.load_conversations(data), data)
    roles = {
        "fact_extraction": helpers.fact_policy,
        "manager": helpers.add_all_manager,
        "answer": _oracle_for_single_hop(conversations),
        "judge": _judge,
    }
    _use_scripted_models(monkeypatch, roles)
    out = evaluation.evaluate(MemoryR1Run.from_config(config), tmp_path, method="scripted")
    mem0, official = out["mem0"], out["official"]
    n = len(out["predictions"])
    assert n > 0 and mem0.overall.count == n == official.overall.count
    rows = {r.category: r for r in mem0.rows}
    assert rows[1].means == {"f1": 1.0, "bleu1": 1.0, "j": 1.0, "em": 1.0}
    assert all(rows[c].means["j"] == 0.0 for c in (2, 3, 4) if rows[c].count)
    assert mem0.overall.means["j"] == rows[1].count / n  # question-weighted
    assert {r.category: r.count for r in official.rows[:-1]} == {
        r.category: r.count for r in mem0.rows[:-1]
    }
    assert official.overall.means["official_f1"] >= rows[1].count / n
    for name in ("mem0", "official"):
        assert (tmp_path / f"report_{name}.md").read_text().startswith("| Method |")
        data = json.loads((tmp_path / f"report_{name}.json").read_text())
        assert set(data["latency"]) >= {"manager", "answer", "judge", "fact_extraction"}
        assert all(v > 0 for v in data["memory_tokens"].values())
        # Each report names its split and the size of every part (the scored part is all n).
        assert data["split"]["name"] == "test" and data["split"]["sizes"]["scored"] == n
        assert set(data["split"]["sizes"]) == {"train", "validation", "test", "scored"}
        assert (
            "Split: test (synthetic: train seed 0, held-out seed 1"
            in (tmp_path / f"report_{name}.md").read_text()
        )
    # A second run reuses the built banks (nothing rebuilt) and gives the same scores.
    again = evaluation.evaluate(MemoryR1Run.from_config(config), tmp_path, method="scripted")
    assert again["mem0"].overall.means == mem0.overall.means
    assert (tmp_path / "banks").is_dir() and len(list((tmp_path / "banks").iterdir())) >= 1


def test_adversarial_questions_carry_only_the_official_score(tmp_path, monkeypatch):
    """Category 5 has no gold answer: Mem0's protocol does not score it, so predictions.jsonl
    holds only its official score (a zero F1 there would be counted by anyone averaging it)."""
    from memjax.experiments.synthetic import SyntheticConfig, write_synthetic_locomo

    path = write_synthetic_locomo(
        tmp_path / "locomo.json", SyntheticConfig(num_conversations=1, seed=3, id_prefix="conv")
    )
    data = json.loads(path.read_text())
    data[0]["qa"].append(
        {
            "question": "What did the moon say?",
            "adversarial_answer": "nothing",
            "evidence": [],
            "category": 5,
        }
    )
    path.write_text(json.dumps(data))
    config = memory_r1_config("scripted", locomo_path=str(path))
    config.data.conversations = data[0]["sample_id"]
    config.data.include_adversarial = True
    roles = {
        "fact_extraction": helpers.fact_policy,
        "manager": helpers.add_all_manager,
        "answer": lambda batch: ["**Answer:** Not mentioned in the conversation"] * len(batch),
        "judge": _judge,
    }
    _use_scripted_models(monkeypatch, roles)
    out = evaluation.evaluate(MemoryR1Run.from_config(config), tmp_path / "eval", method="scripted")
    rows = [json.loads(line) for line in (tmp_path / "eval/predictions.jsonl").open()]
    adversarial = [r for r in rows if r["category"] == 5]
    others = [r for r in rows if r["category"] != 5]
    assert len(adversarial) == 1 and others
    # The official protocol credits a refusal on an adversarial question.
    assert adversarial[0]["scores"] == {"official_f1": 1.0}
    assert all({"f1", "bleu1", "em", "j", "official_f1"} <= set(r["scores"]) for r in others)
    assert out["mem0"].excluded == {5: 1} and out["mem0"].overall.count == len(others)
    assert out["official"].overall.count == len(rows)
