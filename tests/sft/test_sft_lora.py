"""SFT with LoRA (`config.sft.lora.rank`): the adapters learn over a frozen base, a killed run
resumes to identical adapters, and the exported weights are the merged base."""

import jax
import numpy as np

from memjax.models import decoder
from memjax.models.params import flatten_with_names, init_params
from memjax.sft.task import SFTTask
from memjax.training.loop import run_loop
from tests.sft.test_sft import CFG, _random_rows, _sft_config

LORA = {"rank": 4, "alpha": 8.0, "targets": "q,v,o,down"}


def _run(workdir, **loop):
    rc = _sft_config(lora=LORA, **loop)
    base = init_params(decoder.decoder_abstract(CFG), jax.random.key(1))
    task = SFTTask(
        rc, params=base, cfg=CFG, train_rows=_random_rows(10), eval_rows=_random_rows(4, 7)
    )
    return task, base, run_loop(task, rc.loop, workdir, progress=False)


def test_lora_sft_learns_and_resumes_to_identical_adapters(tmp_path):
    task, base, full = _run(tmp_path / "full")
    assert full["history"][-1]["loss"] < full["history"][0]["loss"]
    adapters = full["params"]
    assert set(adapters["layers"]) == {"q", "v", "o", "down"}
    _, _, killed = _run(tmp_path / "killed", stop_after=5)
    assert killed["interrupted_at"] == 5
    _, _, resumed = _run(tmp_path / "killed")
    assert resumed["start_step"] == 4
    a, b = flatten_with_names(adapters), flatten_with_names(resumed["params"])
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    # The job exports the merged base: the base's layout, changed only on the targets.
    merged = task.exported_params(adapters)
    np.testing.assert_array_equal(merged["embed"], base["embed"])
    np.testing.assert_array_equal(merged["layers"]["k"], base["layers"]["k"])
    assert np.abs(np.asarray(merged["layers"]["q"] - base["layers"]["q"])).max() > 0
