"""Every python block of docs/library.md runs as written (each in a namespace of its own, as a
reader pastes it into a fresh interpreter); blocks that decode with SmolLM2 are heavy."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks(doc: str) -> list[str]:
    return BLOCK.findall((ROOT / "docs" / doc).read_text(encoding="utf-8"))


def _cases():
    for i, code in enumerate(blocks("library.md")):
        heavy = "load_model(" in code
        yield pytest.param(i, code, id=f"library-{i}", marks=[pytest.mark.heavy] if heavy else [])


def test_every_component_has_a_block():
    text = "\n".join(blocks("library.md"))
    for package in ("memjax.memory", "memjax.models", "memjax.sampling", "memjax.rl", "Memory"):
        assert package in text, package


@pytest.mark.parametrize("index, code", _cases())
def test_block_runs(index, code, capsys):
    exec(compile(code, f"docs/library.md, python block {index}", "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out.strip()  # every block shows its result
