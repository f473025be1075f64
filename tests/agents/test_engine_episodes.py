"""Episodes as clients of the engine: the same episodes as the lock-step driver's under greedy
decoding, with each search run beside the other episodes' decoding."""

import threading
import time

import jax
import pytest

from memjax.agents.engine_episodes import EngineRunner
from memjax.agents.episode import ContextRecord, ModelCall, SearchRequest
from memjax.agents.memsearcher.eval_job import drive
from memjax.agents.retrieval import ScriptedRetriever, passage
from memjax.agents.sampler_adapter import SamplerPolicy
from memjax.engine import Engine
from memjax.sampling.sampling_params import SamplingParams
from tests.agents.conftest import tiny_decoder
from tests.sampling.tiny import tiny_model

SAMPLING = SamplingParams(max_new_tokens=12, greedy=True)


class ToyEpisode:
    """Three model calls, a search after each of the first two; each call's prompt holds the
    earlier outputs and passages, so a wrong hand-back changes every later token."""

    def __init__(self, question: str, calls: int = 3):
        self.messages = [{"role": "user", "content": question}]
        self.calls_left = calls
        self.outputs: list[str] = []
        self.searches: list[str] = []
        self.done = False

    def current_call(self) -> ModelCall:
        return ModelCall(tuple(self.messages), "<think>")

    def observe(self, output) -> SearchRequest | None:
        self.outputs.append(output.text)
        self.messages.append({"role": "assistant", "content": output.text})
        self.calls_left -= 1
        if self.calls_left == 0:
            self.done = True
            return None
        query = f"q{len(self.outputs)} {output.text[:12]}"
        self.searches.append(query)
        return SearchRequest(query, 2)

    def receive(self, passages) -> None:
        text = " | ".join(p["contents"] for p in passages)
        self.messages.append({"role": "user", "content": f"<information>{text}</information>"})

    def result(self, golden):
        return ContextRecord()


class SlowRetriever(ScriptedRetriever):
    """Takes `delay` seconds per call and notes the engine's decode calls before and after."""

    def __init__(self, engine: Engine | None, delay: float):
        super().__init__(
            default=[
                passage("d1", "Paris", "Paris is in France."),
                passage("d2", "Rome", "Rome is in Italy."),
            ]
        )
        self.engine, self.delay = engine, delay
        self.overlaps = 0
        self.threads: set[str] = set()

    def search(self, queries, k):
        before = self.engine.decode_calls if self.engine else 0
        time.sleep(self.delay)
        self.threads.add(threading.current_thread().name)
        if self.engine is not None and self.engine.decode_calls > before:
            self.overlaps += 1  # the engine decoded other episodes during this search
        return super().search(queries, k)


@pytest.fixture(scope="module")
def model(smollm2_tokenizer):
    _, cfg = tiny_decoder(smollm2_tokenizer.vocab_size)
    params, cfg = tiny_model(seed=0, cfg=cfg)  # peaked logits: outputs differ by prompt
    return params, cfg, smollm2_tokenizer


QUESTIONS = ["Where is Paris?", "Who wrote Hamlet, and when?", "What is 2+2?", "Name a river."]


def test_engine_episodes_equal_the_lock_step_episodes(model):
    params, cfg, tok = model
    lock = [ToyEpisode(q) for q in QUESTIONS]
    policy = SamplerPolicy(params, cfg, tok, SAMPLING)
    drive(lock, policy, SlowRetriever(None, 0.0), jax.random.key(0))

    engine = Engine(params, cfg, eos_ids=tok.eos_ids, tokenizer=tok, slots=2, max_len=512)
    retriever = SlowRetriever(engine, 0.3)
    ours = [ToyEpisode(q) for q in QUESTIONS]
    EngineRunner(engine, tok, SAMPLING).drive(ours, retriever, jax.random.key(0))

    for a, b in zip(lock, ours):
        assert b.done and len(b.outputs) == 3
        assert a.outputs == b.outputs
        assert a.searches == b.searches
    assert len({o for e in ours for o in e.outputs}) > 3  # outputs differ: the check has teeth
    # Searches ran on the tool thread one query at a time, while the engine decoded others.
    assert len(retriever.calls) == 2 * len(QUESTIONS)
    assert all(len(queries) == 1 for queries, _ in retriever.calls)
    assert retriever.threads == {"memjax-tools_0"}
    assert retriever.overlaps >= 2
    assert not engine.busy


def test_a_prompt_over_the_budget_fails_its_turn_without_a_request(model):
    params, cfg, tok = model
    engine = Engine(params, cfg, eos_ids=tok.eos_ids, tokenizer=tok, slots=2, max_len=512)
    runner = EngineRunner(engine, tok, SAMPLING, max_prompt_tokens=40)
    episodes = [ToyEpisode("short?"), ToyEpisode("long " * 60)]
    runner.drive(episodes, SlowRetriever(engine, 0.0), jax.random.key(0))
    assert runner.overflows >= 1
    assert episodes[1].outputs[0] == ""  # the over-long call was answered empty, not sent
    assert all(e.done for e in episodes)


class DeadRetriever(ScriptedRetriever):
    def search(self, queries, k):
        raise ConnectionError("retrieval server at http://127.0.0.1:9 went away")


def test_a_failed_search_stops_the_run_with_its_error(model):
    """A retriever that dies mid-run is an error, never an episode scored as if it answered."""
    params, cfg, tok = model
    engine = Engine(params, cfg, eos_ids=tok.eos_ids, tokenizer=tok, slots=2, max_len=512)
    episodes = [ToyEpisode(q) for q in QUESTIONS[:2]]
    with pytest.raises(ConnectionError, match="went away"):
        EngineRunner(engine, tok, SAMPLING).drive(episodes, DeadRetriever(), jax.random.key(0))
