"""SFT: loss masks through the real chat template, bucketed batches == one row at a time,
kill-and-resume, and the job end to end (export -> load as a model source)."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ml_collections import ConfigDict

from memjax.errors import ConfigError, DataError
from memjax.models import decoder
from memjax.models.config import DecoderConfig
from memjax.models.params import init_params
from memjax.sft import batches as batches_lib
from memjax.sft.rows import Row, context_row, role_rows, trajectory_rows
from memjax.sft.run_config import SFTRunConfig
from memjax.sft.step import nll_objective
from memjax.sft.task import SFTTask
from memjax.sft.trajectories import Message, parse_trajectory, read_trajectories
from memjax.training.loop import run_loop

CFG = DecoderConfig(
    "llama",
    vocab_size=48,
    embed_dim=32,
    mlp_dim=64,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=8,
    tie_embeddings=True,
)


@pytest.fixture(scope="module")
def tokenizer():
    from memjax.checkpoints import packaged
    from memjax.checkpoints.tokenizer import load_tokenizer

    return load_tokenizer(packaged.resolve(packaged.SMOLLM2))


def _msgs(*pairs):
    return tuple(Message(r, c, r == "assistant") for r, c in pairs)


def test_only_assistant_tokens_and_their_end_of_turn_carry_loss(tokenizer):
    chat = _msgs(
        ("system", "You search."),
        ("user", "Who wrote Dune?"),
        ("assistant", "<tool_call>Dune author</tool_call>"),
        ("tool", "Dune is a 1965 novel by Frank Herbert."),
        ("assistant", "\\boxed{Frank Herbert}"),
    )
    row = context_row(tokenizer, chat)
    # The row is exactly the template's rendering of the whole chat.
    full = tokenizer.chat_text([{"role": m.role, "content": m.content} for m in chat], False)
    assert tokenizer.decode(row.tokens, skip_special_tokens=False) == full
    trained = tokenizer.decode(row.tokens[row.loss_mask], skip_special_tokens=False)
    assert trained == "<tool_call>Dune author</tool_call><|im_end|>\\boxed{Frank Herbert}<|im_end|>"
    # Every trained span ends on the end-of-turn token; nothing of system/user/tool is trained.
    end = tokenizer.hf.convert_tokens_to_ids("<|im_end|>")
    spans = np.flatnonzero(np.diff(np.r_[0, row.loss_mask.astype(int), 0]) == -1) - 1
    assert [int(row.tokens[i]) for i in spans] == [end, end]
    untrained = tokenizer.decode(row.tokens[~row.loss_mask], skip_special_tokens=False)
    for text in ("You search.", "Who wrote Dune?", "Frank Herbert.", "<|im_start|>assistant"):
        assert text in untrained


def test_consecutive_assistant_messages_are_one_growing_turn(tokenizer):
    """Search-R1's trajectory: the model's pieces and the retrieved text it did not write are
    one assistant turn, as the agent sees it; only the model's pieces are trained."""
    chat = (
        Message("user", "Who wrote Dune?", False),
        Message("assistant", "<search>Dune author</search>", True),
        Message("assistant", "\n\n<information>Dune is by Frank Herbert.</information>\n\n", False),
        Message("assistant", "<answer>Frank Herbert</answer>", True),
    )
    row = context_row(tokenizer, chat)
    merged = "".join(m.content for m in chat[1:])
    full = tokenizer.chat_text(
        [{"role": "user", "content": "Who wrote Dune?"}, {"role": "assistant", "content": merged}],
        False,
    )
    assert tokenizer.decode(row.tokens, skip_special_tokens=False) == full
    assert full.count("<|im_start|>assistant") == 1
    trained = tokenizer.decode(row.tokens[row.loss_mask], skip_special_tokens=False)
    assert trained == "<search>Dune author</search><answer>Frank Herbert</answer><|im_end|>"


def test_train_flag_overrides_the_default(tokenizer):
    raw = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "first", "train": False},
            {"role": "user", "content": "again"},
            {"role": "assistant", "content": "second"},
        ]
    }
    traj = parse_trajectory(raw, "t.jsonl:1", "x")
    row = context_row(tokenizer, traj.contexts[0])
    assert tokenizer.decode(row.tokens[row.loss_mask], skip_special_tokens=False) == (
        "second<|im_end|>"
    )


