"""MemSearcher-shaped episodes on the continuous-batching engine against lock-step turns.

    python tools/bench.py engine [--questions 20] [--slots 8] [--max-tokens 256] [--pairs 2]

The packaged SmolLM2-135M-Instruct, greedy, and the real retriever of
`configs/memsearcher_cpu.py` (MiniLM over the HotpotQA sample's pooled paragraphs, in process)
on the held-out split's first `--questions` questions. Each episode has MemSearcher's shape and
prompts: a turn is an action call over (question, memory), one search (the question, 3
passages), and a memory-update call over the action and the tool response, whose output is
the next turn's memory; the last turn is an action call alone (the answer). Turn counts are
drawn as the held-out evaluation of the SFT + GRPO MemSearcher model ended its episodes
(docs/results.md, 60 questions: 1 ended at turn 1, 1 at turn 2, 42 at turn 3, 16 at turn 5);
the completions' lengths are the model's own (EOS or the `--max-tokens` budget).

Lock-step: every round, the live episodes' calls go to the sampler as one batch (compaction
on, as the CPU default) and their searches to the retriever as one call, as `memsearcher.eval`
does with `eval.engine=False`. Engine: each call is a request to `--slots` slots and each
search runs on a tool thread while the other episodes decode (`memjax.agents.engine_episodes`).
Greedy decoding gives both the same completions (checked every pair), so both do the same
useful work; each side runs once per pair, alternating. The last line is one JSON object with
`ratio`: the engine's useful tokens/s over lock-step's (median over pairs).
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from tools.benchmarks.pairs import alternate, load_average

# Episodes of the held-out evaluation by the turn they ended at (docs/results.md).
TURNS_ENDED = {1: 1, 2: 1, 3: 42, 5: 16}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--questions", type=int, default=20)
    p.add_argument("--slots", type=int, default=8, help="0: one per question")
    p.add_argument(
        "--chunks-per-step", type=int, default=0, help="the engine's prompt chunks a step (0: all)"
    )
    p.add_argument("--max-tokens", type=int, default=256, help="budget of each call")
    p.add_argument("--pairs", type=int, default=2)
    p.add_argument("--seed", type=int, default=0, help="draws the turn counts")


class DrawnEpisode:
    """A MemSearcher-shaped episode of a fixed number of turns (the Episode protocol)."""

    def __init__(self, question: str, turns: int):
        from memjax.agents.episode import ModelCall
        from memjax.agents.memsearcher import prompts

        self._call, self._prompts = ModelCall, prompts
        self.question, self.turns_left, self.memory = question, turns, ""
        self.outputs: list[str] = []
        self.tokens = 0  # completion tokens sampled (the useful work)
        self.done = False
        self._pending = self._action()

    def _action(self):
        messages = self._prompts.context_messages(self.question, self.memory)
        return self._call(messages, self._prompts.THINK_PREFIX)

    def current_call(self):
        return self._pending

    def observe(self, output):
        from memjax.agents.episode import SearchRequest

        self.outputs.append(output.text)
        self.tokens += len(output.token_ids or ())
        if self._pending.assistant_prefix:  # an action
            self.turns_left -= 1
            if self.turns_left == 0:
                self.done = True
                return None
            self._action_text = output.text
            return SearchRequest(self.question, 3)
        self.memory = output.text  # a memory update
        self._pending = self._action()
        return None

    def receive(self, passages):
        from memjax.agents.search_tool import SearchSettings, format_results

        action = {"role": "assistant", "content": self._prompts.THINK_PREFIX + self._action_text}
        result = format_results(passages, SearchSettings())
        reply = self._prompts.tool_response_message([("search", result)])
        self._pending = self._call((*self._pending.messages, action, reply))
        return None


def _workload(questions: list[str], seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    ends = np.array(list(TURNS_ENDED))
    weights = np.array(list(TURNS_ENDED.values()), float)
    return [int(t) for t in rng.choice(ends, size=len(questions), p=weights / weights.sum())]


def _setup(args):
    import runpy
    from pathlib import Path

    from memjax.agents.memsearcher import job_setup
    from memjax.checkpoints import load_model

    root = Path(__file__).resolve().parents[2]
    config = runpy.run_path(str(root / "configs" / "memsearcher_cpu.py"))["get_config"]()
    config.data.max_examples = args.questions
    data = job_setup.QAData.from_section(config.data)
    sets = job_setup.load_qa_sets(data, "eval")
    questions = [e.question for e in next(iter(sets.values()))][: args.questions]
    retriever = job_setup.make_retriever(
        job_setup.RetrieverSettings.from_section(config.retriever), data, "eval"
    )
    return load_model("packaged:smollm2"), retriever, questions


def main(args) -> dict:
    from memjax.agents.engine_episodes import EngineRunner
    from memjax.agents.memsearcher.eval_job import drive
    from memjax.agents.sampler_adapter import SamplerPolicy
    from memjax.engine import Engine
    from memjax.sampling.sampling_params import SamplingParams

    model, retriever, questions = _setup(args)
    tok = model.tokenizer
    turns = _workload(questions, args.seed)
    sampling = SamplingParams(max_new_tokens=args.max_tokens, greedy=True)
    policy = SamplerPolicy(model.params, model.cfg, tok, sampling)
    lock_steps = [0]  # sequential decode steps of the lock-step calls: each runs its longest row

    def counted(calls, rng):
        outputs = policy(calls, rng)
        lock_steps[0] += max(len(s.tokens) for s in policy.last_sampled if s is not None)
        return outputs

    slots = args.slots or len(questions)
    engine = Engine(
        model.params,
        model.cfg,
        eos_ids=tok.eos_ids,
        tokenizer=tok,
        slots=slots,
        max_len=4096,
        chunks_per_step=args.chunks_per_step,
    )
    runner = EngineRunner(engine, tok, sampling)
    key = jax.random.key(0)
    runs: dict[str, list] = {"engine": [], "lock_step": []}

    def episodes():
        return [DrawnEpisode(q, t) for q, t in zip(questions, turns)]

    def timed(name, fn):
        def run():
            eps, t0 = episodes(), time.perf_counter()
            fn(eps)
            runs[name].append(eps)
            print(f"{name}: {time.perf_counter() - t0:.1f} s", flush=True)

        return run

    run_engine = timed("engine", lambda eps: runner.drive(eps, retriever, key))
    run_lock_step = timed("lock_step", lambda eps: drive(eps, counted, retriever, key))

    before = load_average()
    print(f"{len(questions)} episodes, turns {turns}; warming up both", flush=True)
    run_engine(), run_lock_step()  # compiles every shape both will use
    times = alternate(run_engine, run_lock_step, args.pairs)
    for a, b in zip(runs["engine"], runs["lock_step"]):
        if [e.outputs for e in a] != [e.outputs for e in b]:
            raise SystemExit("engine and lock-step completions differ: the comparison is void")
    eps = runs["engine"][0]
    runs_done = len(runs["engine"])
    tokens = sum(e.tokens for e in eps)
    calls = sum(len(e.outputs) for e in eps)
    per_pair = [lock / eng for eng, lock in zip(times.a_s, times.b_s)]
    report = {
        "questions": len(questions),
        "split": "eval (held out)",
        "slots": slots,
        "chunks_per_step": args.chunks_per_step,
        "calls": calls,
        "useful_tokens": tokens,
        "engine_s": [round(t, 2) for t in times.a_s],
        "lock_step_s": [round(t, 2) for t in times.b_s],
        "engine_tokens_per_s": round(tokens / float(np.median(times.a_s)), 2),
        "lock_step_tokens_per_s": round(tokens / float(np.median(times.b_s)), 2),
        "engine_episodes_per_s": round(len(eps) / float(np.median(times.a_s)), 4),
        "lock_step_episodes_per_s": round(len(eps) / float(np.median(times.b_s)), 4),
        # Sequential decode steps per run: the time of a backend whose step costs the same
        # at any batch size (an accelerator decoding a small model), unlike XLA:CPU's.
        "engine_decode_steps_per_run": engine.decode_steps // runs_done,
        "lock_step_decode_steps_per_run": lock_steps[0] // runs_done,
        "ratio_per_pair": [round(r, 3) for r in per_pair],
        "ratio": round(float(np.median(per_pair)), 3),
        "load_before": before,
        "load_after": load_average(),
        "at": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    print(
        f"engine {report['engine_tokens_per_s']} tok/s, lock-step "
        f"{report['lock_step_tokens_per_s']} tok/s: ratio {report['ratio']}",
        flush=True,
    )
    return report
