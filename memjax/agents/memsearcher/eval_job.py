"""The `memsearcher.eval` job: EM / F1 per dataset and context tokens per turn, for MemSearcher
against the growing-context baselines (Search-R1, ReAct) and plain RAG, with one model and one
retriever.

    python -m memjax.launch --config=configs/memsearcher_cpu.py --workdir=/tmp/ms_eval \
        --config.job=memsearcher.eval --config.data.max_examples=100

Episodes run in lock-step batches: every round, the live episodes' calls go to the policy in
one batch and their searches to the retriever in one call per top-k. The policy is any function
`(calls, rng) -> outputs`; the job uses memjax's sampler (greedy at temperature 0, as the
papers' eval scripts), tests use scripted ones. Writes to WORKDIR/eval:
qa_scores.{md,json}, tokens_per_turn.{md,json,png} and predictions.jsonl, rewritten as each
agent finishes.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import jax
from absl import logging
from ml_collections import ConfigDict

from memjax.agents import search_agent_report
from memjax.agents.episode import Episode, ModelCall, ModelOutput, advance
from memjax.agents.memsearcher import job_setup
from memjax.agents.memsearcher.agent_factory import make_episodes
from memjax.agents.memsearcher.run_settings import EvalSettings, MemSearcherEvalRun
from memjax.agents.memsearcher.settings import EpisodeSettings
from memjax.agents.retrieval import Retriever
from memjax.agents.search_agent_report import EvaluatedEpisode
from memjax.agents.transcript import chat_format, turn_token_counts
from memjax.data.qa import QAExample
from memjax.errors import ConfigError

BatchPolicy = Callable[[Sequence[ModelCall], jax.Array], list[ModelOutput]]


def per_call(policy: Callable[[ModelCall], ModelOutput]) -> BatchPolicy:
    """A batch policy from a per-call one (scripted policies)."""
    return lambda calls, rng: [policy(call) for call in calls]


def drive(
    episodes: Sequence[Episode],
    policy: BatchPolicy,
    retriever: Retriever,
    rng: jax.Array,
    max_rounds: int = 1000,
) -> None:
    """Runs episodes to the end: one batched policy call and one batched search per round."""
    for round_ in range(max_rounds):
        live = [e for e in episodes if not e.done]
        if not live:
            return
        outputs = policy([e.current_call() for e in live], jax.random.fold_in(rng, round_))
        advance(live, outputs, retriever)
    raise RuntimeError(f"episodes still running after {max_rounds} rounds")


Drive = Callable[[Sequence[Episode], Retriever, jax.Array], None]


def lock_step(policy: BatchPolicy) -> Drive:
    """Episodes driven in lock-step rounds by a batch policy."""
    return lambda episodes, retriever, rng: drive(episodes, policy, retriever, rng)


def evaluate(
    agents: Sequence[str],
    sets: dict[str, list[QAExample]],
    settings: EpisodeSettings,
    run: Drive,
    retriever: Retriever,
    count_tokens: Callable[[str], int],
    rng: jax.Array,
    batch_size: int,
    progress: bool = False,
) -> list[EvaluatedEpisode]:
    """Every agent on every question, `batch_size` questions' episodes driven at a time by
    `run` (`lock_step(policy)`, or an engine's `EngineRunner.drive`)."""
    jobs = [
        (agent, name, examples[i : i + batch_size])
        for agent in agents
        for name, examples in sets.items()
        for i in range(0, len(examples), batch_size)
    ]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=sum(len(chunk) for _, _, chunk in jobs), desc="eval", unit="question")
    out = []
    for j, (agent, name, chunk) in enumerate(jobs):
        t0 = time.perf_counter()
        questions = [e.question for e in chunk]
        episodes = make_episodes(agent, questions, settings, retriever, count_tokens)
        run(episodes, retriever, jax.random.fold_in(rng, j))
        for example, episode in zip(chunk, episodes):
            result = episode.result(example.golden_answers)
            out.append(EvaluatedEpisode(agent, name, example.golden_answers, result))
        logging.info(
            "%s on %s: %d questions in %.1fs", agent, name, len(chunk), time.perf_counter() - t0
        )
        if bar is not None:
            bar.set_postfix(agent=agent)
            bar.update(len(chunk))
    if bar is not None:
        bar.close()
    return out


def prediction_rows(episodes: Sequence[EvaluatedEpisode], fmt) -> list[dict]:
    """One JSON row per (agent, question): the answer, reward, stop reason, searches and the
    context tokens at each turn."""
    return [
        {
            "agent": e.agent,
            "dataset": e.dataset,
            "question": e.result.question,
            "golden_answers": list(e.golden_answers),
            "answer": e.result.answer,
            "reward": e.result.reward,
            "stop_reason": e.result.stop_reason,
            "stopped_in": e.result.stopped_in,
            "format_valid": e.result.format_valid,
            "searches": e.result.searches,
            "turn_tokens": turn_token_counts(e.result.turn_contexts, fmt),
        }
        for e in episodes
    ]


def write_outputs(
    episodes: Sequence[EvaluatedEpisode], tokenizer, directory: Path, split=None
) -> dict:
    fmt = chat_format(tokenizer)
    report = search_agent_report.summarize(episodes, fmt)
    paths = search_agent_report.write(report, directory, split)
    predictions = directory / "predictions.jsonl"
    with open(predictions, "w", encoding="utf-8") as f:
        for row in prediction_rows(episodes, fmt):
            f.write(json.dumps(row) + "\n")
    paths["predictions"] = predictions
    return paths