def test_role_rows_take_the_first_contexts_of_one_role_in_file_order(tokenizer):
    def traj(role, *answers):
        contexts = [[{"role": "user", "content": "q"}, {"role": "assistant", "content": a}]
                    for a in answers]  # fmt: skip
        return parse_trajectory({"role": role, "contexts": contexts}, "t.jsonl:1", role)

    data = [traj("manager", "m1"), traj("memsearcher", "s1", "s2"), traj("memsearcher", "s3")]
    rows = role_rows(tokenizer, data, "memsearcher", 3)
    trained = [tokenizer.decode(r.tokens[r.loss_mask], skip_special_tokens=False) for r in rows]
    assert trained == ["s1<|im_end|>", "s2<|im_end|>", "s3<|im_end|>"]
    assert [r.trajectory for r in rows] == [1, 1, 2]
    assert len(role_rows(tokenizer, data, "memsearcher", 2)) == 2
    assert role_rows(tokenizer, data, "answer", 5) == []


def test_bad_trajectory_lines_name_file_line_and_field(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "q"}]}\n')
    with pytest.raises(DataError, match=r"t.jsonl:1: contexts\[0\] has no trained"):
        read_trajectories(path)
    path.write_text('{"contexts": [[{"role": "robot", "content": "x"}]]}\n')
    with pytest.raises(DataError, match=r"t.jsonl:1: contexts\[0\]\[0\].role='robot'"):
        read_trajectories(path)
    path.write_bytes(b'{"messages": "\xff"}\n')
    with pytest.raises(DataError, match="t.jsonl:1: not UTF-8"):
        read_trajectories(path)
    path.write_text("")
    with pytest.raises(DataError, match="no trajectories"):
        read_trajectories(path)


def test_oversampling_repeats_matching_training_contexts_never_held_out_ones(tmp_path):
    from memjax.sft.job import SFTData, held_out, oversampled, split_trajectories

    def manager_call(i, event):
        return [
            {"role": "user", "content": f'memory {i}; an example: {{"event": "DELETE"}}'},
            {"role": "assistant", "content": f'{{"memory": [{{"id": "0", "event": "{event}"}}]}}'},
        ]

    lines = []
    for t in range(40):
        events = ["NONE", "DELETE", "ADD", "UPDATE"]
        lines.append({"id": f"m{t}", "role": "manager",
                      "contexts": [manager_call(i, e) for i, e in enumerate(events)]})  # fmt: skip
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    data = ConfigDict({"train": str(path), "eval": "", "eval_fraction": 0.25, "roles": "",
                       "max_per_role": 0, "oversample": '"event": "(DELETE|UPDATE)"',
                       "oversample_times": 3})  # fmt: skip
    train, held, _ = split_trajectories(SFTData.from_section(data))
    train, matched = oversampled(train, SFTData.from_section(data))
    n_train = sum(not held_out(f"m{t}", 0.25) for t in range(40))
    assert 0 < n_train < 40 and len(train) == n_train and len(held) == 40 - n_train
    # The pattern is searched in trained text only (the prompt's example does not count).
    assert all(len(t.contexts) == 1 + 3 + 1 + 3 for t in train)
    assert all(len(t.contexts) == 4 for t in held)
    assert matched == 2 * n_train

    with pytest.raises(ConfigError, match="oversample='\\('"):
        oversampled(train, SFTData.from_section(ConfigDict({**data.to_dict(), "oversample": "("})))
    with pytest.raises(ConfigError, match="oversample_times=0"):
        oversampled(
            train, SFTData.from_section(ConfigDict({**data.to_dict(), "oversample_times": 0}))
        )


