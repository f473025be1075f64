"""Batched Memory-R1 role calls with the shared opening prefilled once, against prefilling
every prompt whole, timed in alternation.

    python tools/bench.py shared_prefix [--roles answer,manager,facts] [--batch 16] \
        [--new-tokens 64] [--pairs 3] [--shared-prefix 256]

The packaged SmolLM2-135M-Instruct, greedy, `--batch` prompts per call rendered through each
role's real template and the model's chat template from synthetic conversations: the answer
agent over 10 memories per speaker and a question, the manager over 5 memories and 2 new facts,
the fact extractor over a turn and its context, and (`--roles=memsearcher`) MemSearcher's
context at a memory update. Per role the two forms run once each to warm
up (compiles), then alternate call by call (tools/benchmarks/pairs.py): the ratio is the whole-prefill
call's seconds over the shared-prefix call's (> 1: sharing is faster), the median of the
per-pair ratios. Both forms must produce the same completions (checked, and printed). The last
line is one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import jax
import numpy as np

from tools.benchmarks.pairs import alternate, format_summary, load_average


def _turns(seed: int) -> tuple[list, list]:
    """(speaker, text, session date) of every turn, and every question, of 4 synthetic
    conversations."""
    from memjax.experiments.synthetic import SyntheticConfig, generate_conversations

    turns, questions = [], []
    for conv in generate_conversations(SyntheticConfig(num_conversations=4, seed=seed)):
        for session in conv.sessions:
            turns += [(t.speaker, t.text, session.date_time) for t in session.turns]
        questions += [q.question for q in conv.qa]
    return turns, questions


def _memsearcher_update(question: str, turns: list) -> list[dict]:
    """A MemSearcher context at its memory update: system and user turn (question and a
    memory of 3 sentences), one search, and its response (3 passages of 2 sentences)."""
    from memjax.agents.memsearcher.prompts import context_messages, tool_response_message

    texts = [text for _, text, _ in turns]
    passages = "\n".join(f"Doc {i + 1}: {texts[3 + 2 * i]} {texts[4 + 2 * i]}" for i in range(3))
    call = f"<search>{question}</search>"
    return [
        *context_messages(question, " ".join(texts[:3])),
        {"role": "assistant", "content": f"<think>I need to search.</think>\n{call}"},
        tool_response_message([(call, passages)]),
    ]


def role_prompts(tokenizer, role: str, batch: int, seed: int = 0) -> list[list[int]]:
    """`batch` token-id prompts of one role, each over different turns."""
    from memjax.agents.memory_r1.answer_prompt import render_answer_prompt
    from memjax.agents.memory_r1.fact_prompt import render_fact_messages
    from memjax.agents.memory_r1.manager_prompt import render_manager_prompt

    turns, questions = _turns(seed)
    rng = np.random.default_rng(seed)
    pick = lambda k: [turns[i] for i in rng.choice(len(turns), k, replace=False)]
    prompts = []
    for b in range(batch):
        if role == "answer":
            a, c = ([(date, text) for _, text, date in pick(10)] for _ in range(2))
            text = render_answer_prompt("Rosa", a, "Sam", c, questions[b % len(questions)])
            messages = [{"role": "user", "content": text}]
        elif role == "manager":
            memories = [{"id": str(i), "text": text} for i, (_, text, _) in enumerate(pick(5))]
            facts = [text for _, text, _ in pick(2)]
            messages = [{"role": "user", "content": render_manager_prompt(memories, facts)}]
        elif role == "memsearcher":
            messages = _memsearcher_update(questions[b % len(questions)], pick(9))
        elif role == "facts":
            context = pick(3)
            messages = render_fact_messages([(s, t) for s, t, _ in context], context[-1][2])
        else:
            raise SystemExit(
                f"--roles: unknown role {role!r} (answer, manager, facts, memsearcher)"
            )
        prompts.append(tokenizer.chat(messages))
    return prompts


def bench_role(model, params, role, args) -> dict:
    from memjax.models.shared_prefix import common_prefix_length
    from memjax.sampling import SamplingParams, sample
    from memjax.sampling.prefix import shared_prefix_length

    prompts = role_prompts(model.tokenizer, role, args.batch)
    shared = SamplingParams(
        max_new_tokens=args.new_tokens, greedy=True, shared_prefix=args.shared_prefix
    )
    whole = dataclasses.replace(shared, shared_prefix=0)
    kw = dict(eos_ids=(), pad_id=model.tokenizer.pad_id)  # every row runs the full budget
    call = lambda sp: (
        lambda: jax.block_until_ready(sample(params, model.cfg, prompts, sp, 0, **kw).tokens)
    )
    same = np.array_equal(call(shared)(), call(whole)())  # warm-up, and the equality check
    times = alternate(call(shared), call(whole), args.pairs)
    row = {
        "prompt_tokens_mean": round(float(np.mean([len(p) for p in prompts])), 1),
        "common_prefix": common_prefix_length(prompts),
        "shared": shared_prefix_length(prompts, args.shared_prefix),
        "same_completions": bool(same),
        **times.summary(),
    }
    print(f"{role}: {format_summary(row)}; {json.dumps(row)}", flush=True)
    return row


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--roles", default="answer,manager,facts")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--shared-prefix", type=int, default=256)


def main(args: argparse.Namespace) -> dict:

    from memjax.checkpoints import load_model
    from memjax.sampling import prepare_params

    before = load_average()
    model = load_model("packaged:smollm2")
    params = prepare_params(model.params, model.cfg)
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; batch {args.batch}, "
          f"{args.new_tokens} new tokens per row")  # fmt: skip
    roles = {r: bench_role(model, params, r, args) for r in args.roles.split(",") if r}
    report = {"roles": roles, "load_before": before, "load_after": load_average()}
    return report
