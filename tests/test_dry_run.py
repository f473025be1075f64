"""`memjax.launch --dry_run`: one summary, then one line and exit 2 when the job cannot start."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memjax import dry_run, input_checks, launch
from tests.test_doc_commands import ROOT, parse, stand_ins  # noqa: F401 (a fixture)

# ruff: noqa: F811 (the tests take the imported fixture by name)


def test_paper_config_without_its_weights(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "memjax.launch", "--config=configs/grpo_qwen7b.py"]
        + [f"--workdir={tmp_path / 'x'}", "--dry_run"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    out = proc.stdout
    for label in ("job", "hardware", "mesh", "effective batch", "steps", "tokens per step"):
        assert f"\n  {label} " in out, out
    assert "memory_r1.train_answer" in out and "4 x H100-80GB" in out
    assert "128 prompts x 8 rollouts = 1024" in out and "of 72.0 usable" in out and ": fits" in out
    assert "time per step" in out and "whole run" in out and "(30 steps)" in out
    errors = [line for line in proc.stderr.splitlines() if line.startswith("memjax.launch:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr
    assert errors[0].startswith(
        "memjax.launch: error: config.model.source='/models/Qwen2.5-7B-Instruct': no such file"
    )
    assert "--config.model.source" in errors[0]
    assert not (tmp_path / "x").exists()  # nothing written


def _dry_run(argv, stand_ins, monkeypatch, replace=True):
    """The status and output of a dry run of `argv` in-process, its missing inputs pointed at
    stand-ins (`replace`); loading weights or building an index fails the test."""
    import memjax.checkpoints as checkpoints
    import memjax.memory.corpus as corpus

    def forbidden(*args, **kwargs):
        raise AssertionError("a dry run loaded weights or built an index")

    monkeypatch.setattr(checkpoints, "load_model", forbidden)
    monkeypatch.setattr(corpus, "build_corpus_index", forbidden)
    monkeypatch.chdir(ROOT)
    config, workdir, config_file = parse(argv)
    launch.check(config)
    if replace:
        from memjax import job_checks
        from tests.test_doc_commands import stand_in

        monkeypatch.setattr(job_checks, "INPUT_CHECKS", {})  # data: tests/test_input_checks.py
        for m in input_checks.check_weights(config):
            node = config
            *parents, leaf = m.field.split(".")
            for key in parents:
                node = node[key]
            node[leaf] = stand_in(m, stand_ins)
    return config, dry_run.run(config, config_file, workdir)


def test_the_alternating_schedule_override_is_accepted(stand_ins, monkeypatch, capsys):
    argv = [
        "--config=configs/grpo_qwen7b.py",
        "--workdir=/tmp/ans",
        "--config.job=memory_r1.train_answer",
        f"--config.manager.trained={stand_ins['model']}",
    ]
    config, status = _dry_run(argv, stand_ins, monkeypatch)
    assert status == 0, capsys.readouterr()
    assert config.manager.trained == stand_ins["model"]


def test_missing_inputs_are_named_by_their_settable_fields(stand_ins, monkeypatch, capsys):
    argv = ["--config=configs/memsearcher_qwen7b.py", "--workdir=/tmp/ms", "--dry_run"]
    argv += ["--config.retriever.encoder.source=/nowhere/e5"]
    _, status = _dry_run(argv, stand_ins, monkeypatch, replace=False)
    out = capsys.readouterr()
    assert status == 2
    config, workdir, _ = parse(argv)
    missing = input_checks.check_inputs(str(config.job), config, workdir)
    assert [m.field for m in missing[:2]] == ["model.source", "retriever.encoder.source"]
    assert "config.data." in missing[-1].line()  # the first data file, as the launch names it
    for m in missing:
        assert m.line() in out.out
    assert out.err.count("\n") == 1 and "config.model.source=" in out.err
    # Memory-R1's LoCoMo file is `data.path`, the field an override sets.
    config, workdir, _ = parse(
        ["--config=configs/grpo_qwen3b.py", "--config.data.path=/nowhere.json"]
    )
    line = input_checks.check_inputs(str(config.job), config, None)[-1].line()
    assert line.startswith("config.data.path='/nowhere.json'")


def test_a_plan_that_does_not_fit_names_the_change(stand_ins, monkeypatch, capsys):
    # PPO on 4 H100s without tensor parallelism: the sampler's weights whole on every device.
    argv = ["--config=configs/ppo_qwen7b.py", "--workdir=/tmp/p", "--dry_run"]
    argv += ["--config.rl.mesh.fsdp=4", "--config.rl.mesh.tensor=1"]
    _, status = _dry_run(argv, stand_ins, monkeypatch)
    out = capsys.readouterr()
    assert status == 2 and "DOES NOT FIT" in out.out
    line = out.err.strip()
    assert line.startswith("memjax.launch: error: config.hardware: the plan needs")
    assert "--config." in line  # the overrides that make it fit


def test_a_config_without_hardware_is_summarised_without_a_plan(stand_ins, monkeypatch, capsys):
    _, status = _dry_run(
        ["--config=configs/toy_grpo.py", "--workdir=/tmp/t"], stand_ins, monkeypatch
    )
    out = capsys.readouterr().out
    assert status == 0 and "no memory plan" in out and "16 prompts x 8 rollouts = 128" in out


@pytest.mark.parametrize("source", ["", "oracle", "packaged:smollm2"])
def test_sources_that_are_not_paths(source):
    assert input_checks.weights_problem("packaged:nothing") is not None
    if source == "packaged:smollm2":
        assert input_checks.weights_problem(source) is None
    else:
        assert source in input_checks.NOT_WEIGHTS
