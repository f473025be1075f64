"""The agent's own evaluation during SFT: greedy episodes of a search agent on held-out questions,
scored by its real reward, with the behaviour that says whether it does its job at all.

    run = MemSearcherEvalRun.from_config(load_agent_config(path))
    evaluate = search_agent_eval(run, tokenizer, cfg, max_examples=20)
    evaluate(params)   # {"task_reward", "task_em", "searched", "format_valid", "answered"}

`run` is read from a MemSearcher recipe config (configs/memsearcher_cpu.py): its eval split,
retriever, turn limits and eval sampling are used exactly as `memsearcher.eval` uses them, so the
numbers during SFT are the numbers the eval job reports.
"""

from __future__ import annotations

import runpy
from collections.abc import Callable
from typing import TYPE_CHECKING

import jax
import numpy as np

from memjax.errors import ConfigError
from memjax.eval.behaviour_report import behaviour
from memjax.eval.qa_metrics import em_score

if TYPE_CHECKING:
    from memjax.agents.memsearcher.run_settings import MemSearcherEvalRun


def load_agent_config(path: str):
    try:
        return runpy.run_path(path)["get_config"]()
    except FileNotFoundError:
        raise ConfigError(f"config.task_eval.config={path!r}: no such config file") from None


def search_agent_eval(
    run: MemSearcherEvalRun, tokenizer, cfg, *, max_examples: int, seed: int = 0
) -> Callable[[object], dict[str, float]]:
    from memjax.agents.memsearcher import job_setup
    from memjax.agents.memsearcher.eval_job import evaluate, lock_step
    from memjax.agents.sampler_adapter import SamplerPolicy

    setup = run.setup
    sets = job_setup.load_qa_sets(setup.data, "eval")
    sets = {name: examples[:max_examples] for name, examples in sets.items()}
    retriever = job_setup.make_retriever(setup.retriever, setup.data)
    sampling = run.eval.sampling
    agent = setup.agent
    batch_size = run.eval.batch_sizes[agent]
    budget = run.eval.max_context_tokens - sampling.max_new_tokens

    def run(params) -> dict[str, float]:
        policy = SamplerPolicy(params, cfg, tokenizer, sampling, max_prompt_tokens=budget)
        episodes = evaluate(
            [agent],
            sets,
            setup.episodes,
            lock_step(policy),
            retriever,
            lambda text: len(tokenizer.encode(text)),
            jax.random.key(seed),
            batch_size,
        )
        results = [e.result for e in episodes]
        b = behaviour(agent, results)
        em = [em_score(r.answer, e.golden_answers) for r, e in zip(results, episodes)]
        return {
            "task_reward": float(np.mean([r.reward for r in results])),
            "task_em": float(np.mean(em)),
            "searched": b.searched,
            "format_valid": b.format_valid,
            "answered": b.answered,
        }

    return run


__all__ = ["search_agent_eval", "load_agent_config"]