def _remote_policy(settings: EvalSettings, model_source: str):
    """Every agent call sent to `settings.policy_source` (openai:MODEL@URL) at the eval
    sampling's temperature; the tokenizer (token counts, tables) is config.model's, loaded
    without its weights."""
    from memjax.agents.remote_calls import remote_call_policy
    from memjax.checkpoints import packaged, trained_policy_dir
    from memjax.checkpoints.tokenizer import load_tokenizer
    from memjax.remote import openai_source

    remote = openai_source.shared_model(settings.policy_source, settings.openai)
    sampling = settings.sampling
    temperature = 0.0 if sampling.greedy else sampling.temperature
    policy = remote_call_policy(remote, sampling.max_new_tokens, temperature, sampling.top_p)
    tokenizer = load_tokenizer(trained_policy_dir(packaged.resolve(str(model_source))))
    return policy, tokenizer


def _local_drivers(settings: EvalSettings, model):
    """Per agent: how its episodes are driven over the in-process model, and how many
    questions go to the driver at once. With `eval.engine` every agent's questions of a data
    set go to one continuous-batching engine (`eval.engine_slots` slots, default the agent's
    batch size); otherwise lock-step batches of the agent's batch size."""
    from memjax.agents.engine_episodes import EngineRunner
    from memjax.agents.sampler_adapter import SamplerPolicy
    from memjax.engine import Engine

    agents, batch_sizes, sampling = settings.agents, settings.batch_sizes, settings.sampling
    budget = settings.max_context_tokens - sampling.max_new_tokens
    if not settings.engine:
        policy = SamplerPolicy(
            model.params, model.cfg, model.tokenizer, sampling, max_prompt_tokens=budget
        )
        return {a: (lock_step(policy), batch_sizes[a]) for a in agents}, policy
    slots = settings.engine_slots
    runners: dict[str, EngineRunner] = {}

    def driver(agent: str) -> Drive:
        def run(episodes, retriever, rng):
            # The agent's engine (its slots' KV cache) is made when its first episodes run,
            # and the previous agent's is let go: one agent's cache is held at a time.
            if agent not in runners:
                for other in runners.values():
                    other.engine = None
                engine = Engine(
                    model.params,
                    model.cfg,
                    eos_ids=model.tokenizer.eos_ids,
                    tokenizer=model.tokenizer,
                    slots=slots or batch_sizes[agent],
                    max_len=settings.max_context_tokens,
                )
                runners[agent] = EngineRunner(
                    engine, model.tokenizer, sampling, max_prompt_tokens=budget
                )
            runners[agent].drive(episodes, retriever, rng)

        return run

    drivers = {a: (driver(a), 1 << 30) for a in agents}  # one driver call per data set
    return drivers, _Overflows(runners.values())


@dataclasses.dataclass
class _Overflows:
    runners: Iterable  # the EngineRunners made so far (a live view)

    @property
    def overflows(self) -> int:
        return sum(r.overflows for r in self.runners)


def eval_job(config: ConfigDict, workdir: str | None) -> dict:
    """Evaluates `config.eval.agents` on `config.data.eval`; prints both tables."""
    if not workdir:
        raise ConfigError(
            "--workdir: memsearcher.eval needs a directory (tables, plot, predictions)"
        )
    run = MemSearcherEvalRun.from_config(config)
    settings, setup = run.eval, run.setup
    agents, source = list(settings.agents), settings.policy_source
    sets = job_setup.load_qa_sets(setup.data, "eval")
    split = job_setup.qa_split_summary(setup.data, "eval")
    print(split.line(), flush=True)
    # The model first: a wrong model path fails in seconds, not after the corpus is embedded.
    if source:
        policy, tokenizer = _remote_policy(settings, setup.model.source)
        drivers = {a: (lock_step(policy), settings.batch_sizes[a]) for a in agents}
    else:
        model = job_setup.load_policy_model(setup.model)
        tokenizer = model.tokenizer
        drivers, policy = _local_drivers(settings, model)
    retriever = job_setup.make_retriever(setup.retriever, setup.data, "eval")
    t0 = time.perf_counter()
    directory = Path(workdir) / "eval"
    episodes: list[EvaluatedEpisode] = []
    for a, agent in enumerate(agents):  # tables rewritten per agent: a stopped run keeps them
        drive_agent, batch_size = drivers[agent]
        episodes += evaluate(
            [agent],
            sets,
            setup.episodes,
            drive_agent,
            retriever,
            lambda text: len(tokenizer.encode(text)),
            jax.random.fold_in(jax.random.key(setup.seed), a),
            batch_size,
            progress=True,
        )
        paths = write_outputs(episodes, tokenizer, directory, split)
        logging.info("%s done; tables in %s", agent, directory)
    print(paths["scores_markdown"].read_text())
    print(paths["markdown"].read_text())
    summary = {
        "questions": sum(len(v) for v in sets.values()),
        "split": split.to_json(),
        "agents": agents,
        "overflowed_calls": getattr(policy, "overflows", 0),
        "policy": source or str(setup.model.source),
        "driver": "engine" if settings.engine and not source else "lock_step",
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps(summary), flush=True)
    return {"paths": paths, **summary}
