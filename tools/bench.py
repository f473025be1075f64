"""memjax's benchmarks, one command: `python tools/bench.py <name> [args]`.

    python tools/bench.py --help               # the benchmarks
    python tools/bench.py forward --pairs 5    # one of them; `<name> --help`: its arguments

Each benchmark is a module `tools/benchmarks/<name>.py` with `add_arguments(parser)` and
`main(args) -> dict`; it times memjax against its peer (or one form against another) in the same
run, alternating the two call by call (tools/benchmarks/pairs.py). Its progress goes to stdout
as it runs and the last line is one JSON object: everything it measured.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:  # `tools.benchmarks` and memjax from a checkout
    sys.path.insert(0, str(_ROOT))

BENCHMARKS = (
    "causal_blocks",
    "engine",
    "forward",
    "index",
    "lora_step",
    "prefill_chunks",
    "rl_shared_prefix",
    "rl_trained_positions",
    "sampling",
    "serving",
    "sft_shared_prefix",
    "shared_prefix",
    "train_step",
)


def parser(argv: list[str]) -> argparse.ArgumentParser:
    """The command line: one subcommand per benchmark. Only the module of the one `argv` names
    is imported (some import torch or ScaNN), so only it lists its arguments."""
    p = argparse.ArgumentParser(prog="tools/bench.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="name", required=True, metavar="name")
    chosen = next((a for a in argv if a in BENCHMARKS), None)
    for name in BENCHMARKS:
        if name != chosen:
            sub.add_parser(name, help=_summary(name))
            continue
        module = _module(name)
        summary = (module.__doc__ or "").split("\n\n")[0]
        sp = sub.add_parser(name, help=summary, description=summary)
        module.add_arguments(sp)
    return p


def _summary(name: str) -> str:
    """A benchmark's docstring's first line, read without importing it."""
    path = _ROOT / "tools" / "benchmarks" / f"{name}.py"
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.split("\n")[0]


def _module(name: str):
    return importlib.import_module(f"tools.benchmarks.{name}")


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    args = parser(argv).parse_args(argv)
    report = _module(args.name).main(args)
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
