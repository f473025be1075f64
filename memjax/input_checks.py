"""A job's inputs checked without reading them: weights, data files, corpus, index, retriever.

    missing = check_inputs(config)       # [Missing(field, value, problem), ...]; [] when all there

Each check looks at paths and headers only (a directory's config.json and safetensors names, a
file's existence, a TCP connection), never loads weights or builds an index, so `--dry_run`
can run them on a laptop before a job is sent to the accelerators. One function per kind of
input; `check_inputs` runs them all.
"""

from __future__ import annotations

import dataclasses
import socket
from pathlib import Path
from urllib.parse import urlparse

from memjax.checkpoints import packaged, trained_policy_dir
from memjax.errors import CheckpointError

REPO_ROOT = Path(__file__).resolve().parents[1]
# Model sources that name no weights: the scripted policies of tests and the synthetic data's
# ground truth (memory_r1's `teacher.source=oracle`).
NOT_WEIGHTS = ("", "oracle", "scripted")


@dataclasses.dataclass(frozen=True)
class Missing:
    field: str  # dotted, as set on the command line: --config.<field>=...
    value: str
    problem: str

    def line(self) -> str:
        return f"config.{self.field}={self.value!r}: {self.problem}; set --config.{self.field}"


def _walk(section, prefix: str = ""):
    """(dotted path, value) of every leaf of a ConfigDict / dict."""
    for key in section.keys():
        value = section[key]
        path = f"{prefix}{key}"
        if hasattr(value, "keys"):
            yield from _walk(value, f"{path}.")
        else:
            yield path, value


def weights_problem(source: str) -> str | None:
    """What is wrong with a model source ('packaged:NAME', an HF directory, a .gguf file, a
    training workdir with its exported policy/), or None. Reads names only."""
    if not source.startswith("packaged:") and not Path(source).expanduser().exists():
        return "no such file or directory"
    try:
        path = trained_policy_dir(packaged.resolve(source))
    except CheckpointError as e:  # not there, or an unknown packaged name
        return str(e)
    if path.is_file():
        return None if path.suffix == ".gguf" else "not a .gguf file or an HF directory"
    if not (path / "config.json").is_file():
        return f"{path} has no config.json (an HF checkpoint directory, or a training workdir)"
    if not any(path.glob("*.safetensors")):
        return f"{path} has no *.safetensors weights"
    return None


def check_weights(config) -> list[Missing]:
    """Every model a config names: `<section>.source` and `<section>.trained` fields (model,
    manager, answer, teacher, judge, facts, embedder, encoder, retriever.encoder, ...) and
    `tokenizer` fields (a model source whose tokenizer is read)."""
    out = []
    for path, value in _walk(config):
        name = path.rsplit(".", 1)[-1]
        if name not in ("source", "trained", "tokenizer") or not isinstance(value, str):
            continue
        if value in NOT_WEIGHTS or value.startswith("openai:"):  # no weights, or served remotely
            continue
        problem = weights_problem(value)
        if problem:
            out.append(Missing(path, value, problem))
    return sorted(out, key=lambda m: not m.field.startswith("model."))  # the base model first


def _exists(path: str) -> bool:
    """As the jobs resolve data paths: as given, else relative to the repository root."""
    given = Path(path).expanduser()
    return given.exists() or (not given.is_absolute() and (REPO_ROOT / given).exists())


def _data_files(config) -> list[tuple[str, str]]:
    """(field, path) of the data files a config reads."""
    # Any `path` field names a data file (Memory-R1's data.path: LoCoMo; sft.make_data's
    # locomo.path, hotpotqa.path), except the synthetic data's.
    files = [
        (field, value)
        for field, value in _walk(config)
        if field.rsplit(".", 1)[-1] == "path"
        and isinstance(value, str)
        and value not in ("", "synthetic")
    ]
    data = config.get("data")
    if data is None:
        return files
    for split in ("train", "eval"):  # MemSearcher: {name: file}; SFT: one file ("": none)
        value = data.get(split)
        if hasattr(value, "keys"):
            files += [(f"data.{split}.{name}", str(p)) for name, p in value.items()]
        elif isinstance(value, str) and value:
            files.append((f"data.{split}", value))
    return files


def check_data_files(config) -> list[Missing]:
    return [
        Missing(field, path, "no such file")
        for field, path in _data_files(config)
        if not _exists(path)
    ]


def _has_index(index_dir: str) -> bool:
    """A built index: its snapshots each carry a meta.json."""
    return bool(index_dir) and any(Path(index_dir).expanduser().glob("**/meta.json"))


def check_corpus_and_index(config) -> list[Missing]:
    """The corpus `index.build` embeds, the index `retriever.serve` serves, and the in-process
    retriever's index or the corpus it is built from on first use (a HotpotQA config writes
    its closed corpus from its own data files)."""
    job = str(config.get("job", ""))
    if job == "index.build" and not _exists(str(config.corpus)):
        return [Missing("corpus", str(config.corpus), "no such file")]
    if job == "retriever.serve" and not _has_index(str(config.index_dir)):
        return [Missing("index_dir", str(config.index_dir), "no built index (index.build)")]
    r = config.get("retriever")
    if r is None or str(r.get("kind", "")) != "in_process":
        return []
    if _has_index(str(r.get("index_dir", "") or "")):
        return []
    corpus = str(r.get("corpus", "") or "")
    if corpus and _exists(corpus):
        return []
    data = config.get("data") or {}
    if str(data.get("format", "")) != "flashrag":
        return []  # a closed corpus, written from the data files (check_data_files)
    return [Missing("retriever.corpus", corpus, "no such file, and no built index at index_dir")]


def check_retriever_url(config, timeout: float = 2.0) -> list[Missing]:
    """An HTTP retriever (`retriever.kind=http`) answers at `retriever.url`: a TCP connection
    to its host and port (no request is sent)."""
    r = config.get("retriever")
    if r is None or str(r.get("kind", "")) != "http":
        return []
    url = str(r.url)
    parts = urlparse(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return [Missing("retriever.url", url, "expected http://HOST:PORT")]
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return []
    except OSError as e:
        return [
            Missing(
                "retriever.url",
                url,
                f"nothing answers ({e.strerror or e}); start retriever.serve "
                "(configs/retriever_serve.py) or point it at a running one",
            )
        ]


CHECKS = (check_weights, check_data_files, check_corpus_and_index, check_retriever_url)


def check_inputs(config) -> list[Missing]:
    """Every input check's findings, weights first."""
    return [m for check in CHECKS for m in check(config)]


__all__ = [
    "CHECKS",
    "Missing",
    "check_corpus_and_index",
    "check_data_files",
    "check_inputs",
    "check_retriever_url",
    "check_weights",
    "weights_problem",
]
