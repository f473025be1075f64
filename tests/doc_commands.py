"""The `memjax.launch` commands that README.md and docs/*.md show, as argument lists.

    for cmd in doc_commands(ROOT):    # DocCommand(where="README.md:28", argv=[...])
        ...

A command starts at `python -m memjax.launch` or at a `launch/...` script, in a fenced or
indented code block (continued over lines that end in a backslash) or in an inline code span
(which may wrap); trailing `# comments` are dropped, and `<placeholders>` become one token each. A `launch/`
command is reduced to what its hosts run: `memjax.launch` with its config, workdir and
`--config.*` overrides.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path

START = re.compile(r"(python -m memjax\.launch\b|(?:python |bash |sbatch [^\n]*?)?launch/\S+)")
PLACEHOLDER = re.compile(r"<[^<>\n]*>")


@dataclasses.dataclass(frozen=True)
class DocCommand:
    where: str  # file:line
    text: str  # as written
    argv: list[str]  # memjax.launch's arguments

    def __str__(self) -> str:
        return f"{self.where}: {self.text}"


def _block_commands(lines: list[str]):
    """(line number, text) of commands in fenced or indented code blocks."""
    inside, i = False, 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            inside = not inside
        elif (inside or line.startswith("    ")) and START.search(line):
            start, parts = i, [line[START.search(line).start() :]]
            while parts[-1].split("#")[0].rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                parts.append(lines[i])
            yield start + 1, " ".join(p.split(" #")[0].rstrip().rstrip("\\") for p in parts)
        i += 1


def _inline_commands(text: str):
    """(line number, text) of inline code spans outside fences that hold a command."""
    outside = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    for m in re.finditer(r"(?<!`)`([^`]+)`(?!`)", outside):
        span = " ".join(m.group(1).split())
        if START.match(span):
            yield outside.count("\n", 0, m.start()) + 1, span


def _tokens(text: str) -> list[str]:
    names = {}

    def keep(m):
        names[f"PLACEHOLDER{len(names)}"] = m.group(0)
        return f"PLACEHOLDER{len(names) - 1}"

    tokens = shlex.split(PLACEHOLDER.sub(keep, text), comments=True)
    out = []
    for token in tokens:
        for key, value in names.items():
            token = token.replace(key, value)
        out.append(token)
    return out


def launch_argv(tokens: list[str]) -> list[str]:
    """memjax.launch's arguments from a documented command's tokens."""
    if "memjax.launch" in tokens:
        return tokens[tokens.index("memjax.launch") + 1 :]
    script = next(i for i, t in enumerate(tokens) if t.startswith("launch/"))
    rest = tokens[script + 1 :]
    if tokens[script].endswith(".sh"):  # launch/X.sh [NAME ZONE] CONFIG WORKDIR [--config.x=y ...]
        positional = [t for t in rest if not t.startswith("-")]
        at = next((i for i, t in enumerate(positional) if t.endswith(".py")), 0)
        config, workdir = (positional[at : at + 2] + ["", ""])[:2]
        keep = [t for t in rest if t.startswith("--config.")]
        return [f"--config={config}", f"--workdir={workdir}", *keep]
    keep = [t for t in rest if t.startswith(("--config=", "--config.", "--workdir="))]
    return keep


def doc_commands(root: Path) -> list[DocCommand]:
    files = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    out = []
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text()
        found = list(_block_commands(text.splitlines())) + list(_inline_commands(text))
        for line, command in found:
            tokens = _tokens(command)
            if not tokens or not any(
                t == "memjax.launch" or t.startswith("launch/") for t in tokens
            ):
                continue
            argv = launch_argv(tokens)
            if not any(a.startswith("--config=") and a != "--config=" for a in argv):
                continue  # a launcher named in prose, not a command
            where = f"{path.relative_to(root)}:{line}"
            out.append(DocCommand(where, command, argv))
    return out
