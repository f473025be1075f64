"""The packages' public names: each in __all__ resolves, and importing the lazy packages
costs no JAX import (names load on first use)."""

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGES = ("memjax", "memjax.rl", "memjax.memory", "memjax.sampling", "memjax.models")
LAZY = ("memjax", "memjax.rl", "memjax.memory", "memjax.models")


@pytest.mark.parametrize("name", PACKAGES)
def test_every_exported_name_resolves(name):
    package = importlib.import_module(name)
    assert package.__all__, name
    for attr in package.__all__:
        assert getattr(package, attr) is not None, f"{name}.{attr}"
    with pytest.raises(AttributeError):
        package.no_such_name  # noqa: B018


def test_lazy_packages_import_no_jax():
    code = f"import sys; import {', '.join(LAZY)}; print('jax' in sys.modules)"
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr[-2000:]
