"""The Memory-R1 manager on teacher prompts it never trained on: does its output parse, and does
it ADD, UPDATE and DELETE where the teacher does?

    python -m memjax.launch --config=configs/sft_data_cpu.py --workdir=/tmp/manager_heldout \
        --config.roles=manager --config.split=heldout --config.synthetic.seed=1 \
        --config.synthetic.num_conversations=3
    python tools/manager_decision_check.py /tmp/manager_heldout/trajectories.jsonl \
        --source=<sft workdir | packaged:smollm2> [--max_new_tokens 256]

Each prompt is a manager call of the oracle's trajectory: the bank the oracle keeps and the
turn's true facts, so a decision is scored against the right one for that bank, and one wrong
operation does not change the prompts after it (`memjax.agents.memory_r1.manager_decisions`). Greedy.
Prints the well-formed rate, each operation's teacher / student / matched counts and the
teacher-by-student table over shown memories; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys


def _table(summary: dict) -> list[str]:
    lines = [
        f"  well-formed calls  {summary['well_formed']}/{summary['calls']}"
        f" ({100 * summary['well_formed_rate']:.1f}%)",
        "  operation   teacher  student  matched  (calls: teacher / student)",
    ]
    for kind, c in summary["operations"].items():
        lines.append(
            f"  {kind:<10} {c.get('teacher', 0):>8} {c.get('student', 0):>8}"
            f" {c.get('matched', 0):>8}  ({c.get('teacher_calls', 0)} / {c.get('student_calls', 0)})"
        )
    lines.append("  shown memory: teacher -> student events")
    for teacher, row in summary["confusion"].items():
        cells = ", ".join(f"{s} {n}" for s, n in sorted(row.items())) or "-"
        lines.append(f"    {teacher:<7} -> {cells}")
    if summary["rejections"]:
        lines.append(f"  rejected items: {summary['rejections']}")
    return lines


def _write_predictions(path, call_ids, teacher_outputs, outputs, calls) -> None:
    from memjax.memory.atomic import atomic_write_text

    lines = [
        json.dumps({"call": c, "teacher_output": t, "student_output": s, **dataclasses.asdict(d)})
        for c, t, s, d in zip(call_ids, teacher_outputs, outputs, calls)
    ]
    atomic_write_text(path, "".join(line + "\n" for line in lines))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "trajectories", nargs="+", help="sft.make_data outputs with manager trajectories"
    )
    p.add_argument("--source", required=True, help="model source (an SFT workdir, packaged:...)")
    p.add_argument("--max_new_tokens", type=int, default=256)
    p.add_argument("--batch_size", type=int, default=8)
    p.add_argument("--predictions", default="", help="jsonl: every call's outputs and events")
    args = p.parse_args(argv)

    from memjax.agents.memory_r1.manager_decisions import compare_call, summarize
    from memjax.agents.memory_r1.models import greedy_policy
    from memjax.errors import DataError
    from memjax.sft.trajectories import read_trajectories

    try:
        trajectories = [
            t for path in args.trajectories for t in read_trajectories(path) if t.role == "manager"
        ]
    except DataError as e:
        print(e, file=sys.stderr)
        return 2
    if not trajectories:
        print(f"{', '.join(args.trajectories)}: no manager-role trajectories", file=sys.stderr)
        return 2
    prompts, teacher_outputs, call_ids = [], [], []
    for t in trajectories:
        for i, context in enumerate(t.contexts):
            call_ids.append(f"{t.id}/{i}")
            prompts.append([{"role": m.role, "content": m.content} for m in context[:-1]])
            teacher_outputs.append(context[-1].content)
    outputs = greedy_policy(args.source, args.max_new_tokens, args.batch_size)(prompts)
    try:
        calls = [
            compare_call(prompt[-1]["content"], teacher, student)
            for prompt, teacher, student in zip(prompts, teacher_outputs, outputs)
        ]
    except DataError as e:
        print(f"{', '.join(args.trajectories)}: {e}", file=sys.stderr)
        return 2
    summary = summarize(calls)
    if args.predictions:
        _write_predictions(args.predictions, call_ids, teacher_outputs, outputs, calls)
    splits = sorted({t.split for t in trajectories})
    print(f"{args.source} on {len(trajectories)} trajectories ({', '.join(splits)}), "
          f"{summary['calls']} manager calls")  # fmt: skip
    print("\n".join(_table(summary)))
    print(json.dumps({"source": args.source, "split": splits, **summary}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
