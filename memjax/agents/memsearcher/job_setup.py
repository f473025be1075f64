"""What the MemSearcher jobs read from their config: QA sets, the retriever, the model.

The question sets are `memjax.agents.memsearcher.qa_sets` (any QA layout, any name). The
retriever's corpus and index are the user's when they exist, used exactly as given:

- `retriever.corpus` names a file that exists and that memjax did not write: it is the corpus.
  Absent, memjax writes the closed corpus there, pooling the paragraphs of the job's QA files
  (with a `.sources.json` beside it naming them); a corpus memjax wrote from other QA files
  is rewritten, saying so.
- `retriever.index_dir` holds an index: it serves as it is. Built from another corpus or by
  another encoder than the config names, that is one error naming what differs; another index
  kind (ScaNN where the config says exact) is only noted. An index a job built itself
  (`"origin": "memsearcher job"` in its meta) is a cache, rebuilt when its inputs changed.
  Absent, it is built from the corpus.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path

from ml_collections import ConfigDict

from memjax.agents.memsearcher.qa_sets import (
    REPO_ROOT,
    SPLITS,
    QAData,
    corpus_sources,
    load_qa_sets,
    qa_split_summary,
    resolve_path,
)
from memjax.data.corpus import build_corpus, write_corpus
from memjax.data.qa_formats import FORMATS
from memjax.errors import ConfigError, DataError, StaleArtefactError
from memjax.fingerprint import describe, file_identity

RETRIEVER_KINDS = ("in_process", "http")
JOB_CACHE = "memsearcher job"  # the `origin` of an index a job built (not the user's)


@dataclasses.dataclass(frozen=True)
class RetrieverSettings:
    """`config.retriever`'s corpus and index fields. Values are kept as given: the corpus and
    index caches are keyed by them (`encoder_meta`), and that key must not change."""

    kind: str = "http"
    url: str = ""
    index_dir: str = ""
    corpus: str = ""
    index_kind: str = "exact"
    encoder_source: str = ""
    encoder_layout: str = ""

    @classmethod
    def from_section(cls, retriever: ConfigDict) -> RetrieverSettings:
        encoder = retriever.get("encoder") or {}
        return cls(
            kind=retriever.get("kind", "http"),
            url=retriever.get("url", ""),
            index_dir=retriever.get("index_dir", ""),
            corpus=retriever.get("corpus", ""),
            index_kind=retriever.get("index_kind", "exact"),
            encoder_source=encoder.get("source", ""),
            encoder_layout=encoder.get("layout", ""),
        )

    @property
    def encoder_meta(self) -> dict:
        """The encoder as an index's meta names it (what a built index is checked against)."""
        return {"source": self.encoder_source, "layout": self.encoder_layout or None}


@dataclasses.dataclass(frozen=True)
class PolicyModel:
    """`config.model`: the policy's source and the numerics it is loaded with."""

    source: str
    numerics: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_section(cls, model: ConfigDict) -> PolicyModel:
        # The paper-scale configs add compute_dtype and remat to param_dtype; unset ones
        # (empty) keep load_model's defaults.
        names = ("param_dtype", "compute_dtype", "remat")
        numerics = {k: model[k] for k in names if k in model and model[k]}
        return cls(source=model.source, numerics=numerics)


def _sources_file(corpus: Path) -> Path:
    return corpus.with_name(corpus.name + ".sources.json")


def _sources(qa_files) -> list[dict]:
    return [{"path": str(q.path), "sha256": file_identity(q.path)["sha256"]} for q in qa_files]


def closed_corpus_state(
    retriever: RetrieverSettings, data: QAData, split: str | None = None
) -> tuple[Path, str]:
    """(corpus path, what to do): "user" (a file memjax did not write: use it), "fresh" (memjax
    wrote it from these QA files), "write" (absent) or "stale" (memjax wrote it from others)."""
    corpus = Path(retriever.corpus).expanduser()
    sources = _sources_file(corpus)
    if corpus.is_file() and not sources.is_file():
        return corpus, "user"
    if not corpus.is_file():
        return corpus, "write"
    current = _sources(corpus_sources(data, split))
    try:
        saved = json.loads(sources.read_text(encoding="utf-8")).get("sources")
    except (OSError, ValueError, AttributeError):
        saved = None
    return corpus, "fresh" if saved == current else "stale"


