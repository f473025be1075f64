"""Rollouts on the continuous-batching engine (memjax.rl.engine_rollout, rl.rollout_engine).

The engine schedules each trajectory's turns on its own, so these check what must not depend on
that schedule: greedy trajectories are the lock-step loop's, sampled ones do not depend on the
slot count, a refused turn ends as an empty one instead of the run, and a killed run resumes
to the parameters of an uninterrupted one.
"""

import dataclasses

import jax
import numpy as np
import pytest

from memjax.engine import Engine
from memjax.errors import ConfigError
from memjax.rl import roles, rollout, toy, trainer
from memjax.rl.engine_rollout import REFUSED, run_on_engine
from memjax.rl.environment import Environment, StepResult
from memjax.sampling.sampling_params import SamplingParams
from tests.rl.test_trainer import _config, _run

EOS = 2
EXAMPLES = [3, 4, 5, 6, 7]


class UnevenEnv(Environment):
    """Episodes of different lengths, so that the engine's clients fall out of step: example e
    takes e % 4 + 1 turns (3 and 7 are cut off at max_turns). Turn 1 appends a tool result to the
    context, turn 2 opens a fresh context, later turns append again; the reward counts the
    completions' tokens equal to e (the completion may be empty: an EOS first, or a refusal)."""

    max_turns = 3

    def reset(self, example):
        return (example, 0, 0), [1, example]

    def step(self, state, completion, stop_reason):
        example, turn, hits = state
        state = (example, turn + 1, hits + sum(t == example for t in completion))
        info = {"stopped_at_limit": float(stop_reason == "max_tokens")}
        if turn + 1 == example % 4 + 1:
            return state, StepResult(done=True, reward=float(state[2]), info=info)
        if turn == 1:
            return state, StepResult(done=False, next_context=[7, example], info=info)
        return state, StepResult(done=False, observation=[9, example], info=info)

    def truncated_reward(self, state):
        return -1.0


@pytest.fixture(scope="module")
def policy():
    """A tiny decoder sharp enough that greedy completions vary (and some end on EOS)."""
    cfg = toy.toy_decoder_config(_config("grpo").model)
    params = jax.jit(lambda k: toy.toy_params(cfg, k, stddev=0.5))(jax.random.key(3))
    return params, cfg


def _engine(policy, slots, max_len=64):
    params, cfg = policy
    return Engine(params, cfg, eos_ids=(EOS,), slots=slots, max_len=max_len)


def _same(a: list[rollout.Trajectory], b: list[rollout.Trajectory], atol=1e-5):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert (x.group, x.turns, x.reward, x.info) == (y.group, y.turns, y.reward, y.info)
        assert x.completion_tokens == y.completion_tokens
        assert [c.tokens for c in x.contexts] == [c.tokens for c in y.contexts]
        assert [c.trainable for c in x.contexts] == [c.trainable for c in y.contexts]
        for cx, cy in zip(x.contexts, y.contexts):
            np.testing.assert_allclose(cx.logprobs, cy.logprobs, atol=atol)


def test_greedy_engine_rollouts_are_the_lock_step_ones(policy):
    params, cfg = policy
    sampling = SamplingParams(max_new_tokens=5, greedy=True)
    generate = roles.make_generate(cfg, sampling, (EOS,), pad_id=0)
    generate.params = params
    key = jax.random.key(0)
    lock_step = rollout.run_episodes(UnevenEnv(), EXAMPLES, 2, generate, key, (EOS,))
    engine = _engine(policy, slots=3)
    on_engine = run_on_engine(UnevenEnv(), EXAMPLES, 2, engine, sampling, key)
    _same(on_engine, lock_step)
    # The episodes really are multi-turn, multi-context, cut off and ended early alike.
    assert {t.turns for t in on_engine} == {1, 2, 3}
    assert any(len(t.contexts) == 2 for t in on_engine)
    assert [t.group for t in on_engine if t.info.get("truncated")] == [0, 0, 4, 4]
    assert any(t.info["stopped_at_limit"] < t.turns for t in on_engine)  # some ended on EOS


def test_sampled_engine_rollouts_do_not_depend_on_the_slots(policy):
    sampling = SamplingParams(max_new_tokens=5, temperature=0.8, top_k=6)
    key = jax.random.key(7)
    runs = [
        run_on_engine(UnevenEnv(), EXAMPLES, 3, _engine(policy, slots), sampling, key)
        for slots in (1, 3)
    ]
    _same(*runs)
    # Sampled, not greedy: a group's trajectories differ.
    group = [t.contexts[0].tokens for t in runs[0] if t.group == 0]
    assert len({tuple(g) for g in group}) > 1


