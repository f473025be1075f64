"""The server's engine path (memjax.serving.engine_batcher): a Generation as engine Requests,
and the Choices it gives against the lock-step path's for the same Generation. A tiny random
model and a toy tokenizer: fast."""

import asyncio
import types

import jax
import numpy as np

from memjax.serving.engine_batcher import EngineBatcher, engine_requests
from memjax.serving.generation import Generation, GenerationEngine, TokenChoice
from tests.sampling.tiny import ToyTokenizer, tiny_model

PARAMS, CFG = tiny_model(seed=1)


def _model():
    tokenizer = ToyTokenizer(CFG.vocab_size)
    tokenizer.eos_ids = (5,)
    return types.SimpleNamespace(params=PARAMS, cfg=CFG, tokenizer=tokenizer)


MODEL = _model()


def _prompt(seed: int, n: int = 12) -> list[int]:
    return np.random.default_rng(seed).integers(6, CFG.vocab_size, size=n).tolist()


def test_n_choices_are_n_requests_with_rows_under_one_key():
    g = Generation(_prompt(0), TokenChoice(0.8, 0.9, 5), 7, stop=("ab",), n=3)
    key = jax.random.key(3)
    requests = engine_requests(g, key)
    assert [r.row for r in requests] == [0, 1, 2]
    assert all(r.key is key and r.prompt == g.prompt for r in requests)
    assert all(r.stop_strings == ("ab",) for r in requests)
    s = requests[0].sampling
    assert (s.temperature, s.top_p, s.top_k, s.greedy, s.max_new_tokens) == (0.8, 0.9, 5, False, 7)
    greedy = engine_requests(Generation(_prompt(0), TokenChoice(0.0), 4), key)[0].sampling
    assert greedy.greedy and greedy.temperature == 1.0  # log-probs at temperature 1


def test_keys_come_from_the_seed_or_a_fresh_one_per_generation():
    batcher = EngineBatcher(MODEL, slots=1, max_len=64, seed=0)
    try:
        g = Generation(_prompt(0), TokenChoice(), 4)
        data = lambda k: jax.random.key_data(k).tolist()
        assert data(batcher.key_for(g)) != data(batcher.key_for(g))
        seeded = Generation(_prompt(0), TokenChoice(), 4, seed=11)
        assert data(batcher.key_for(seeded)) == data(jax.random.key(11))
    finally:
        batcher.close()


def test_choices_equal_the_lock_step_paths():
    """Greedy (cut to its own max_tokens), seeded sampling with n=2 and top-p, stop strings
    with and without keep_stop: the same text, ids, log-probs and finish reasons both ways."""
    generations = [
        Generation(_prompt(1), TokenChoice(0.0), 9),
        Generation(_prompt(2, 20), TokenChoice(0.9, 0.8), 11, n=2, seed=5),
        Generation(_prompt(3), TokenChoice(0.0), 20, stop=("ab", "ca")),
        Generation(_prompt(3), TokenChoice(0.0), 20, stop=("ab", "ca"), keep_stop=True),
        Generation(_prompt(4, 30), TokenChoice(1.2), 6, n=3, seed=9),
    ]
    lock_step = GenerationEngine(MODEL)
    expected = [lock_step.run([g])[0] for g in generations]
    batcher = EngineBatcher(MODEL, slots=2, max_len=64)

    async def all_at_once():
        return await asyncio.gather(*(batcher.submit(g) for g in generations))

    try:
        got = asyncio.run(all_at_once())
    finally:
        batcher.close()
    assert expected[2][0].text != expected[3][0].text  # a stop string cut, then kept
    for want, have in zip(expected, got):
        assert len(want) == len(have)
        for a, b in zip(want, have):
            assert (a.text, a.token_ids, a.finish_reason) == (b.text, b.token_ids, b.finish_reason)
            np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)
    stats = batcher.stats
    assert (stats.requests, stats.rows) == (5, 8)
