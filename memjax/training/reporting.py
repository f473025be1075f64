"""What a run shows while it trains: TensorBoard scalars, the curve PNG (and its numbers in
curves.json, for reports that tabulate them) and the progress bar.

Only process 0 reports (`RunReport(..., primary=False)` does nothing), so a multi-host run writes
one set of event files and one plot.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from memjax import workdir as workdir_lib

CURVES_FILE = "curves.json"  # {"curve", "eval_key", "history": [...], "evals": [...]}


class RunReport:
    """TensorBoard events in workdir/tb, workdir/<curve_file> and a tqdm bar with ETA."""

    def __init__(
        self,
        workdir: Path,
        *,
        label: str,
        curve: str,
        eval_key: str,
        curve_file: str = "reward_curve.png",
        total_steps: int,
        start_step: int,
        primary: bool = True,
        progress: bool = True,
    ):
        self.workdir = workdir_lib.path(workdir)  # a local folder or gs://
        self.curve = curve  # the history key plotted ("reward", "loss")
        self.eval_key = eval_key  # the eval record's key plotted as points
        self.curve_file = curve_file
        self.primary = primary
        self.writer = None
        self.bar = None
        if not primary:
            return
        from tensorboardX import SummaryWriter

        _route_remote_events()
        self.writer = SummaryWriter(str(self.workdir / "tb"))
        if progress:
            from tqdm import tqdm

            self.bar = tqdm(
                total=total_steps, initial=start_step, desc=label, unit="step", dynamic_ncols=True
            )

    def scalars(self, step: int, metrics: dict[str, float], prefix: str) -> None:
        if self.writer is None:
            return
        for k, v in metrics.items():
            self.writer.add_scalar(f"{prefix}/{k}", float(v), step)
        self.writer.flush()

    def advance(self, **postfix: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix(**postfix)
            self.bar.update(1)

    def plot(self, history: list[dict], evals: list[dict]) -> None:
        """The train curve and the eval points, written atomically (a viewer never sees half a
        file)."""
        if not self.primary:
            return
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        points = [h for h in history if self.curve in h]
        ax.plot([h["step"] for h in points], [h[self.curve] for h in points], label="train")
        if evals:
            ax.plot(
                [e["step"] for e in evals], [e[self.eval_key] for e in evals], "o-", label="eval"
            )
        ax.set_xlabel("step")
        ax.set_ylabel(f"mean {self.curve}")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=80)
        plt.close(fig)
        workdir_lib.write_bytes(self.workdir / self.curve_file, png.getvalue())
        self._save_numbers(history, evals)

    def _save_numbers(self, history: list[dict], evals: list[dict]) -> None:
        numbers = {"curve": self.curve, "eval_key": self.eval_key}
        numbers |= {"history": history, "evals": evals}
        workdir_lib.write_text(self.workdir / CURVES_FILE, json.dumps(numbers, default=float))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.writer is not None:
            self.writer.close()


def summary_line(result: dict, tail: int = 5) -> str:
    """The one JSON line a recipe prints last."""
    h = result["history"]
    key = "reward" if not h or "reward" in h[0] else "loss"
    out = {
        f"initial_{key}": round(h[0][key], 4) if h else None,
        f"final_{key}": round(float(np.mean([r[key] for r in h[-tail:]])), 4) if h else None,
        "steps": h[-1]["step"] if h else 0,
        "wall_s": round(result["wall_s"], 1),
    }
    if result.get("exported_step", out["steps"]) != out["steps"]:
        out["exported_step"] = result["exported_step"]  # export_from="best" chose an earlier step
    if result.get("evals"):
        last = result["evals"][-1]
        name = next(k for k in last if k != "step")
        out[f"eval_{name}"] = round(last[name], 4)
    return json.dumps(out)


class _RemoteEventFile:
    """A TensorBoard event file in a bucket: buffered, uploaded whole at every flush (objects
    cannot be appended to; a run's scalars are a few hundred kilobytes)."""

    def __init__(self, target: str):
        self.target = workdir_lib.path(target)
        self.buffer = io.BytesIO()

    def write(self, data: bytes) -> None:
        self.buffer.write(data)

    def flush(self) -> None:
        self.target.write_bytes(self.buffer.getvalue())

    def close(self) -> None:
        self.flush()


class _RemoteEvents:
    """tensorboardX's writer factory for gs:// logdirs, through the workdir's path type (gcsfs)
    rather than tensorboardX's own google-cloud-storage client."""

    def open(self, target: str) -> _RemoteEventFile:
        return _RemoteEventFile(target)

    def directory_check(self, target: str) -> None:
        pass  # a bucket has no folders to create


def _route_remote_events() -> None:
    from tensorboardX import record_writer

    for scheme in workdir_lib.REMOTE_SCHEMES:
        record_writer.register_writer_factory(scheme.split(":")[0], _RemoteEvents())


__all__ = ["RunReport", "CURVES_FILE", "summary_line"]