def ensure_closed_corpus(
    retriever: RetrieverSettings, data: QAData, split: str | None = None
) -> Path:
    """`config.retriever.corpus`: the user's file as it is, or the closed corpus of the QA
    files of `split` (both splits' when None) written there."""
    corpus, state = closed_corpus_state(retriever, data, split)
    if state in ("user", "fresh"):
        return corpus
    qa_files = corpus_sources(data, split)
    paragraphs = [p for q in qa_files for p in q.paragraphs]
    if not paragraphs:
        names = ", ".join(q.path.name for q in qa_files)
        raise DataError(
            f"config.retriever.corpus={str(corpus)!r}: the question files ({names}) carry no "
            "paragraphs to pool into a closed corpus; give a corpus file ({id, contents} jsonl)"
        )
    if state == "stale":
        print(f"corpus: {corpus} was written from other QA files; rewriting", flush=True)
    documents = build_corpus(paragraphs)
    corpus.parent.mkdir(parents=True, exist_ok=True)
    write_corpus(corpus, documents)  # atomic: a concurrent job never reads half a corpus
    tmp = _sources_file(corpus).with_suffix(".tmp")
    tmp.write_text(json.dumps({"sources": _sources(qa_files)}, indent=1), encoding="utf-8")
    tmp.replace(_sources_file(corpus))
    skipped = sum(q.without_paragraphs for q in qa_files)
    note = f" ({skipped} questions carry no paragraphs)" if skipped else ""
    print(f"corpus: {len(documents)} paragraphs of {len(qa_files)} QA files{note} -> {corpus}")
    return corpus


def index_state(retriever: RetrieverSettings, corpus: Path | None) -> tuple[str, list[str]]:
    """What `config.retriever.index_dir` holds, for this corpus and encoder: ("use", notes),
    ("build", reasons) or ("mismatch", differences)."""
    from memjax.memory.corpus import read_index_meta, stale_index

    r = retriever
    index_dir = Path(r.index_dir).expanduser()
    compare = corpus if corpus is not None and corpus.is_file() else None
    stale = stale_index(index_dir, compare, r.encoder_meta, r.index_kind)
    if stale and not r.encoder_source:  # no encoder named: the index's own
        stale = [d for d in stale if not d.startswith("encoder.")] or None
    if stale is None:
        return "use", []
    if stale == []:
        return "build", []
    ours = read_index_meta(index_dir).get("origin") == JOB_CACHE
    if ours:
        return "build", stale
    real = [d for d in stale if not d.startswith("index.kind")]
    if real:
        return "mismatch", real
    return "use", stale


def ensure_index(retriever: RetrieverSettings, data: QAData, split: str | None = None) -> Path:
    """The in-process retriever's index directory: used as given, or built when absent."""
    from memjax.memory.corpus import build_corpus_index
    from memjax.memory.embedder import Embedder

    r = retriever
    if not r.index_dir:
        raise ConfigError("config.retriever.index_dir is empty; the in-process retriever needs it")
    index_dir = Path(r.index_dir).expanduser()
    corpus = Path(r.corpus).expanduser() if r.corpus else None
    corpus_state = closed_corpus_state(r, data, split)[1] if corpus is not None else None
    if corpus_state == "stale":  # memjax's own closed corpus, of other QA files
        corpus = ensure_closed_corpus(r, data, split)
    state, notes = index_state(r, corpus)
    if state == "mismatch":
        raise StaleArtefactError(
            f"config.retriever.index_dir={str(index_dir)!r} does not match the config "
            f"({describe(notes)}); point retriever.corpus / retriever.encoder at what built it, "
            "or give another index_dir"
        )
    if state == "use":
        if notes:
            print(f"index: {index_dir} used as it is ({describe(notes)})", flush=True)
        return index_dir
    if notes:
        print(f"index: {index_dir} was built from other inputs ({describe(notes)}); rebuilding")
    if corpus is None:
        raise ConfigError(f"config.retriever.corpus is empty and {index_dir} holds no index")
    if corpus_state == "write":
        corpus = ensure_closed_corpus(r, data, split)
    embedder = Embedder.load(r.encoder_source, layout=r.encoder_layout or None)
    build_corpus_index(
        corpus,
        embedder,
        index_dir,
        kind=r.index_kind,
        encoder_meta=r.encoder_meta,
        origin=JOB_CACHE,
    )
    return index_dir


def make_retriever(retriever: RetrieverSettings, data: QAData, split: str | None = None):
    """In-process (`memjax.memory.corpus.Retriever` over `index_dir`) or the HTTP client of a
    running `retriever.serve` at `url`: the same passages either way. `split` names the QA
    files a closed corpus pools (both splits' when None)."""
    kind = retriever.kind
    if kind == "in_process":
        from memjax.memory.corpus import Retriever

        return Retriever.load(ensure_index(retriever, data, split))
    if kind == "http":
        from memjax.memory.client import RetrievalClient

        return RetrievalClient(retriever.url)
    raise ConfigError(f"config.retriever.kind={kind!r}; choose from {RETRIEVER_KINDS}")


def load_policy_model(model: PolicyModel):
    """The policy's weights, tokenizer and config, with the numerics the config names."""
    from memjax.checkpoints import load_model

    return load_model(model.source, **model.numerics)


__all__ = [
    "FORMATS",
    "REPO_ROOT",
    "SPLITS",
    "PolicyModel",
    "QAData",
    "RetrieverSettings",
    "ensure_closed_corpus",
    "ensure_index",
    "load_policy_model",
    "load_qa_sets",
    "make_retriever",
    "qa_split_summary",
    "resolve_path",
]
