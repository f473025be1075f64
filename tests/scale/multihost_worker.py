"""One process of the multi-host test: the toy GRPO recipe's sharded train step on a fixed batch.

    python tests/scale/multihost_worker.py --out DIR --devices 2 --mesh 1,2,2   # under
    JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID for a multi-process run

    python tests/scale/multihost_worker.py --out DIR --devices 1                # the reference

Every process reads its own shard of the batch's rows through grain (sharded by JAX process),
builds global arrays from them, runs `--steps` updates of the toy recipe's policy train step
(configs/toy_grpo.py: model, loss, optimizer), gathers the parameters and writes
DIR/params_<process>.npz, the per-step metrics and the row ids it read. With --checkpoint it
also saves the train state with memjax's orbax Checkpointer from all processes and restores it.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _args():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--devices", type=int, default=1, help="CPU devices of this process")
    p.add_argument("--mesh", default="", help="data,fsdp,tensor over all processes' devices")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--rows", type=int, default=16)
    p.add_argument("--checkpoint", action="store_true")
    return p.parse_args()


def _records(n: int, seq: int, vocab: int, seed: int = 0):
    """The fixed batch as n row records (what a data source would hold), row i has id i."""
    import numpy as np

    rng = np.random.default_rng(seed)
    tokens = rng.integers(3, vocab, (n, seq)).astype(np.int32)
    lengths = rng.integers(4, seq + 1, n)
    token_mask = np.arange(seq)[None] < lengths[:, None]
    loss_mask = token_mask & (np.arange(seq)[None] >= 2)  # [BOS, target] is the prompt
    tokens = np.where(token_mask, tokens, 0)
    adv = rng.normal(size=(n, 1)).astype(np.float32) * loss_mask
    old = (-2.5 + 0.3 * rng.normal(size=(n, seq))).astype(np.float32)
    ref = (-2.5 + 0.3 * rng.normal(size=(n, seq))).astype(np.float32)
    return [
        {
            "id": np.int32(i),
            "tokens": tokens[i],
            "token_mask": token_mask[i],
            "loss_mask": loss_mask[i],
            "advantages": adv[i],
            "old_logp": old[i],
            "ref_logp": ref[i],
        }
        for i in range(n)
    ]


def main() -> None:
    args = _args()
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax

    jax.config.update("jax_num_cpu_devices", args.devices)
    jax.config.update("jax_default_matmul_precision", "highest")
    sys.path.insert(0, str(REPO))
    from memjax import distributed

    plan = distributed.maybe_initialize({})  # the environment decides, as under a launcher

    import grain
    import numpy as np

    from memjax.models.decoder import decoder_abstract
    from memjax.models.params import init_params
    from memjax.parallel import TRAIN_RULES, make_mesh
    from memjax.rl import steps
    from memjax.rl.losses import PolicyLossConfig
    from memjax.rl.toy import toy_decoder_config
    from memjax.training import train_step
    from memjax.training.checkpointing import Checkpointer
    from memjax.training.optimizer import make_optimizer
    from memjax.training.sections import read_section
    from memjax.training.states import optimizer_from

    recipe = runpy.run_path(str(REPO / "configs" / "toy_grpo.py"))["get_config"]()
    cfg = toy_decoder_config(recipe.model)
    loss = read_section(PolicyLossConfig, recipe.get("loss"), "config.loss")
    opt = make_optimizer(optimizer_from(recipe.optimizer, "config.optimizer", args.steps))
    params = init_params(decoder_abstract(cfg), jax.random.key(recipe.seed))
    initial = jax.tree.map(np.asarray, params)

    # This host's rows, through grain's per-process sharding (contiguous, equal shards).
    records = _records(args.rows, int(recipe.seq_len), cfg.vocab_size)
    shard = distributed.grain_shard_options() if plan else grain.sharding.NoSharding()
    sampler = grain.samplers.IndexSampler(len(records), shard, shuffle=False, num_epochs=1)
    loader = grain.DataLoader(
        data_source=records,
        sampler=sampler,
        operations=[grain.transforms.Batch(distributed.host_batch_size(args.rows))],
        worker_count=0,
    )
    local = next(iter(loader))
    ids = local.pop("id").tolist()

    if args.mesh:
        shape = dict(zip(("data", "fsdp", "tensor"), map(int, args.mesh.split(","))))
        mesh = make_mesh(shape)
        sh = train_step.train_state_shardings(decoder_abstract(cfg), opt, mesh)
        batch = distributed.global_batch(local, mesh, TRAIN_RULES)
    else:
        mesh, sh, batch = None, None, local
    step = steps.policy_train_step(
        cfg,
        loss,
        opt,
        vocab_chunk=int(recipe.vocab_chunk),
        num_micro_batches=int(recipe.micro_batches),
        mesh=mesh,
        state_shardings=sh,
    )
    state = train_step.init_train_state(params, opt, sh)
    metrics = []
    for _ in range(args.steps):
        state, m = step(state, batch)
        metrics.append({k: float(v) for k, v in m.items()})

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pid = jax.process_index()
    if args.checkpoint:
        # Every process takes part in the save (each writes its own shards); then restore onto
        # the same shardings and check the round trip on this process's shards.
        # A directory item (an environment's memory bank): each process writes its own files.
        bank = lambda path: (path / "bank.txt").write_text(f"bank of process {pid}")  # noqa: E731
        ckpt = Checkpointer(out / "ckpt", keep_last=1)
        ckpt.save(args.steps, {"policy": state}, dirs={"bank": bank})
        ckpt.wait()
        abstract = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding),
            {"policy": state},
        )
        out_ck = ckpt.restore(abstract, dirs={"bank": lambda p: (p / "bank.txt").read_text()})
        assert out_ck["dir_bank"] == f"bank of process {pid}", out_ck["dir_bank"]
        restored = out_ck["state"]["policy"]
        for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(restored.params)):
            for sa, sb in zip(a.addressable_shards, b.addressable_shards):
                np.testing.assert_array_equal(np.asarray(sa.data), np.asarray(sb.data))
        ckpt.close()

    from jax.experimental import multihost_utils

    full = multihost_utils.process_allgather(state.params, tiled=True) if plan else state.params
    flat = {
        "/".join(str(getattr(k, "key", k)) for k in path): np.asarray(v)
        for path, v in jax.tree_util.tree_flatten_with_path(full)[0]
    }
    np.savez(out / f"params_{pid}.npz", **flat)
    moved = jax.tree.map(lambda a, b: float(np.abs(np.asarray(a) - b).max()), full, initial)
    info = {
        "process": pid,
        "processes": jax.process_count(),
        "devices": jax.device_count(),
        "local_devices": jax.local_device_count(),
        "row_ids": ids,
        "metrics": metrics,
        "max_update": max(jax.tree.leaves(moved)),
        "step": int(np.asarray(jax.device_get(state.step))),
        "distributed": plan.source if plan else None,
        "checkpoint": bool(args.checkpoint),
    }
    (out / f"info_{pid}.json").write_text(json.dumps(info))
    if plan:
        multihost_utils.sync_global_devices("memjax-worker-done")


if __name__ == "__main__":
    main()
