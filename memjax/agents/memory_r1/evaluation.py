"""The `memory_r1.eval` job: build (or load) banks, answer, judge, and report both protocols.

    python -m memjax.launch --config=configs/grpo_qwen7b.py --config.job=memory_r1.eval \
        --workdir=/ckpt/eval --config.answer.trained=/ckpt/answer/policy

Per test conversation: the manager (with the fact extractor) builds its bank turn by turn
(cached under <banks_dir>); the answer agent answers every question over 30 memories per
speaker, greedily; a local judge model labels each answer CORRECT/WRONG (Mem0's accuracy
prompt). Reports, shaped like Memory-R1's Table 1 (question-weighted overall):
  - report_mem0.{md,json}: F1 / BLEU-1 / J and EM, category 5 left out (Mem0, Memory-R1);
  - report_official.{md,json}: the official LoCoMo stemmed F1 with its per-category rules
    (category 5 included when config.data.include_adversarial);
each naming its split and the size of every part, with p50/p95 latency of the fact extractor,
manager, answer agent and judge, and memory tokens per conversation. predictions.jsonl holds every question's output and scores.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from memjax.agents.memory_r1 import job_setup as S
from memjax.agents.memory_r1.answer_env import answer_examples, answer_messages
from memjax.agents.memory_r1.answer_parser import parse_answer
from memjax.agents.memory_r1.bank_builders import (
    DESCRIPTIONS,
    POLICY,
    builder,
    conversation_banks,
)
from memjax.agents.memory_r1.bank_ops import memory_tokens
from memjax.agents.memory_r1.call_cache import CallCache
from memjax.agents.memory_r1.models import load_agent_model
from memjax.agents.memory_r1.run_settings import MemoryR1Run
from memjax.data.categories import ADVERSARIAL, TABLE1_ORDER
from memjax.errors import ConfigError
from memjax.eval.judge import JudgeTally, parse_judge_reply, render_judge_prompt
from memjax.eval.report import QuestionResult, build_report
from memjax.eval.scoring import mem0_scores, official_scores
from memjax.memory.atomic import atomic_write_text
from memjax.remote.openai_source import is_openai_source


def evaluate(run: MemoryR1Run, workdir: str | Path, method: str | None = None) -> dict:
    """Runs the evaluation; returns {"mem0": Report, "official": Report, "predictions": [...]}."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    every_conversation = S.load_conversations(run.data)
    conversations = S.select_conversations(every_conversation, run.data)
    banks_dir = Path(run.banks_dir or workdir / "banks")
    stored = conversation_banks(run, conversations, banks_dir, S.load_embedder(run.embedder))
    print(f"banks: built {stored.built or 'none'}, loaded the rest from {banks_dir}", flush=True)

    examples = _examples(run, conversations, stored.banks)
    a = run.answer_agent
    answerer = _resumable(run, workdir, "answer", a.max_new_tokens, a.batch_size)
    settings = S.answer_settings(run)
    outputs = answerer([answer_messages(e, settings) for e in examples])
    parsed = [parse_answer(t) for t in outputs]
    judge = _resumable(run, workdir, "judge", run.judge_max_new_tokens, a.batch_size)
    replies = _judge_replies(run, judge, examples, parsed)
    verdicts = {i: parse_judge_reply(r) for i, r in replies.items()}
    results, predictions = _scored(examples, outputs, parsed, replies, verdicts)

    latencies = {k: v for k, v in stored.latency.items() if v}
    latencies.update(answer=answerer.seconds, judge=judge.seconds)
    reports = _reports(
        run,
        results,
        method=method or method_name(run),
        latencies=latencies,
        memory_tokens=_memory_tokens(run, stored.banks),
        counters=_counters(stored.counters, parsed, verdicts.values()),
        split=S.split_summary(every_conversation, run.data),
    )
    for name, report in reports.items():
        atomic_write_text(workdir / f"report_{name}.md", report.to_markdown())
        atomic_write_text(workdir / f"report_{name}.json", report.to_json_str())
    lines = (json.dumps(p, ensure_ascii=False) + "\n" for p in predictions)
    atomic_write_text(workdir / "predictions.jsonl", "".join(lines))
    return {**reports, "predictions": predictions}


def _resumable(run: MemoryR1Run, workdir: Path, role: str, max_new_tokens: int, batch_size: int):
    """A role's greedy policy whose finished calls are kept under <workdir>/.calls/<role>: a
    stopped evaluation (hours of answer calls on LoCoMo's test split) resumes at its last one."""
    policy = S.policy_for(run, role, max_new_tokens, batch_size, role)
    inputs = S.call_inputs(run, role, max_new_tokens)
    policy.cache = CallCache(workdir / ".calls" / role, inputs)
    return policy


def _examples(run: MemoryR1Run, conversations, banks) -> list:
    """Every selected question of every conversation, over its conversation's bank."""
    k = run.answer_agent.k_per_speaker
    examples = []
    for conv in conversations:
        items = S.questions(conv, run.data)
        examples += answer_examples(conv.sample_id, conv.speakers, banks[conv.sample_id], items, k)
    return examples


