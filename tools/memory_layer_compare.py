"""memjax.Memory on held-out synthetic conversations, one manager against another.

    python tools/memory_layer_compare.py --managers scripted,packaged:smollm2 \
        --conversations 1 --out /tmp/memory_layer_compare.json

Every turn of each held-out test conversation (synthetic seed 1 after its validation
conversation: configs/memory_r1_synthetic_cpu.py's split) goes through `Memory.add` as a
message of its speaker (the speaker is the user id, one Memory per conversation, each memory
dated by its session); then each question is asked through `Memory.answer` over both
speakers' memories. Only the manager changes between
rows: the fact extractor and the answer agent are the same for all (`--facts`, `--answer`;
scripted by default, so rows differ by the manager alone). A manager is a RoleSpec source (a
model source, a training workdir, or "scripted"); `--trained` gives trained weights per
manager ("" for none). Reported per manager: EM and F1 of the answers, the share of questions
whose gold answer is in the retrieved memories (what the bank makes answerable), operation
counts, well-formed manager outputs and memory tokens.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter

from memjax.eval.qa_metrics import exact_match, token_f1
from memjax.experiments.synthetic_split import SyntheticSplitConfig, synthetic_split
from memjax.memory.embedder import Embedder
from memjax.memory_layer import Memory, RoleSpec, role_policy


def held_out(conversations: int, sessions: int):
    split = SyntheticSplitConfig(
        num_train=0, num_validation=1, num_test=conversations, sessions_per_conversation=sessions
    )
    return synthetic_split(split)["test"]


def run_conversation(memory: Memory, conv, max_questions: int, events: Counter) -> Counter:
    """Adds every turn (user id: the speaker), then answers the questions; sums per question."""
    for session, turn in conv.turns():
        message = {"role": "user", "content": turn.display_text(), "name": turn.speaker}
        out = memory.add([message], user_id=turn.speaker, timestamp=session.date_time)
        events.update(r["event"] for r in out["results"])
    scores: Counter = Counter()
    for qa in list(conv.qa)[:max_questions]:
        result = memory.answer(qa.question, user_id=list(conv.speakers))
        prediction = result["answer"] or ""
        scores["em"] += exact_match(prediction, qa.answer)
        scores["f1"] += token_f1(prediction, qa.answer)
        gold = qa.answer.casefold()
        scores["gold_in_memories"] += any(gold in m.casefold() for m in result["memories"])
        scores["questions"] += 1
    for speaker in conv.speakers:
        kept = memory.get_all(speaker, limit=1000)["results"]
        scores["memories"] += len(kept)
        scores["memory_words"] += sum(len(m["memory"].split()) for m in kept)
    return scores


def run_manager(spec: RoleSpec, facts, answer, embedder, conversations, max_questions) -> dict:
    """One row: every conversation in a Memory of its own, all driven by this manager."""
    manager = role_policy(spec, "manager")
    events: Counter = Counter()
    totals: Counter = Counter()
    stats: Counter = Counter()
    t0 = time.perf_counter()
    for conv in conversations:
        root = tempfile.mkdtemp(prefix="memory_layer_compare_")
        memory = Memory(root, facts=facts, manager=manager, answer=answer, embedder=embedder)
        totals.update(run_conversation(memory, conv, max_questions, events))
        stats.update(memory.stats())
    n = max(totals["questions"], 1)
    return {
        "manager": spec.source + (f" + {spec.trained}" if spec.trained else ""),
        "questions": totals["questions"],
        "em": 100 * totals["em"] / n,
        "f1": 100 * totals["f1"] / n,
        "gold_in_memories": 100 * totals["gold_in_memories"] / n,
        "events": dict(events),
        "manager_calls": stats["manager_calls"],
        "manager_well_formed": stats["manager_well_formed"],
        "rejected_ops": sum(v for k, v in stats.items() if k.startswith("manager_rejected_")),
        "memories": totals["memories"],
        "memory_words": totals["memory_words"],
        "wall_s": time.perf_counter() - t0,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--managers", default="scripted,packaged:smollm2")
    p.add_argument("--trained", default="", help="comma-separated, one per manager")
    p.add_argument("--facts", default="scripted")
    p.add_argument("--answer", default="scripted")
    p.add_argument("--conversations", type=int, default=1)
    p.add_argument("--sessions", type=int, default=4)
    p.add_argument("--max_questions", type=int, default=24)
    p.add_argument("--manager_max_new_tokens", type=int, default=256)
    p.add_argument("--out", default="")
    args = p.parse_args(argv)
    managers = [m for m in args.managers.split(",") if m]
    trained = args.trained.split(",") if args.trained else [""] * len(managers)
    if len(trained) != len(managers):
        print(f"--trained: {len(trained)} entries for {len(managers)} managers", file=sys.stderr)
        return 2
    embedder = Embedder.load()
    facts = role_policy(RoleSpec(args.facts), "facts")
    answer = role_policy(RoleSpec(args.answer), "answer")
    conversations = held_out(args.conversations, args.sessions)
    rows = []
    for source, weights in zip(managers, trained):
        spec = RoleSpec(source, trained=weights, max_new_tokens=args.manager_max_new_tokens)
        row = run_manager(spec, facts, answer, embedder, conversations, args.max_questions)
        row.update(facts=args.facts, answer=args.answer)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
