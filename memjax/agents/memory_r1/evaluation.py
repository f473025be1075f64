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
from memjax.agents.memory_r1.models import load_agent_model
from memjax.agents.memory_r1.recipe import from_paper_recipe
from memjax.data.categories import ADVERSARIAL, TABLE1_ORDER
from memjax.errors import ConfigError
from memjax.eval.judge import JudgeTally, parse_judge_reply, render_judge_prompt
from memjax.eval.report import QuestionResult, build_report
from memjax.eval.scoring import mem0_scores, official_scores


def evaluate(config, workdir: str | Path, method: str | None = None) -> dict:
    """Runs the evaluation; returns {"mem0": Report, "official": Report, "predictions": [...]}."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    every_conversation = S.load_conversations(config.data)
    conversations = S.select_conversations(every_conversation, config.data)
    split = S.split_summary(every_conversation, config.data)
    embedder = S.load_embedder(config)
    a = config.answer_agent
    banks_dir = Path(config.banks_dir or workdir / "banks")
    stored = conversation_banks(config, conversations, banks_dir, embedder)
    print(f"banks: built {stored.built or 'none'}, loaded the rest from {banks_dir}", flush=True)

    examples = []
    for conv in conversations:
        items = S.questions(conv, config.data)
        bank = stored.banks[conv.sample_id]
        examples.extend(
            answer_examples(conv.sample_id, conv.speakers, bank, items, int(a.k_per_speaker))
        )
    settings = S.answer_settings(config)
    answerer = S.policy_for(config, "answer", a.max_new_tokens, a.batch_size, "answer")
    outputs = answerer([answer_messages(e, settings) for e in examples])
    parsed = [parse_answer(t) for t in outputs]

    judge = S.policy_for(config, "judge", config.judge.max_new_tokens, a.batch_size, "judge")
    judge_template = S.prompt_templates(config)["judge"]
    judged = [i for i, e in enumerate(examples) if e.category != ADVERSARIAL]
    replies = judge(
        [
            [
                {
                    "role": "user",
                    "content": render_judge_prompt(
                        examples[i].question,
                        examples[i].gold,
                        parsed[i].answer or "",
                        judge_template,
                    ),
                }
            ]
            for i in judged
        ]
    )
    judge_replies = dict(zip(judged, replies))
    verdicts = {i: parse_judge_reply(r) for i, r in judge_replies.items()}
    tally = JudgeTally()
    for v in verdicts.values():
        tally.add(v)

    results, predictions = [], []
    answers = Counter(has_marker=sum(p.has_marker for p in parsed), total=len(parsed))
    answers.update(f"refused_{p.refused}" for p in parsed if p.refused)
    for i, (e, text, p) in enumerate(zip(examples, outputs, parsed)):
        conv_id, qa_index = e.uid.rsplit("/", 1)
        scores = dict(mem0_scores(p.answer, e.gold, verdicts.get(i)))
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
                "judge": judge_replies.get(i),  # None: category 5 is not judged
                "scores": scores,
            }
        )

    tokenizer = load_agent_model(S.agent_spec(config, "answer")).tokenizer
    mem_tokens = {
        cid: memory_tokens(bank, lambda t: len(tokenizer.encode(t)))
        for cid, bank in stored.banks.items()
    }
    latencies = {k: v for k, v in stored.latency.items() if v}
    latencies.update(answer=answerer.seconds, judge=judge.seconds)
    counters = {
        "construction": dict(stored.counters),
        "answers": dict(answers),
        "judge_parse": dict(tally.status) | {f"refused_{k}": n for k, n in tally.refused.items()},
    }
    method = method or method_name(config)
    mem0 = build_report(
        results,
        method=method,
        metrics=("f1", "bleu1", "j", "em"),
        categories=TABLE1_ORDER,
        latencies=latencies,
        memory_tokens=mem_tokens,
        counters=counters,
        split=split,
    )
    official_categories = TABLE1_ORDER + ((ADVERSARIAL,) if config.data.include_adversarial else ())
    official = build_report(
        results,
        method=method,
        metrics=("official_f1",),
        categories=official_categories,
        latencies=latencies,
        memory_tokens=mem_tokens,
        counters=counters,
        split=split,
    )
    for name, report in (("mem0", mem0), ("official", official)):
        (workdir / f"report_{name}.md").write_text(report.to_markdown())
        (workdir / f"report_{name}.json").write_text(report.to_json_str())
    with open(workdir / "predictions.jsonl", "w") as f:
        for p in predictions:
            f.write(json.dumps(p, ensure_ascii=False) + "\n")
    return {"mem0": mem0, "official": official, "predictions": predictions}


def method_name(config) -> str:
    """The report's row name: whose weights answer, and who built the banks."""

    def weights(role: str) -> str:
        spec = S.agent_spec(config, role)
        return spec.trained or spec.source

    kind = builder(config)
    if kind != POLICY:
        return f"{weights('answer')} over {DESCRIPTIONS[kind]}"
    if weights("manager") == weights("answer"):
        return weights("answer")
    return f"{weights('answer')} over {weights('manager')}'s banks"


def eval_job(config, workdir) -> None:
    if not workdir:
        raise ConfigError("--workdir: memory_r1.eval needs a directory (banks, reports)")
    config = from_paper_recipe(config)  # configs/grpo_qwen7b.py etc. use the recipe schema
    out = evaluate(config, workdir)
    print("Mem0 / Memory-R1 protocol:\n" + out["mem0"].to_markdown())
    print("Official LoCoMo protocol:\n" + out["official"].to_markdown())
    print(f"reports in {workdir}", flush=True)


def build_banks_job(config, workdir) -> None:
    """`memory_r1.build_banks`: the selected conversations' banks under banks_dir."""
    if not workdir:
        raise ConfigError("--workdir: memory_r1.build_banks needs a directory")
    config = from_paper_recipe(config)  # configs/grpo_qwen7b.py etc. use the recipe schema
    conversations = S.select_conversations(S.load_conversations(config.data), config.data)
    banks_dir = Path(config.banks_dir or Path(workdir) / "banks")
    stored = conversation_banks(config, conversations, banks_dir, S.load_embedder(config))
    for cid, bank in stored.banks.items():
        print(f"{cid}: {len(bank)} memories ({', '.join(bank.owners())})")
    print(json.dumps({"built": stored.built, "counters": dict(stored.counters)}), flush=True)
