"""One SFT step for the shared loop (`memjax.training.loop`): a length-bucketed batch of rows,
one NLL update. Evaluation: held-out token NLL, plus the agent's own task metric when given.

    task = SFTTask(rc, params=params, cfg=cfg, train_rows=rows, eval_rows=held_out, pad_id=0)
    result = run_loop(task, rc.loop, workdir)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import grain
import numpy as np

from memjax.errors import DataError
from memjax.models.shared_prefix import prefix_groups
from memjax.parallel import TRAIN_RULES
from memjax.sft.batches import batch_plan, batches_per_epoch, make_batch
from memjax.sft.rows import Row
from memjax.sft.run_config import SFTRunConfig
from memjax.sft.step import sft_train_step
from memjax.training import host_batches
from memjax.training.logprobs import make_logprob_fn
from memjax.training.loop import model_spec
from memjax.training.states import build_state, mesh_from
from memjax.training.trained_weights import trained_weights


class SFTTask:
    label = "sft"
    record_prefix = "data"
    curve = "loss"
    curve_file = "loss_curve.png"
    eval_key = "nll"
    best_mode = "min"
    source = None  # no environment state to checkpoint

    def __init__(
        self,
        rc: SFTRunConfig,
        *,
        params,
        cfg,
        train_rows: list[Row],
        eval_rows: list[Row] = (),
        pad_id: int = 0,
        task_eval: Callable[[object], dict[str, float]] | None = None,
        data_spec: dict | None = None,
    ):
        if not train_rows:
            raise DataError("no training rows (every trajectory was empty or dropped)")
        if rc.lora is not None:
            cfg = cfg.replace(lora=rc.lora)
        self.rc, self.cfg, self.pad_id = rc, cfg, pad_id
        self.rows, self.eval_rows = list(train_rows), list(eval_rows)
        self.task_eval = task_eval
        self.data_spec = dict(data_spec or {})  # what the rows were read from (resume checks it)
        self.has_eval = bool(self.eval_rows)  # held-out NLL ranks the checkpoints
        self.mesh = mesh_from(rc.mesh)
        self.rules = TRAIN_RULES if self.mesh is not None else None
        # Which weights train: all, or (LoRA) adapters over a frozen base beside the state.
        self.weights = trained_weights(params, cfg, lora=rc.lora, seed=rc.loop.seed, mesh=self.mesh)
        policy = self.weights.policy
        built = build_state(policy.initial, policy.abstract, rc.optimizer, self.mesh)
        self.states = {"policy": built.state}
        b = rc.batching
        self.train_step = sft_train_step(
            cfg,
            built.optimizer,
            agg_mode=b.agg_mode,
            tokens_per_row=self._tokens_per_row() if b.token_mean_over == "data" else None,
            vocab_chunk=b.vocab_chunk,
            num_micro_batches=b.micro_batches,
            mesh=self.mesh,
            state_shardings=built.shardings,
            **policy.step_kwargs,
        )
        self.train_step = policy.bind(self.train_step)
        self.logprob_fn = make_logprob_fn(
            cfg, chunk=b.vocab_chunk, mesh=self.mesh, rules=self.rules
        )
        self.data_iterator = self._plan_iterator()

    def _tokens_per_row(self) -> float:
        """The training rows' mean trained tokens (token-mean's fixed per-row denominator)."""
        return max(1.0, float(np.mean([np.sum(r.loss_mask) for r in self.rows])))

    def _plan_iterator(self):
        """The batch plan for enough epochs to cover num_steps, as a checkpointable iterator."""
        b = self.rc.batching
        lengths = [len(r.tokens) for r in self.rows]
        groups = None
        if b.shared_prefix:  # rows that open alike batched together
            tokens, masks = [r.tokens for r in self.rows], [r.loss_mask for r in self.rows]
            groups = prefix_groups(tokens, masks, b.shared_prefix)
        shape = dict(batch_rows=b.batch_rows, bucket=b.bucket, max_len=b.max_seq_len, groups=groups)
        per_epoch = batches_per_epoch(lengths, **shape)
        self.epochs = math.ceil(self.rc.loop.num_steps / per_epoch)
        plan = batch_plan(lengths, seed=self.rc.loop.seed, epochs=self.epochs, **shape)
        return iter(grain.MapDataset.source([p.tolist() for p in plan]).to_iter_dataset())

    def _batch(self, indices) -> dict:
        b = self.rc.batching
        return make_batch(
            self.rows,
            indices,
            self.pad_id,
            bucket=b.bucket,
            max_len=b.max_seq_len,
            share_prefix=b.shared_prefix,
        )

    def step(self, step: int, key) -> tuple[dict, dict]:
        t0 = time.perf_counter()
        batch = self._batch(next(self.data_iterator))
        global_batch = host_batches.to_global(batch, self.mesh, self.rules)
        self.states["policy"], m = self.train_step(self.states["policy"], global_batch)
        metrics = {k: float(v) for k, v in m.items()}
        shared = batch["prefix"].size if "prefix" in batch else 0  # computed once, not B times
        row_tokens = float(batch["token_mask"].sum() + shared)  # the rows' tokens, as plain
        record = {
            "loss": metrics["loss"],
            "token_nll": metrics["token_nll"],
            "trained_tokens": float(batch["loss_mask"].sum()),
            "padding": float(1.0 - batch["token_mask"].mean()),
            "row_len": float(batch["tokens"].shape[1] + shared // len(batch["tokens"])),
            "shared_prefix": float(shared // len(batch["tokens"])),
            "step_s": time.perf_counter() - t0,
            "tokens_per_s": row_tokens / (time.perf_counter() - t0),
        }
        return record, metrics

    def held_out_nll(self, params) -> float:
        """Mean NLL per trained token over every held-out row."""
        b = self.rc.batching
        order = sorted(range(len(self.eval_rows)), key=lambda i: len(self.eval_rows[i].tokens))
        total, count = 0.0, 0.0
        for j in range(0, len(order), b.eval_batch_rows):
            idx = order[j : j + b.eval_batch_rows]
            idx = idx + [idx[-1]] * (b.eval_batch_rows - len(idx))  # one batch shape per bucket
            batch = make_batch(
                self.eval_rows, idx, self.pad_id, bucket=b.bucket, max_len=b.max_seq_len
            )
            real = np.zeros(len(idx), bool)
            real[: len(order[j : j + b.eval_batch_rows])] = True
            logp = np.asarray(self.logprob_fn(params, batch["tokens"], batch["token_mask"]))
            mask = batch["loss_mask"] & real[:, None]
            total += float(-(logp * mask).sum())
            count += float(mask.sum())
        return total / max(count, 1.0)

    def evaluate(self, step: int, key) -> dict[str, float]:
        params = self.states["policy"].params
        out = {"nll": self.held_out_nll(self.weights.for_logprobs(params))}
        if self.task_eval is not None:  # the agent samples: with LoRA, adapters merged
            out.update(self.task_eval(self.weights.for_sampler(params)))
        return out

    def exported_params(self, params):
        """What the job writes as HF weights: the params, or with LoRA the merged base."""
        return self.weights.for_sampler(params)

    def postfix(self, record, metrics) -> dict[str, str]:
        return {"loss": f"{record['loss']:.3f}"}

    def run_spec(self) -> dict:
        spec = {"algo": "sft", **model_spec(self.cfg), **self.data_spec}
        if self.rc.batching.shared_prefix:  # it changes the batch plan a resume replays
            spec["shared_prefix"] = self.rc.batching.shared_prefix
        if self.weights.lora_pointer is not None:  # the adapters' settings and their base
            spec["lora"] = self.weights.lora_pointer
        return spec


__all__ = ["SFTTask"]
