"""The stage runner with a stand-in interpreter (a shell script that records its arguments and
fails on demand): what runs, what is skipped, what is refused, what a failure says; and the
reproduction's plan against the real config files (every override names a real field)."""

import json
import os
import runpy
import stat
import time

import pytest

from memjax.errors import ConfigError
from memjax.experiments.reproduce import job
from memjax.experiments.reproduce.stages import (
    ATTEMPTS_FILE,
    DONE_FILE,
    LOG_FILE,
    REPO_ROOT,
    Stage,
    StageError,
    StageRunner,
)

CONFIG = REPO_ROOT / "configs" / "reproduce_cpu.py"


def _fake_python(tmp_path):
    """Appends its argv to calls.txt; exits 3 (after a last log line) when FAIL exists."""
    script = tmp_path / "python"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {tmp_path}/calls.txt\n'
        f'if [ -e {tmp_path}/FAIL ]; then echo "boom: out of cheese"; exit 3; fi\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def _calls(tmp_path):
    path = tmp_path / "calls.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_a_stage_runs_once_and_its_overrides_name_earlier_stages_workdirs(tmp_path):
    runner = StageRunner(tmp_path / "root", python=_fake_python(tmp_path), echo=lambda _: None)
    stage = Stage("b", "configs/sft_cpu.py", ("data.train={a}/trajectories.jsonl",))
    runner.run(stage)
    (call,) = _calls(tmp_path)
    assert f"--workdir={tmp_path / 'root' / 'b'}" in call
    assert f"--config.data.train={tmp_path / 'root' / 'a'}/trajectories.jsonl" in call
    record = json.loads((tmp_path / "root" / "b" / DONE_FILE).read_text())
    assert record["stage"] == "b" and record["wall_s"] >= 0
    runner.run(stage)  # finished: skipped
    assert len(_calls(tmp_path)) == 1


def test_a_finished_stage_with_another_command_is_refused_in_one_line(tmp_path):
    runner = StageRunner(tmp_path / "root", python=_fake_python(tmp_path), echo=lambda _: None)
    runner.run(Stage("b", "configs/sft_cpu.py", ("sft.num_steps=4",)))
    with pytest.raises(StageError, match=r"stage b finished with another command.*remove"):
        runner.run(Stage("b", "configs/sft_cpu.py", ("sft.num_steps=8",)))


def test_the_report_names_a_stale_stage_and_leaves_it_out(tmp_path):
    """A reproduction that runs one more stage still reports when an earlier stage finished
    with other settings: that stage is named stale, not read and not fatal."""
    said = []
    runner = StageRunner(tmp_path / "root", python=_fake_python(tmp_path), echo=said.append)
    runner.run(Stage("b", "configs/sft_cpu.py", ("sft.num_steps=4",)))
    runner.run(Stage("c", "configs/sft_cpu.py", ("sft.num_steps=2",)))
    stages = [
        Stage("b", "configs/sft_cpu.py", ("sft.num_steps=8",)),  # now planned differently
        Stage("c", "configs/sft_cpu.py", ("sft.num_steps=2",)),
    ]
    report = job.build_report(stages, runner, judge="none")
    assert list(report["json"]["stale"]) == ["b"]
    assert "finished with another command" in report["json"]["stale"]["b"]
    assert report["json"]["wall_s"]["b"] is None and report["json"]["wall_s"]["c"] is not None
    assert "| b | stale, left out |" in report["markdown"]
    assert any(line.startswith("b: left out of the report: ") for line in said)


def test_a_stage_that_read_an_earlier_stage_since_rerun_differently_is_refused(tmp_path):
    runner = StageRunner(tmp_path / "root", python=_fake_python(tmp_path), echo=lambda _: None)
    sft = Stage("sft", "configs/sft_cpu.py", ("sft.num_steps=4",))
    evaluation = Stage("eval", "configs/memory_r1_synthetic_cpu.py", ("model.source={sft}",))
    runner.run(sft)
    runner.run(evaluation)
    assert runner.finished(evaluation)["upstream"] == {"sft": runner.finished(sft)["stage_sha256"]}
    # The same SFT settings run again: the evaluation still stands.
    (tmp_path / "root" / "sft" / DONE_FILE).unlink()
    runner.run(sft)
    assert runner.finished(evaluation) is not None
    # Other SFT settings: the evaluation of the old model is refused, not reported as new.
    (tmp_path / "root" / "sft" / DONE_FILE).unlink()
    runner.run(Stage("sft", "configs/sft_cpu.py", ("sft.num_steps=8",)))
    with pytest.raises(StageError, match=r"stage eval read the outputs of sft, since removed or"):
        runner.run(evaluation)
    assert len(_calls(tmp_path)) == 4


