"""A stopped evaluation resumes at its last finished answer call and ends with the predictions
an unstopped one writes; calls are reused only for the same model and decoding limits."""

import json
import types

import pytest

from memjax.agents.memory_r1 import evaluation
from memjax.agents.memory_r1 import job_setup as S
from memjax.agents.memory_r1.call_cache import CallCache
from memjax.agents.memory_r1.policy import TimedPolicy
from memjax.agents.memory_r1.run_settings import MemoryR1Run
from memjax.recipes.memory_r1 import memory_r1_config
from tests.agents.memory_r1 import helpers
from tests.agents.memory_r1.test_evaluation import _judge


class Stopped(Exception):
    pass


class CountingAnswerer:
    """Answers with the prompt's question; raises Stopped in call `stop_at` (1-based)."""

    def __init__(self, stop_at: int | None = None):
        self.stop_at = stop_at
        self.calls = 0

    def __call__(self, batch):
        self.calls += 1
        if self.calls == self.stop_at:
            raise Stopped
        questions = [helpers.user_text(m).split("Question: ", 1)[1].splitlines()[0] for m in batch]
        return [f"**Answer:** {q.split()[-1]}" for q in questions]


def _config(batch_size=3):
    config = memory_r1_config("scripted", locomo_path="synthetic")
    config.data.split = "test"
    config.answer_agent.batch_size = batch_size
    return config


def _patch(monkeypatch, answerer):
    roles = {
        "fact_extraction": helpers.fact_policy,
        "manager": helpers.add_all_manager,
        "answer": answerer,
        "judge": _judge,
    }
    monkeypatch.setattr(
        S,
        "policy_for",
        lambda run, role, n, b, name=None: TimedPolicy(
            roles[name or role], name or role, batch_size=b
        ),
    )
    monkeypatch.setattr(S, "load_embedder", lambda embedder: helpers.BagOfWords())
    monkeypatch.setattr(
        evaluation,
        "load_agent_model",
        lambda spec: types.SimpleNamespace(tokenizer=helpers.ByteTokenizer()),
    )


def _predictions(workdir):
    return (workdir / "predictions.jsonl").read_text()


def test_stopped_evaluation_resumes_at_its_last_answer_call(tmp_path, monkeypatch):
    straight = CountingAnswerer()
    _patch(monkeypatch, straight)
    evaluation.evaluate(MemoryR1Run.from_config(_config()), tmp_path / "straight", method="m")
    total = straight.calls
    assert total >= 4

    _patch(monkeypatch, CountingAnswerer(stop_at=3))
    with pytest.raises(Stopped):
        evaluation.evaluate(MemoryR1Run.from_config(_config()), tmp_path / "stopped", method="m")
    assert not (tmp_path / "stopped" / "predictions.jsonl").exists()
    assert len(list((tmp_path / "stopped" / ".calls" / "answer").glob("*.json"))) == 2

    resumed = CountingAnswerer()
    _patch(monkeypatch, resumed)
    evaluation.evaluate(MemoryR1Run.from_config(_config()), tmp_path / "stopped", method="m")
    assert resumed.calls == total - 2  # the two finished calls are read back
    assert _predictions(tmp_path / "stopped") == _predictions(tmp_path / "straight")
    # Every question's latency is counted, the read-back calls' as they were measured.
    report = json.loads((tmp_path / "stopped" / "report_mem0.json").read_text())
    assert report["latency"]["answer"]["count"] == _predictions(tmp_path / "straight").count("\n")


def test_calls_are_not_reused_across_decoding_limits_or_damage(tmp_path, monkeypatch, capsys):
    first = CountingAnswerer()
    _patch(monkeypatch, first)
    evaluation.evaluate(MemoryR1Run.from_config(_config()), tmp_path, method="m")
    first_calls = sorted((tmp_path / ".calls" / "answer").glob("*.json"))
    assert len(first_calls) == first.calls

    again = CountingAnswerer()
    _patch(monkeypatch, again)
    evaluation.evaluate(MemoryR1Run.from_config(_config()), tmp_path, method="m")
    assert again.calls == 0  # every call read back

    longer = _config()
    longer.answer_agent.max_new_tokens += 1  # another decoding limit: other completions
    other = CountingAnswerer()
    _patch(monkeypatch, other)
    evaluation.evaluate(MemoryR1Run.from_config(longer), tmp_path, method="m")
    assert other.calls == first.calls

    damaged = first_calls[0]
    damaged.write_text(damaged.read_text()[:20])
    mended = CountingAnswerer()
    _patch(monkeypatch, mended)
    evaluation.evaluate(MemoryR1Run.from_config(_config()), tmp_path, method="m")
    assert mended.calls == 1
    assert f"calls: {damaged} is unreadable" in capsys.readouterr().out


def test_a_cached_call_is_its_own_prompts_only(tmp_path, capsys):
    cache = CallCache(tmp_path, {"answer.source": "a"})
    chunk = [[{"role": "user", "content": "q1"}], [{"role": "user", "content": "q2"}]]
    cache.save(chunk, ["a1", "a2"], 1.5)
    hit = cache.load(chunk)
    assert hit is not None and hit.texts == ["a1", "a2"] and hit.seconds == 1.5
    assert cache.load(chunk[::-1]) is None  # another call (order matters: it is the batch)
    assert CallCache(tmp_path, {"answer.source": "b"}).load(chunk) is None
    # A file under this call's name that holds another call's completions is refused.
    record = json.loads(cache.path(chunk).read_text())
    record["texts"] = ["only one"]
    cache.path(chunk).write_text(json.dumps(record))
    assert cache.load(chunk) is None
    assert "does not hold this call's completions" in capsys.readouterr().out