def test_a_refused_turn_is_an_empty_max_tokens_turn(policy):
    """Contexts grow each turn; the engine's max_len of 10 leaves room for a 2-token prompt and
    its 5 new tokens, and refuses the second turn's longer context: that turn is empty, counted,
    and the episode goes on to its end."""
    sampling = SamplingParams(max_new_tokens=5, greedy=True)
    trajs = run_on_engine(UnevenEnv(), [5, 6], 1, _engine(policy, 2, max_len=10), sampling, 0)
    for t in trajs:
        assert t.info[REFUSED] >= 1 and t.info["stopped_at_limit"] >= t.info[REFUSED]
        assert t.turns == 2 + (t.group == 1)  # examples 5 and 6 take 2 and 3 turns
    # With context_overflow="truncate_prompt" the request keeps the context's latest tokens.
    cut = dataclasses.replace(sampling, context_overflow="truncate_prompt")
    trajs = run_on_engine(UnevenEnv(), [5, 6], 1, _engine(policy, 2, max_len=10), cut, 0)
    assert all(REFUSED not in t.info for t in trajs)
    assert all(len(t.contexts[0].tokens) > 10 for t in trajs)  # the context itself stays whole


def test_stop_strings_need_an_engine_with_a_tokenizer(policy):
    sampling = SamplingParams(max_new_tokens=5)
    with pytest.raises(ValueError, match="tokenizer"):
        run_on_engine(UnevenEnv(), [3], 1, _engine(policy, 1), sampling, 0, stop_strings=("x",))


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(rollout_engine=True, mesh={"data": 2}), r"^config\.rollout_engine=True: .*mesh"),
        (dict(rollout_engine=1), r"^config\.rollout_engine=1: expected True or False"),
        (dict(engine_slots=-1), r"^config\.engine_slots=-1: must be >= 0"),
    ],
)
def test_bad_engine_fields_name_the_field(fields, message):
    section = {**_config("grpo").to_dict(), **fields}  # a plain dict: no ConfigDict type check
    with pytest.raises(ConfigError, match=message):
        trainer.RLRunConfig.from_section(section)


def test_engine_slots_default_to_the_decode_batch_else_eight():
    rc = lambda **kw: trainer.RLRunConfig.from_section(_config("grpo", rollout_engine=True, **kw))
    assert rc().slots == 8 and rc(engine_slots=3).slots == 3
    assert rc(decode_batch=4).slots == 4 and rc(decode_batch=4, engine_slots=2).slots == 2
    assert rc(mesh={"data": 1, "fsdp": 1, "tensor": 1}).rollout_engine  # one device: fine


def test_kill_and_resume_on_the_engine_gives_the_same_parameters(tmp_path):
    """The real policy samples on the engine every step (and greedily for the evaluations); a
    run killed after step 3 and resumed from its step-2 checkpoint redraws the same rollouts."""
    kw = dict(rollout_engine=True, engine_slots=3, eval_every=2)

    def run(workdir, **extra):
        config = _config("grpo", **kw, **extra)
        return _run(config, workdir, eval_examples=[3, 4], scripted=False)

    full = run(tmp_path / "full")
    assert run(tmp_path / "killed", stop_after=3)["interrupted_at"] == 3
    resumed = run(tmp_path / "killed")
    assert resumed["start_step"] == 2
    assert [h["reward"] for h in resumed["history"]] == [h["reward"] for h in full["history"]]
    assert resumed["evals"] == full["evals"]
    for a, b in zip(jax.tree.leaves(full["params"]), jax.tree.leaves(resumed["params"])):
        np.testing.assert_array_equal(a, b)


def test_the_trainer_hands_the_callers_stop_strings_to_the_engine():
    """make_rollout_generate's stops travel on the generate; an engine step with stops but no
    tokenizer to spell them stops at once, naming it."""
    from tests.rl.test_trainer import scripted_generate

    config = _config("grpo", rollout_engine=True, prompts_per_step=2, group_size=2)
    rc = trainer.RLRunConfig.from_section(config)
    cfg = toy.toy_decoder_config(config.model)
    generate = scripted_generate()
    generate.stop_strings, generate.tokenizer = ("</search>",), None
    task = trainer.RLTask(
        rc, env=toy.RepeatTargetEnv(3), params=toy.toy_params(cfg, jax.random.key(0)), cfg=cfg,
        train_examples=[3, 4], eval_examples=(), eos_ids=(EOS,), pad_id=0, generate=generate,
    )  # fmt: skip
    assert task.rollout.stop_strings == ("</search>",)
    with pytest.raises(ValueError, match="stop_strings .*</search>.* need .* tokenizer"):
        task.step(0, jax.random.key(1))
