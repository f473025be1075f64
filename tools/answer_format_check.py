"""The Memory-R1 answer agent on teacher prompts it never trained on: does it write the
`**Answer:**` marker unprompted, and is the answer right?

    python -m memjax.launch --config=configs/sft_data_cpu.py --workdir=/tmp/answers_heldout \
        --config.roles=answer --config.split=heldout --config.synthetic.seed=1 \
        --config.synthetic.num_conversations=3 --config.answer_data=synthetic
    python tools/answer_format_check.py /tmp/answers_heldout/trajectories.jsonl \
        --source=<sft workdir | packaged:smollm2> [--max_new_tokens 64]

Each answer trajectory's prompt is the answer agent's real prompt over the oracle's bank (the
memories a perfect manager keeps), so the check isolates the answer agent from the manager that
`memory_r1.eval` runs in front of it. Greedy, no forced prefix. The gold answer is the one the
teacher wrote after its marker. Prints the marker rate, EM and token F1 with their standard
errors over questions and n; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("trajectories", help="sft.make_data output with answer-role trajectories")
    p.add_argument("--source", required=True, help="model source (an SFT workdir, packaged:...)")
    p.add_argument("--max_new_tokens", type=int, default=64)
    p.add_argument("--batch_size", type=int, default=16)
    args = p.parse_args(argv)

    from memjax.agents.memory_r1.answer_parser import parse_answer
    from memjax.agents.memory_r1.models import greedy_policy
    from memjax.errors import DataError
    from memjax.eval.paired import mean_se
    from memjax.eval.scoring import mem0_scores
    from memjax.sft.trajectories import read_trajectories

    try:
        trajectories = [t for t in read_trajectories(args.trajectories) if t.role == "answer"]
    except DataError as e:
        print(e, file=sys.stderr)
        return 2
    if not trajectories:
        print(f"{args.trajectories}: no answer-role trajectories", file=sys.stderr)
        return 2
    prompts, golds = [], []
    for t in trajectories:
        messages = t.contexts[0]
        last = max(i for i, m in enumerate(messages) if m.role == "assistant")
        prompts.append([{"role": m.role, "content": m.content} for m in messages[:last]])
        golds.append(parse_answer(messages[last].content).answer or "")
    outputs = greedy_policy(args.source, args.max_new_tokens, args.batch_size)(prompts)
    parsed = [parse_answer(o) for o in outputs]
    scores = [mem0_scores(a.answer, g) for a, g in zip(parsed, golds)]
    marker = mean_se([float(a.has_marker) for a in parsed])
    em = mean_se([s["em"] for s in scores])
    f1 = mean_se([s["f1"] for s in scores])
    splits = sorted({t.split for t in trajectories})
    print(f"{args.source} on {args.trajectories} ({', '.join(splits)}), n={len(parsed)}")
    for name, (mean, se, _) in (("marker", marker), ("EM", em), ("F1", f1)):
        print(f"  {name:<7} {100 * mean:6.1f} +- {100 * se:.1f}")
    result = {
        "source": args.source,
        "split": splits,
        "n": len(parsed),
        "marker_rate": marker[0],
        "marker_stderr": marker[1],
        "em": em[0],
        "em_stderr": em[1],
        "f1": f1[0],
        "f1_stderr": f1[1],
        "max_new_tokens": args.max_new_tokens,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