def _judge_replies(run: MemoryR1Run, judge, examples, parsed) -> dict[int, str]:
    """The judge's reply to every non-adversarial answer, by example index (Mem0 leaves
    category 5 out of J, and it has no gold answer to judge against)."""
    template = run.templates["judge"]
    judged = [i for i, e in enumerate(examples) if e.category != ADVERSARIAL]
    prompts = [
        render_judge_prompt(
            examples[i].question, examples[i].gold, parsed[i].answer or "", template
        )
        for i in judged
    ]
    replies = judge([[{"role": "user", "content": p}] for p in prompts])
    return dict(zip(judged, replies))


def _scored(examples, outputs, parsed, replies, verdicts):
    """Both protocols' scores per question, and the predictions.jsonl rows that show them."""
    results, predictions = [], []
    for i, (e, text, p) in enumerate(zip(examples, outputs, parsed)):
        conv_id, qa_index = e.uid.rsplit("/", 1)
        # Mem0's protocol does not score category 5 (no gold answer): only the official
        # score is written for it, so no reader of predictions.jsonl can count zeros there.
        scores = {}
        if e.category != ADVERSARIAL:
            scores.update(mem0_scores(p.answer, e.gold, verdicts.get(i)))
        scores.update(official_scores(p.answer, e.gold or None, e.category))
        results.append(QuestionResult(conv_id, int(qa_index), e.category, scores))
        predictions.append(
            {
                "uid": e.uid,
                "category": e.category,
                "question": e.question,
                "gold": e.gold,
                "answer": p.answer,
                "output": text,
                "judge": replies.get(i),  # None: category 5 is not judged
                "scores": scores,
            }
        )
    return results, predictions


def _memory_tokens(run: MemoryR1Run, banks) -> dict[str, int]:
    """Each conversation's bank size in the answer agent's tokens (in config.model's when the
    answer agent is an endpoint; none counted when that is one too)."""
    spec = run.model("answer")
    if is_openai_source(spec.source):
        if is_openai_source(run.model("model").source):
            return {}
        spec = run.model("model")
    tokenizer = load_agent_model(spec).tokenizer
    return {
        cid: memory_tokens(bank, lambda t: len(tokenizer.encode(t))) for cid, bank in banks.items()
    }


def _counters(construction: Counter, parsed, verdicts) -> dict:
    """The normal, counted events: bank building's, malformed answers, unreadable verdicts."""
    answers = Counter(has_marker=sum(p.has_marker for p in parsed), total=len(parsed))
    answers.update(f"refused_{p.refused}" for p in parsed if p.refused)
    tally = JudgeTally()
    for verdict in verdicts:
        tally.add(verdict)
    judge_parse = dict(tally.status) | {f"refused_{k}": n for k, n in tally.refused.items()}
    return {
        "construction": dict(construction),
        "answers": dict(answers),
        "judge_parse": judge_parse,
    }


def _reports(run: MemoryR1Run, results, **report_fields) -> dict:
    """Mem0's protocol (F1 / BLEU-1 / J and EM, category 5 left out) and the official one
    (stemmed F1, category 5 included when the data includes it)."""
    official = TABLE1_ORDER + ((ADVERSARIAL,) if run.data.include_adversarial else ())
    protocols = {
        "mem0": (("f1", "bleu1", "j", "em"), TABLE1_ORDER),
        "official": (("official_f1",), official),
    }
    judge = {"mem0": S.describe_model(run.model("judge"))}  # J is Mem0's protocol's only
    return {
        name: build_report(
            results, metrics=metrics, categories=categories, judge=judge.get(name), **report_fields
        )
        for name, (metrics, categories) in protocols.items()
    }


def method_name(run: MemoryR1Run) -> str:
    """The report's row name: whose weights answer, and who built the banks."""

    def weights(role: str) -> str:
        return run.model(role).weights

    kind = builder(run.construction.builder, run.data.path)
    if kind != POLICY:
        return f"{weights('answer')} over {DESCRIPTIONS[kind]}"
    if weights("manager") == weights("answer"):
        return weights("answer")
    return f"{weights('answer')} over {weights('manager')}'s banks"


def eval_job(config, workdir) -> None:
    if not workdir:
        raise ConfigError("--workdir: memory_r1.eval needs a directory (banks, reports)")
    out = evaluate(MemoryR1Run.from_config(config), workdir)
    print("Mem0 / Memory-R1 protocol:\n" + out["mem0"].to_markdown())
    print("Official LoCoMo protocol:\n" + out["official"].to_markdown())
    print(f"reports in {workdir}", flush=True)


def build_banks_job(config, workdir) -> None:
    """`memory_r1.build_banks`: the selected conversations' banks under banks_dir."""
    if not workdir:
        raise ConfigError("--workdir: memory_r1.build_banks needs a directory")
    run = MemoryR1Run.from_config(config)
    conversations = S.select_conversations(S.load_conversations(run.data), run.data)
    banks_dir = Path(run.banks_dir or Path(workdir) / "banks")
    stored = conversation_banks(run, conversations, banks_dir, S.load_embedder(run.embedder))
    for cid, bank in stored.banks.items():
        print(f"{cid}: {len(bank)} memories ({', '.join(bank.owners())})")
    print(json.dumps({"built": stored.built, "counters": dict(stored.counters)}), flush=True)
