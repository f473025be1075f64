"""(heavy) The whole reproduction on a tiny random model and tiny data: every stage of both
papers runs as its own launcher process, in order, each chained to the ones before it (teachers
-> SFT checkpoint -> RL from it -> evaluation of what RL exported), every stage's report
exists, the tables name their rows and splits, and a second run skips every finished stage."""

import dataclasses
import json
import runpy

import pytest

from memjax.experiments.reproduce import job
from memjax.experiments.reproduce.stages import DONE_FILE, LOG_FILE, REPO_ROOT
from tests.agents.conftest import tiny_decoder

WORDS = [
    "river",
    "mountain",
    "poet",
    "composer",
    "city",
    "novel",
    "painter",
    "lake",
    "island",
    "bridge",
]


def _hotpot_file(path):
    """Ten two-paragraph bridge questions whose answers are in their second paragraph."""
    rows = []
    for i, word in enumerate(WORDS):
        a, b = f"Alpha {word}", f"Beta {word}"
        rows.append(
            {
                "id": f"q{i}",
                "question": f"Where was the author of {a} born",
                "answer": f"Town{i}",
                "type": "bridge",
                "level": "hard",
                "supporting_facts": {"title": [a, b], "sent_id": [0, 0]},
                "context": {
                    "title": [a, b],
                    "sentences": [[f"{a} is a {word} book by {b}."], [f"{b} was born in Town{i}."]],
                },
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A 2-layer random Llama over SmolLM2's vocabulary, with its tokenizer: a model source."""
    from memjax.checkpoints.decoder_io import export_hf_decoder
    from memjax.checkpoints.packaged import smollm2_gguf
    from memjax.checkpoints.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(smollm2_gguf())
    params, cfg = tiny_decoder(tokenizer.vocab_size, seed=3)
    directory = tmp_path_factory.mktemp("tiny") / "model"
    return export_hf_decoder(params, cfg, directory, tokenizer=tokenizer)


EXTRA = ";".join(
    [
        "ms_data:retriever.default_top_n=2",
        "ms_[eg]*:retriever.default_top_n=2",
        "ms_[eg]*:eval_sampling.max_tokens_per_call=8",
        "ms_[eg]*:rollout.max_tokens_per_call=8",
        "ms_[eg]*:eval.batch_size=2",
        "ms_grpo_*:rollout.group_size=2",
        "ms_grpo_*:train.micro_batches=1",
        "mr1_data:synthetic.sessions_per_conversation=2",
        "mr1_[eg]*:data.synthetic.sessions_per_conversation=2",
        "mr1_[egl]*:construction.fact_max_new_tokens=8",
        "mr1_[egl]*:construction.manager_max_new_tokens=12",
        "mr1_[egl]*:answer_agent.max_new_tokens=6",
        "mr1_[egl]*:judge.max_new_tokens=4",
        "mr1_[egl]*:answer_agent.k_per_speaker=4",
        "mr1_grpo_*:snapshots.window=4",
    ]
)


def _locomo_file(path):
    """One two-session conversation in LoCoMo's format, standing in for a test conversation."""
    from memjax.experiments.synthetic import SyntheticConfig, write_synthetic_locomo

    cfg = SyntheticConfig(num_conversations=1, seed=7, sessions_per_conversation=2)
    return write_synthetic_locomo(path, dataclasses.replace(cfg, id_prefix="locomo"))


def _config(tiny_model, hotpot, locomo):
    c = runpy.run_path(str(REPO_ROOT / "configs/reproduce_cpu.py"))["get_config"]()
    c.model_source = str(tiny_model)
    c.grpo_seeds = "0"
    c.extra = EXTRA
    ms = c.memsearcher
    ms.hotpotqa = str(hotpot)
    ms.sft_steps, ms.sft_batch_rows, ms.sft_micro_batches, ms.sft_max_seq_len = 2, 4, 1, 1024
    ms.grpo_steps, ms.grpo_train_questions, ms.eval_questions, ms.eval_max_turns = 1, 2, 2, 2
    ms.baselines = "react"
    mr1 = c.memory_r1
    mr1.teacher_conversations, mr1.answer_data = 1, "synthetic"
    mr1.sft_steps, mr1.sft_batch_rows, mr1.sft_micro_batches, mr1.sft_max_seq_len = 2, 4, 1, 1024
    mr1.rl_steps, mr1.rl_prompts_per_step, mr1.rl_group_size = 1, 2, 2
    mr1.answer_rl_steps = 1
    mr1.rl_seq_len, mr1.rl_micro_batches, mr1.rl_max_new_tokens = 1536, 1, 6
    mr1.rl_train_conversations, mr1.test_conversations, mr1.max_questions = 1, 1, 3
    mr1.no_distill_ablation = False
    mr1.locomo, mr1.locomo_test = str(locomo), "locomo-0"
    return c


@pytest.mark.heavy
def test_every_stage_of_both_papers_runs_chains_and_reports(tiny_model, tmp_path, capsys):
    hotpot = _hotpot_file(tmp_path / "hotpot.jsonl")
    config = _config(tiny_model, hotpot, _locomo_file(tmp_path / "locomo.json"))
    root = tmp_path / "repro"
    job.reproduce_job(config, str(root))
    stages = job.plan(config)
    for stage in stages:
        assert (root / stage.name / DONE_FILE).is_file(), stage.name
    # The chain: SFT exported a policy; RL started from it and exported its own; evals read it.
    for name in ("ms_sft", "mr1_sft", "ms_grpo_s0", "mr1_grpo_s0_manager", "mr1_grpo_s0_answer"):
        assert (root / name / "policy" / "model.safetensors").is_file(), name
    log = (root / "ms_eval_grpo_s0" / "stage.log").read_text()
    assert f"--config.model.source={root / 'ms_grpo_s0'}/policy" in log
    # The trained manager's banks are built by its first evaluation and loaded by the next.
    assert "banks: built none" not in (root / "mr1_eval_grpo_s0_manager" / LOG_FILE).read_text()
    assert "banks: built none" in (root / "mr1_eval_grpo_s0" / LOG_FILE).read_text()

    report = json.loads((root / "reproduction.json").read_text())
    ms_rows = {(r["label"], r["agent"]) for r in report["memsearcher"]}
    assert ms_rows == {
        ("base", "memsearcher"),
        ("base", "react"),
        ("SFT", "memsearcher"),
        ("SFT", "react"),  # the trained model's growing context beside MemSearcher's
        ("GRPO (seed 0)", "memsearcher"),
    }
    assert all(r["split"]["name"] == "eval" and r["em"]["n"] == 2 for r in report["memsearcher"])
    labels = [r["label"] for r in report["memory_r1"]]
    assert labels == [
        "base",
        "Memory-SFT",
        "no memory (Memory-SFT answer agent, empty banks)",
        "Memory-R1-GRPO (seed 0): manager, SFT answer agent",
        "Memory-R1-GRPO (seed 0)",
    ]
    assert all(r["split"]["name"] == "test" for r in report["memory_r1"])
    manager_rows = report["memory_r1"][3:]  # one manager's banks: the same operations
    assert manager_rows[0]["operations"] == manager_rows[1]["operations"]
    assert all(v is not None for v in report["wall_s"].values())
    assert report["total_wall_s"] == pytest.approx(sum(report["wall_s"].values()))
    assert {"ms_sft.png", "ms_grpo_s0.png", "mr1_grpo_s0_manager.png"} <= set(report["plots"])
    curves = {r["stage"]: r for r in report["curves"]}
    assert {"ms_sft", "mr1_sft", "ms_grpo_s0", "mr1_grpo_s0_manager"} <= set(curves)
    # The Memory-R1 RL stages validate the SFT weights before their first step and after.
    assert [step for step, _ in curves["mr1_grpo_s0_manager"]["evals"]] == [0, 1]
    assert len(curves["mr1_grpo_s0_answer"]["train"]) == 1
    paired = report["against_sft"]
    assert [r["label"] for r in paired["memory_r1"]] == labels[3:]
    assert [r["label"] for r in paired["memsearcher"]] == ["GRPO (seed 0)"]
    # The trained answer agent against the SFT one over the same trained manager's banks.
    [answer_rl] = report["one_part_apart"]["memory_r1"]
    assert (answer_rl["label"], answer_rl["reference"]) == (labels[4], labels[3])
    assert all(r["em"]["n"] == 2 for r in paired["memsearcher"])
    markdown = (root / "reproduction.md").read_text()
    assert "## Memory-R1 (Table 1 shape)" in markdown and "## MemSearcher" in markdown
    # each paper against its SFT row (LoCoMo's too); the trained answer agent against the same
    # banks' SFT one, on the synthetic conversations and on LoCoMo
    assert markdown.count("Against ") == 5 and "## Training curves" in markdown
    assert f"Against {labels[3]}, on the questions both scored" in markdown

    # LoCoMo test conversations: Memory-SFT and the RL models, banks built by the models; the
    # RL manager's banks built once for its two rows, the SFT extractor's facts once for all.
    locomo = report["memory_r1_locomo"]
    assert [r["label"] for r in locomo] == [
        "Memory-SFT",
        "Memory-R1-GRPO (seed 0): manager",
        "Memory-R1-GRPO (seed 0)",
    ]
    assert all(r["split"]["name"] == "conversations locomo-0" for r in locomo)
    assert (
        "banks: built ['locomo-0']" in (root / "mr1_locomo_grpo_s0_manager" / LOG_FILE).read_text()
    )
    assert "banks: built none" in (root / "mr1_locomo_grpo_s0" / LOG_FILE).read_text()
    assert len(list((root / "banks" / "facts" / "locomo-0").glob("*.json"))) == 1
    assert [r["label"] for r in paired["memory_r1_locomo"]] == [r["label"] for r in locomo[1:]]
    # ... and the trained answer agent against the SFT one over the RL manager's LoCoMo banks
    [locomo_answer_rl] = report["one_part_apart"]["memory_r1_locomo"]
    assert (locomo_answer_rl["label"], locomo_answer_rl["reference"]) == (
        locomo[2]["label"],
        locomo[1]["label"],
    )
    assert f"Against {locomo[1]['label']}, on the questions both scored" in markdown
    assert "## Memory-R1 on LoCoMo, model-built banks" in markdown

    capsys.readouterr()
    job.reproduce_job(config, str(root))  # everything finished: all skipped, tables again
    out = capsys.readouterr().out
    assert out.count("finished earlier") == len(stages)
