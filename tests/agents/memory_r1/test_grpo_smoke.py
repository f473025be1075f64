"""GRPO through the real Memory-R1 environments on a tiny random decoder (real sampler, real
trainer): the answer agent and the memory manager each take two steps; rewards come from the
environments, checkpoints and the reward curve land in the workdir, parameters change."""

import dataclasses

import jax
import numpy as np
import pytest
from ml_collections import ConfigDict

from memjax.agents.memory_r1.answer_env import AnswerEnvironment, AnswerSettings
from memjax.agents.memory_r1.manager_env import ManagerEnvironment, ManagerSettings
from memjax.experiments.demo import DemoSettings, demo_examples
from memjax.models.decoder import decoder_abstract
from memjax.models.params import init_params
from memjax.rl import toy
from memjax.rl.run_config import RLRunConfig
from memjax.rl.trainer import train
from tests.agents.memory_r1 import helpers
from tests.agents.memory_r1.test_reward_wiring import CONVERSATION, teacher_facts


class WordTokenizer:
    """Whitespace words of a closed vocabulary as tokens (ids from 3; 1 unknown, 2 EOS): keeps
    the manager's long prompt short enough for a tiny model's test."""

    pad_id, eos_ids = 0, (2,)

    def __init__(self, texts):
        words = sorted({w for t in texts for w in t.split()})
        self.words = ["<pad>", "<unk>", "<eos>", *words]
        self.ids = {w: i for i, w in enumerate(self.words)}

    def encode(self, text, add_special_tokens=False):
        return [self.ids.get(w, 1) for w in text.split()]

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(self.words[i] for i in ids if i > 2)

    def chat(self, messages, add_generation_prompt=True):
        return self.encode(" ".join(m["content"] for m in messages))


class TieBrokenAnswerEnvironment(AnswerEnvironment):
    """The answer environment with the n-th completion it scores given n * 1e-3 on top of its
    reward. A tiny random model answers in random bytes, which score 0 against any gold answer;
    a group whose rewards all tie has no advantage and GRPO leaves the parameters as they
    were. The tie-break keeps every group's rewards apart, so the update is never zero,
    whichever way the samples fall."""

    scored = 0

    def step(self, state, completion, stop_reason):
        state, result = super().step(state, completion, stop_reason)
        self.scored += 1
        return state, dataclasses.replace(result, reward=result.reward + 1e-3 * self.scored)


def _config(seq_len, max_new):
    c = ConfigDict()
    c.algo, c.seed, c.num_steps = "grpo", 0, 2
    c.prompts_per_step, c.group_size = 2, 4
    c.epochs, c.mini_batches, c.micro_batches = 1, 1, 1
    c.seq_len, c.vocab_chunk, c.old_logprobs = seq_len, 512, "trainer"
    c.sampling = ConfigDict(dict(temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=max_new))
    c.loss = ConfigDict(dict(kl_coef=0.001, kl_kind="k3", agg_mode="token-mean"))
    c.optimizer = ConfigDict(dict(learning_rate=1e-3, warmup_steps=0, weight_decay=0.0))
    c.eval_every, c.checkpoint_every, c.plot_every = 2, 2, 1
    c.keep_last, c.keep_best, c.mesh, c.stop_after = 1, 1, None, None
    return RLRunConfig.from_section(c)


def _model(vocab, seed=0):
    cfg = toy.toy_decoder_config(
        ConfigDict(
            dict(
                vocab_size=vocab,
                embed_dim=32,
                mlp_dim=64,
                num_layers=2,
                num_heads=2,
                num_kv_heads=1,
            )
        )
    )
    cfg = cfg.__class__(**{**cfg.__dict__, "max_position_embeddings": 4096})
    return init_params(decoder_abstract(cfg), jax.random.key(seed)), cfg


def _changed(before, after):
    return any(
        not np.allclose(a, b) for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(after))
    )


@pytest.mark.heavy
def test_grpo_answer_agent_and_manager_on_tiny_model(tmp_path):
    from memjax.agents.memory_r1.snapshots import build_manager_examples
    from memjax.data.locomo import parse_locomo
    from memjax.recipes.memory_r1 import memory_r1_config

    # Answer agent: synthetic conversations, raw-turn banks, the short prompt, F1 reward.
    config = memory_r1_config("unused", locomo_path="synthetic")
    config.demo = ConfigDict(
        dict(
            train_conversations=2,
            eval_conversations=1,
            sessions_per_conversation=2,
            require_answer_in_memories=False,
            max_eval_examples=2,
        )
    )
    config.answer_agent.k_per_speaker = 1
    train_ex, held_out = demo_examples(DemoSettings.from_config(config), helpers.BagOfWords())
    tok = helpers.ByteTokenizer()
    env = TieBrokenAnswerEnvironment(
        tok, AnswerSettings(style="short", metric="f1", answer_prefix="**Answer:**")
    )
    params, cfg = _model(tok.vocab_size)
    initial = jax.tree.map(np.array, params)  # the trainer donates (and deletes) params
    seq = max(len(env.prompt_ids(e)) for e in train_ex + held_out) + 8
    out = train(
        _config(seq, 8), tmp_path / "answer", env=env, params=params, cfg=cfg,
        train_examples=train_ex, eval_examples=held_out, eos_ids=tok.eos_ids, pad_id=0,
        progress=False,
    )  # fmt: skip
    assert [h["step"] for h in out["history"]] == [1, 2]
    assert all("env/f1" in h and "env/has_marker" in h for h in out["history"])
    assert _changed(initial, out["params"])
    assert (tmp_path / "answer" / "reward_curve.png").is_file()
    assert any((tmp_path / "answer" / "checkpoints").iterdir())

    # Manager: cached snapshots, the scripted frozen answer agent, EM reward.
    conv = parse_locomo([CONVERSATION])
    examples, _ = build_manager_examples(
        conv, [(conv[0].sample_id, q) for q in conv[0].qa], teacher_facts,
        helpers.add_all_manager, helpers.BagOfWords(), tmp_path / "snapshots", teacher="scripted",
    )  # fmt: skip
    probe = ManagerEnvironment(
        helpers.ByteTokenizer(), helpers.BagOfWords(), helpers.keyword_answerer
    )
    texts = [probe.messages(e)[0][0]["content"] for e in examples]
    wtok = WordTokenizer(texts + ['{"memory": [{"id": "0", "event": "NONE"}]}'])
    menv = ManagerEnvironment(
        wtok, helpers.BagOfWords(), helpers.keyword_answerer, ManagerSettings()
    )
    params, cfg = _model(len(wtok.words), seed=1)
    seq = max(len(menv.reset(e)[1]) for e in examples) + 8
    out = train(
        _config(seq, 8), tmp_path / "manager", env=menv, params=params, cfg=cfg,
        train_examples=examples, eval_examples=examples[:1], eos_ids=wtok.eos_ids, pad_id=0,
        progress=False,
    )  # fmt: skip
    # Random words are never valid JSON: nothing applied, so the snapshot's answer decides.
    hist = out["history"]
    assert [h["step"] for h in hist] == [1, 2] and all(h["env/well_formed"] == 0 for h in hist)
    assert all(0.0 <= h["reward"] <= 1.0 for h in hist)
    assert np.isfinite(out["history"][-1]["reward"])