def test_a_failed_stage_names_itself_its_status_last_line_and_log_and_reruns(tmp_path):
    runner = StageRunner(tmp_path / "root", python=_fake_python(tmp_path), echo=lambda _: None)
    stage = Stage("b", "configs/sft_cpu.py")
    (tmp_path / "FAIL").touch()
    with pytest.raises(StageError) as e:
        runner.run(stage)
    message = str(e.value)
    assert "stage b exited with status 3" in message and "boom: out of cheese" in message
    assert str(tmp_path / "root" / "b" / LOG_FILE) in message
    assert runner.finished(stage) is None
    (tmp_path / "FAIL").unlink()
    runner.run(stage)  # not marked finished: runs again (the job resumes from its workdir)
    assert len(_calls(tmp_path)) == 2 and runner.finished(stage) is not None


def test_a_stopped_attempts_time_counts_to_its_logs_last_write(tmp_path):
    # An attempt killed with the machine wrote no end: it began 1,000 s ago and its job last
    # wrote to the log 400 s later; the attempt that finishes adds its own time to those 400 s.
    runner = StageRunner(tmp_path / "root", python=_fake_python(tmp_path), echo=lambda _: None)
    workdir = tmp_path / "root" / "b"
    workdir.mkdir(parents=True)
    began = time.time() - 1000
    stopped = [{"started": began, "ended": None, "exit": None}]
    (workdir / ATTEMPTS_FILE).write_text(json.dumps(stopped))
    (workdir / LOG_FILE).write_text("step 20 of 80\n")
    os.utime(workdir / LOG_FILE, (began + 400, began + 400))
    record = runner.run(Stage("b", "configs/sft_cpu.py"))
    assert record["attempts"] == 2
    assert record["wall_s"] == pytest.approx(400 + record["last_attempt_wall_s"])
    attempts = json.loads((workdir / ATTEMPTS_FILE).read_text())
    assert [a["exit"] for a in attempts] == ["stopped", 0]


def test_the_cpu_plan_names_only_real_fields_and_chains_sft_into_rl_and_eval():
    config = runpy.run_path(str(CONFIG))["get_config"]()
    stages = job.plan(config)
    runner = StageRunner("/root")
    for stage in stages:
        runner.check(stage)
    names = [s.name for s in stages]
    assert len(set(names)) == len(names)
    by_name = {s.name: s for s in stages}
    assert "model.source={ms_sft}" in by_name["ms_grpo_s1"].overrides
    # MemSearcher's cold start repeats the contexts that stop to answer (docs/results.md, SFT E).
    assert "data.oversample=That is all the question needs" in by_name["ms_sft"].overrides
    assert "data.oversample_times=2" in by_name["ms_sft"].overrides
    assert "eval.agents=memsearcher,react" in by_name["ms_eval_sft"].overrides
    # The manager's cold start sees the rare DELETE decisions three times (docs/results.md, SFT B).
    assert 'data.oversample="event": "DELETE"' in by_name["mr1_sft"].overrides
    assert "data.oversample_times=3" in by_name["mr1_sft"].overrides
    assert "model.source={ms_grpo_s1}/policy" in by_name["ms_eval_grpo_s1"].overrides
    assert "manager.trained={mr1_grpo_s0_manager}/policy" in by_name["mr1_grpo_s0_answer"].overrides
    # The RL manager manages the facts the SFT model extracts, in training and in evaluation.
    for name in ("mr1_grpo_s0_answer", "mr1_eval_grpo_s0_manager", "mr1_eval_grpo_s0"):
        assert "facts.source={mr1_sft}" in by_name[name].overrides
    # The answer agent's own GRPO recipe (docs/results.md): on-policy at temperature 1.0; the manager's
    # stays at 0.7 with the trainer's old log-probs.
    answer, manager = (
        by_name["mr1_grpo_s0_answer"].overrides,
        by_name["mr1_grpo_s0_manager"].overrides,
    )
    assert {"rl.num_steps=12", "rl.sampling.temperature=1.0", "rl.old_logprobs=sampler"} <= set(
        answer
    )
    assert {"rl.num_steps=4", "rl.sampling.temperature=0.7"} <= set(manager)
    assert not any(o.startswith("rl.old_logprobs") for o in manager)
    final = by_name["mr1_eval_grpo_s0"].overrides
    assert "answer.trained={mr1_grpo_s0_answer}/policy" in final and "job=memory_r1.eval" in final
    # Every stage that uses another stage's output comes after it.
    for i, stage in enumerate(stages):
        for earlier in names[i:]:
            assert not any(f"{{{earlier}}}" in o for o in stage.overrides), (stage.name, earlier)