def _random_rows(n: int, seed: int = 0, lengths=None) -> list[Row]:
    """n rows of random tokens, each of a random length in [5, 30) (or drawn from `lengths`),
    with loss on a random tail."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        length = int(rng.integers(5, 30) if lengths is None else rng.choice(lengths))
        mask = np.zeros(length, bool)
        mask[int(rng.integers(1, length - 2)) :] = True
        rows.append(Row(rng.integers(3, CFG.vocab_size, length).astype(np.int32), mask, i))
    return rows


@pytest.mark.parametrize(
    "agg_mode", ["token-mean", pytest.param("seq-mean-token-mean", marks=pytest.mark.heavy)]
)
def test_bucketed_batch_equals_one_row_at_a_time(agg_mode):
    jax.config.update("jax_default_matmul_precision", "highest")
    params = init_params(decoder.decoder_abstract(CFG), jax.random.key(0))
    # Three row lengths among six rows: the bucket pads them, and the one-row reference (each
    # row alone, no padding) compiles once per length rather than once per row.
    rows = _random_rows(6, lengths=(9, 17, 30))
    assert len({len(r.tokens) for r in rows}) == 3
    objective = nll_objective(CFG, agg_mode, vocab_chunk=16)
    batch = batches_lib.make_batch(rows, range(6), 0, bucket=16, max_len=64)
    den = 6.0 if agg_mode != "token-mean" else float(batch["loss_mask"].sum())
    value_and_grad = jax.jit(jax.value_and_grad(lambda p, b: objective(p, b)[0] / den))

    def arrays(b):
        return {k: jnp.asarray(v) for k, v in b.items()}

    loss, grads = value_and_grad(params, arrays(batch))
    ref_loss, ref_grads = 0.0, jax.tree.map(jnp.zeros_like, params)
    for r in rows:  # one row per batch: no padding at all
        single = batches_lib.make_batch([r], [0], 0, bucket=1, max_len=64)
        row_loss, row_grads = value_and_grad(params, arrays(single))
        ref_loss, ref_grads = ref_loss + row_loss, jax.tree.map(jnp.add, ref_grads, row_grads)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-5, atol=1e-6)
    for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(ref_grads)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_token_mean_over_the_data_weighs_every_token_the_same_in_any_bucket():
    """A batch of short rows and one of long rows: over "data" the loss is the batch's NLL
    sum over rows x the data's tokens per row (a token's weight does not depend on its bucket);
    over "batch" it is the batch's own token mean, which weighs the short rows' tokens more."""
    import optax

    from memjax.sft.step import sft_train_step
    from memjax.training.train_step import init_train_state

    params = init_params(decoder.decoder_abstract(CFG), jax.random.key(0))
    rows = _random_rows(6)
    tokens_per_row = float(np.mean([r.loss_mask.sum() for r in rows]))
    by_length = sorted(range(6), key=lambda i: int(rows[i].loss_mask.sum()))
    optimizer = optax.sgd(0.0)  # the loss only, the parameters unchanged
    steps = {
        "data": sft_train_step(CFG, optimizer, tokens_per_row=tokens_per_row, donate=False),
        "batch": sft_train_step(CFG, optimizer, donate=False),
    }
    state = init_train_state(params, optimizer)
    for picked in (by_length[:3], by_length[3:]):
        batch = batches_lib.make_batch(rows, picked, 0, bucket=16, max_len=64)
        jb = {k: jnp.asarray(v) for k, v in batch.items()}
        nll_sum = float(nll_objective(CFG, "token-mean", vocab_chunk=16)(params, jb)[0])
        tokens = float(batch["loss_mask"].sum())
        _, over_data = steps["data"](state, jb)
        _, over_batch = steps["batch"](state, jb)
        np.testing.assert_allclose(over_data["loss"], nll_sum / (3 * tokens_per_row), rtol=1e-5)
        np.testing.assert_allclose(over_batch["loss"], nll_sum / tokens, rtol=1e-5)
        np.testing.assert_allclose(over_data["token_nll"], nll_sum / tokens, rtol=1e-5)


def test_batch_plan_covers_every_row_with_fixed_batch_shapes():
    lengths = [5, 70, 12, 64, 65, 3, 130, 9, 40]
    plan = batches_lib.batch_plan(lengths, batch_rows=2, bucket=64, max_len=256, seed=0, epochs=2)
    assert all(len(b) == 2 for b in plan)
    per_epoch = batches_lib.batches_per_epoch(lengths, batch_rows=2, bucket=64, max_len=256)
    assert len(plan) == 2 * per_epoch
    for epoch in (plan[:per_epoch], plan[per_epoch:]):
        assert set(np.concatenate(epoch)) == set(range(len(lengths)))
        for b in epoch:  # one bucket per batch: padding bounded by the bucket width
            keys = {batches_lib.bucket_length(lengths[i], 64, 256) for i in b}
            assert len(keys) == 1


def _sft_config(**loop):
    section = ConfigDict(
        {
            "num_steps": 6,
            "seed": 0,
            "eval_every": 3,
            "checkpoint_every": 2,
            "keep_last": 2,
            "keep_best": 1,
            "plot_every": 3,
            "stop_after": None,
            "batch_rows": 4,
            "micro_batches": 2,
            "max_seq_len": 64,
            "bucket": 16,
            "agg_mode": "token-mean",
            "vocab_chunk": 16,
            "eval_batch_rows": 4,
            "optimizer": {"learning_rate": 3e-3, "weight_decay": 0.0},
            "mesh": None,
        }
    )
    section.update(loop)
    return SFTRunConfig.from_section(section)


def _sft_run(workdir, **loop):
    rc = _sft_config(**loop)
    params = init_params(decoder.decoder_abstract(CFG), jax.random.key(1))
    task = SFTTask(
        rc, params=params, cfg=CFG, train_rows=_random_rows(10), eval_rows=_random_rows(4, 7)
    )
    return run_loop(task, rc.loop, workdir, progress=False)


def test_sft_learns_and_kill_and_resume_gives_identical_parameters(tmp_path):
    full = _sft_run(tmp_path / "full")
    assert full["history"][-1]["loss"] < full["history"][0]["loss"]
    # Dies before step 6; saved at 2, 3 (evaluated, ranked by keep_best), 4.
    killed = _sft_run(tmp_path / "killed", stop_after=5)
    assert killed["interrupted_at"] == 5
    resumed = _sft_run(tmp_path / "killed")
    assert resumed["start_step"] == 4
    assert [h["loss"] for h in resumed["history"]] == [h["loss"] for h in full["history"]]
    for a, b in zip(jax.tree.leaves(full["params"]), jax.tree.leaves(resumed["params"])):
        np.testing.assert_array_equal(a, b)
    assert [e["step"] for e in full["evals"]] == [3, 6]
    assert (tmp_path / "full" / "loss_curve.png").stat().st_size > 1000

    # Another model shape in the same workdir: refused in one line naming the field.
    import dataclasses

    from memjax.errors import CheckpointError

    other = dataclasses.replace(CFG, num_layers=1)
    rc = _sft_config()
    params = init_params(decoder.decoder_abstract(other), jax.random.key(1))
    task = SFTTask(rc, params=params, cfg=other, train_rows=_random_rows(10))
    with pytest.raises(CheckpointError, match="num_layers"):
        run_loop(task, rc.loop, tmp_path / "full", progress=False)


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("batch_rows", 0, r"config.sft.batch_rows=0: must be >= 1"),
        ("micro_batches", 3, r"config.sft.micro_batches=3: must divide batch_rows=4"),
        ("num_steps", 0, r"config.sft.num_steps=0: must be >= 1"),
        ("agg_mode", "mean", r"config.sft.agg_mode='mean'"),
        ("optimizer", {"learning_rate": -1.0}, r"config.sft.optimizer.learning_rate=-1.0"),
    ],
)
def test_bad_sft_values_name_their_field(field, value, match):
    with pytest.raises(ConfigError, match=match):
        _sft_config(**{field: value})


def test_sft_job_end_to_end_exports_a_loadable_policy(tmp_path, tokenizer):
    """sft.train on a tiny random decoder with SmolLM2's tokenizer: rows through the template,
    checkpoints, summary, and the exported policy loads back as a model source."""
    from memjax.checkpoints import load_model
    from memjax.checkpoints.decoder_io import export_hf_decoder
    from memjax.sft.job import SFTJob, train_job

    cfg = DecoderConfig(
        "llama",
        vocab_size=tokenizer.vocab_size,
        embed_dim=16,
        mlp_dim=32,
        num_layers=1,
        num_heads=2,
        num_kv_heads=1,
        head_dim=8,
        tie_embeddings=True,
        max_position_embeddings=256,
    )
    base = export_hf_decoder(
        init_params(decoder.decoder_abstract(cfg), jax.random.key(0)),
        cfg,
        tmp_path / "base",
        tokenizer=tokenizer,
    )
    data = tmp_path / "traj.jsonl"
    lines = []
    for i in range(12):
        msgs = [
            {"role": "user", "content": f"What is {i} plus one?"},
            {"role": "assistant", "content": f"**Answer:** {i + 1}"},
        ]
        lines.append(json.dumps({"id": f"q{i}", "contexts": [msgs]}))
    data.write_text("\n".join(lines) + "\n")
    config = ConfigDict(
        {
            "job": "sft.train",
            "model": {"source": str(base), "param_dtype": "float32", "remat": "none"},
            "data": {"train": str(data), "eval": "", "eval_fraction": 0.25},
            "export": True,
        }
    )
    config.sft = ConfigDict(
        {
            "num_steps": 3,
            "eval_every": 3,
            "batch_rows": 4,
            "max_seq_len": 128,
            "bucket": 32,
            "vocab_chunk": 8192,
            "optimizer": {"learning_rate": 1e-3},
        }
    )
    result = train_job(SFTJob.from_config(config), str(tmp_path / "run"))
    summary = json.loads((tmp_path / "run" / "sft_summary.json").read_text())
    assert summary["train"]["trajectories"] + summary["eval"]["trajectories"] == 12
    assert summary["eval"]["trajectories"] >= 1 and summary["train"]["rows"] >= 4
    assert np.isfinite(result["evals"][-1]["nll"])
    loaded = load_model(str(tmp_path / "run"))  # the workdir is a model source
    assert loaded.path == tmp_path / "run" / "policy"
    for a, b in zip(jax.tree.leaves(result["params"]), jax.tree.leaves(loaded.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert loaded.tokenizer.chat([{"role": "user", "content": "hi"}]) == tokenizer.chat(
        [{"role": "user", "content": "hi"}]
    )
    rows, _ = trajectory_rows(loaded.tokenizer, read_trajectories(data), 128)
    assert len(rows) == 12
