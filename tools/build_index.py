"""Build a corpus index from the command line (the same code as the `index.build` job).

    python tools/build_index.py --corpus wiki.jsonl --output /data/wiki_index \
        [--encoder packaged:minilm] [--layout e5] [--kind scann|exact]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memjax.memory.corpus import build_corpus_index  # noqa: E402
from memjax.memory.embedder import Embedder  # noqa: E402
from memjax.memory.index import ScannParams  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help='jsonl with {"id", "contents"} rows')
    parser.add_argument("--output", required=True, help="directory for the index snapshots")
    parser.add_argument("--encoder", default="packaged:minilm")
    parser.add_argument("--layout", default=None, choices=[None, "minilm", "e5", "bge"])
    parser.add_argument("--kind", default="scann", choices=["scann", "exact"])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--num-leaves", type=int, default=None)
    parser.add_argument("--leaves-to-search", type=int, default=None)
    parser.add_argument("--reorder", type=int, default=200)
    args = parser.parse_args()
    embedder = Embedder.load(args.encoder, layout=args.layout, batch_size=args.batch_size)
    params = ScannParams(
        num_leaves=args.num_leaves, leaves_to_search=args.leaves_to_search, reorder=args.reorder
    )
    snapshot = build_corpus_index(
        args.corpus,
        embedder,
        args.output,
        kind=args.kind,
        scann=params,
        encoder_meta={"source": args.encoder, "layout": args.layout},
    )
    print(json.dumps(json.loads((snapshot / "meta.json").read_text())))


if __name__ == "__main__":
    main()