def test_the_evaluations_of_one_trained_manager_share_its_banks_and_no_two_builders_do():
    config = runpy.run_path(str(CONFIG))["get_config"]()
    config.memory_r1.algos = "grpo,ppo"
    by_name = {s.name: s for s in job.plan(config)}

    def banks(name):
        (override,) = [o for o in by_name[name].overrides if o.startswith("banks_dir=")]
        return override

    one_manager = ("mr1_grpo_s0_answer", "mr1_eval_grpo_s0", "mr1_eval_grpo_s0_no_distill")
    assert {banks(n) for n in one_manager} == {banks("mr1_eval_grpo_s0_manager")}
    builders = ["base", "sft", "grpo_s0", "grpo_s1", "ppo_s0", "ppo_s1"]
    assert len({banks(f"mr1_eval_{b}") for b in builders}) == len(builders)
    managers = [n for n in by_name if n.endswith("_manager") and not n.startswith("mr1_eval")]
    assert len(managers) == 4
    assert {o for n in managers for o in by_name[n].overrides if o.startswith("snapshots.")} == {
        "snapshots.cache_dir={snapshots}"
    }


def test_locomo_test_conversations_add_model_built_stages_that_share_banks_and_facts():
    config = runpy.run_path(str(CONFIG))["get_config"]()
    assert not [s for s in job.plan(config) if s.name.startswith("mr1_locomo")]  # off by default
    config.memory_r1.locomo_test = "conv-49, conv-50"
    stages = job.plan(config)
    runner = StageRunner("/root")
    for stage in stages:
        runner.check(stage)  # every override a field of the synthetic evaluation's config
    locomo = {s.name: s for s in stages if s.name.startswith("mr1_locomo")}
    assert list(locomo) == ["mr1_locomo_sft", "mr1_locomo_grpo_s0_manager", "mr1_locomo_grpo_s0"]
    by_name = {s.name: s for s in stages}
    for stage in locomo.values():
        o = set(stage.overrides)
        assert stage.report == "memory_r1_locomo" and stage.config == by_name["mr1_eval_sft"].config
        assert {"data.conversations=conv-49,conv-50", "data.include_adversarial=True"} <= o
        assert "data.max_questions=0" in o and "data.path=../shared/data/locomo10.json" in o
        assert "construction.facts_dir={banks}/facts" in o  # one extraction for all
    banks = {n: [o for o in s.overrides if o.startswith("banks_dir=")] for n, s in locomo.items()}
    assert banks["mr1_locomo_sft"] == ["banks_dir={banks}/sft"]
    assert banks["mr1_locomo_grpo_s0"] == banks["mr1_locomo_grpo_s0_manager"]
    assert banks["mr1_locomo_grpo_s0"] == ["banks_dir={banks}/grpo_s0_manager"]
    assert "answer.trained={mr1_grpo_s0_answer}/policy" in locomo["mr1_locomo_grpo_s0"].overrides
    assert not any(o.startswith("answer.") for o in locomo["mr1_locomo_grpo_s0_manager"].overrides)
    names = [s.name for s in stages]
    assert names.index("mr1_locomo_sft") > names.index("mr1_eval_grpo_s1")  # after the rest


def test_a_misspelt_override_fails_before_anything_runs():
    with pytest.raises(StageError, match=r"has no field 'sft.num_stepz'"):
        StageRunner("/root").check(Stage("x", "configs/sft_cpu.py", ("sft.num_stepz=3",)))


def test_extra_overrides_reach_the_stages_their_glob_matches_and_bad_ones_are_named():
    config = runpy.run_path(str(CONFIG))["get_config"]()
    config.extra = "mr1_eval_*:answer_agent.max_new_tokens=7; ms_sft:sft.bucket=128"
    by_name = {s.name: s for s in job.plan(config)}
    assert by_name["mr1_eval_sft"].overrides[-1] == "answer_agent.max_new_tokens=7"
    assert "answer_agent.max_new_tokens=7" not in by_name["mr1_sft"].overrides
    assert by_name["ms_sft"].overrides[-1] == "sft.bucket=128"
    config.extra = "mr1_eval_* answer_agent.max_new_tokens=7"
    with pytest.raises(ConfigError, match="config.extra"):
        job.plan(config)
    config.extra, config.papers = "", "memsearcher,memory_r2"
    with pytest.raises(ConfigError, match=r"config.papers.*memory_r2"):
        job.plan(config)
