"""The answer environment's reward and switches; the jobs' configs and the paper-config adapter."""

import runpy
from pathlib import Path

import pytest

from memjax import jobs
from memjax.agents.memory_r1.answer_env import AnswerEnvironment, AnswerExample, AnswerSettings
from tests.agents.memory_r1 import helpers

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = AnswerExample(
    "c/0", "Where does Alice live?", "Denver", 1,
    "Alice", (("3 June, 2023", "I moved to Denver"),), "Bob", (("8 May, 2023", "Nice!"),),
)  # fmt: skip


def _step(env, text):
    state, _ = env.reset(EXAMPLE)
    return env.step(state, env.tokenizer.encode(text), "eos")[1]


def test_em_reward_reads_the_answer_after_the_marker():
    env = AnswerEnvironment(helpers.ByteTokenizer(), AnswerSettings(style="paper"))
    assert (
        _step(env, "**Memories selected as relevant:**\n- I moved\n**Answer:** Denver").reward == 1
    )
    wrong = _step(env, "**Answer:** She lives in Denver")
    assert wrong.reward == 0 and wrong.info["f1"] > 0 and wrong.info["has_marker"] == 1
    assert _step(env, "Denver").reward == 0  # no marker, no answer


def test_f1_option_and_answer_prefix():
    env = AnswerEnvironment(
        helpers.ByteTokenizer(),
        AnswerSettings(style="short", metric="f1", answer_prefix="**Answer:**"),
    )
    state, prompt = env.reset(EXAMPLE)
    assert env.tokenizer.decode(prompt).endswith("<assistant>**Answer:**")
    result = env.step(state, env.tokenizer.encode(" in Denver"), "eos")[1]
    assert result.reward == pytest.approx(2 / 3) and result.info["em"] == 0


def test_distillation_switch_changes_only_the_distillation_rules():
    tok = helpers.ByteTokenizer()
    on = tok.decode(AnswerEnvironment(tok, AnswerSettings(distill=True)).reset(EXAMPLE)[1])
    off = tok.decode(AnswerEnvironment(tok, AnswerSettings(distill=False)).reset(EXAMPLE)[1])
    assert "Select memories you found" in on and "Select memories you found" not in off
    assert "**Answer:**" in off and "3 June, 2023: I moved to Denver" in off


def test_jobs_are_registered_and_configs_load():
    for name in ("build_banks", "eval", "train_manager", "train_answer", "demo"):
        assert callable(jobs.resolve(f"memory_r1.{name}"))
    demo = runpy.run_path(str(ROOT / "configs/demo.py"))["get_config"]()
    assert demo.job == "memory_r1.demo" and demo.model.source == "packaged:smollm2"
    assert demo.rl.prompts_per_step == 8 and demo.rl.group_size == 4
    cpu = runpy.run_path(str(ROOT / "configs/memory_r1_locomo_cpu.py"))["get_config"]()
    assert cpu.job == "memory_r1.eval" and cpu.answer_agent.k_per_speaker == 30


@pytest.mark.parametrize("name,algo,group", [("grpo_qwen7b", "grpo", 8), ("ppo_llama8b", "ppo", 1)])
def test_paper_configs_carry_the_papers_numbers_in_the_jobs_schema(name, algo, group):
    config = runpy.run_path(str(ROOT / f"configs/{name}.py"))["get_config"]()
    rl = config.rl
    assert rl.algo == algo and rl.group_size == group and rl.prompts_per_step == 128
    assert rl.optimizer.learning_rate == 1e-6 and rl.sampling.temperature == 1.0
    assert rl.seq_len == 4096 + 2048 and rl.sampling.max_new_tokens == 2048
    if algo == "ppo":
        assert rl.critic_optimizer.learning_rate == 1e-5
    assert config.answer_agent.k_per_speaker == 30 and config.snapshots.window == 24
    assert config.construction.related_k == 10 and config.answer_agent.metric == "em"
    assert "prefill_chunk" not in rl.sampling  # the sampler's default unless set
    # The same sections as the CPU configs: a CPU config's fields all exist here.
    cpu = runpy.run_path(str(ROOT / "configs/memory_r1_locomo_cpu.py"))["get_config"]()
    assert set(cpu.keys()) <= set(config.keys())
    assert set(cpu.rl.keys()) <= set(config.rl.keys())
