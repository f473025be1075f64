"""The shape the code keeps: no function in memjax/ over 100 lines (its decorators and
docstring included), so each reads on one screen and does one thing."""

import ast
from pathlib import Path

MEMJAX = Path(__file__).resolve().parents[1] / "memjax"
MAX_LINES = 100


def _walk(node, prefix: str, rel: str, out: dict) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{child.name}"
            if not isinstance(child, ast.ClassDef):
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                out[(rel, name)] = child.end_lineno - first + 1
            _walk(child, name + ".", rel, out)
        else:
            _walk(child, prefix, rel, out)


def function_lengths(root: Path = MEMJAX) -> dict[tuple[str, str], int]:
    """(file under root, qualified function name) -> lines, for every function and method."""
    out: dict[tuple[str, str], int] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        _walk(tree, "", path.relative_to(root).as_posix(), out)
    return out


def test_function_lengths_are_measured():
    lengths = function_lengths()
    assert len(lengths) > 1000  # every module is walked, methods and nested functions too
    assert lengths[("jobs.py", "resolve")] < MAX_LINES


def test_no_function_over_100_lines():
    lengths = function_lengths()
    long = {k: n for k, n in lengths.items() if n > MAX_LINES}
    assert not long, "functions over 100 lines: " + ", ".join(
        f"memjax/{f}::{name} ({n})" for (f, name), n in sorted(long.items())
    )
