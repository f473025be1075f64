"""What the MemSearcher jobs read from their config: QA sets, the retriever, the model.

A file named in both `data.train` and `data.eval` (the CPU config's HotpotQA sample) is cut
by question id into train and eval questions; the closed corpus pools the paragraphs of all of
them. Data paths that are relative and absent from the working directory are taken relative to the
repository root, so the CPU config's `../shared/data/...` works from anywhere. A closed corpus
(HotpotQA's own paragraphs) is written with `memjax.data.corpus` and indexed on first use; an
existing index is reused when it was built from the same corpus (by content), encoder and index
kind, and rebuilt, saying what differs, when it was not.
"""

from __future__ import annotations

from pathlib import Path

from absl import logging
from ml_collections import ConfigDict

from memjax.data.corpus import build_corpus, hotpot_paragraphs, write_corpus
from memjax.data.hotpotqa import load_hotpotqa
from memjax.data.qa import QAExample, load_flashrag_jsonl
from memjax.data.splits import SplitSummary, held_out_ids
from memjax.errors import ConfigError, DataError
from memjax.fingerprint import describe

REPO_ROOT = Path(__file__).resolve().parents[3]
FORMATS = ("flashrag", "hotpotqa_hf")
SPLITS = ("train", "eval")
RETRIEVER_KINDS = ("in_process", "http")


def resolve_path(path: str, field: str) -> Path:
    """`path` as given when it exists (or is absolute), else relative to the repository root;
    a missing file is one clear error naming the config field."""
    given = Path(path).expanduser()
    candidates = [given] if given.is_absolute() else [given, REPO_ROOT / given]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    tried = " or ".join(str(c) for c in candidates)
    raise DataError(f"config.{field}={path!r}: no such file ({tried})")


def _read_set(data: ConfigDict, name: str, file: Path) -> list[QAExample]:
    if data.format == "hotpotqa_hf":
        examples = [e.to_qa(data.add_question_mark) for e in load_hotpotqa(file)]
    else:
        examples = load_flashrag_jsonl(file, name, data.add_question_mark)
    return [QAExample(e.id, e.question, e.golden_answers, name) for e in examples]


def _files(data: ConfigDict, split: str) -> dict[str, Path]:
    return {name: resolve_path(path, f"data.{split}.{name}") for name, path in data[split].items()}


def _shared_files(data: ConfigDict) -> set[Path]:
    """Files named in both data.train and data.eval: their questions are split by id."""
    return set(_files(data, "train").values()) & set(_files(data, "eval").values())


def _held_out(data: ConfigDict, examples: list[QAExample]) -> set[str]:
    return held_out_ids(
        [e.id for e in examples], float(data.shared_file_eval_fraction), int(data.split_seed)
    )


def load_qa_sets(data: ConfigDict, split: str) -> dict[str, list[QAExample]]:
    """`data.<split>` maps dataset name -> file; each set cut to `data.max_examples` (0: all).
    A file named in both data.train and data.eval is split by question id
    (memjax.data.splits.held_out_ids): `shared_file_eval_fraction` of it evaluates, the rest
    trains, so no evaluation question is ever trained on."""
    if data.format not in FORMATS:
        raise ConfigError(f"config.data.format={data.format!r}; choose from {FORMATS}")
    limit = int(data.get("max_examples", 0) or 0)
    shared = _shared_files(data)
    sets = {}
    for name, file in _files(data, split).items():
        examples = _read_set(data, name, file)
        if file in shared:
            held_out = _held_out(data, examples)
            examples = [e for e in examples if (e.id in held_out) == (split == "eval")]
        sets[name] = examples[:limit] if limit else examples
    if not sets:
        raise ConfigError(f"config.data.{split} names no dataset")
    return sets


def qa_split_summary(data: ConfigDict, split: str) -> SplitSummary:
    """The report's statement of its questions: every part's size and how they were cut."""
    sizes = {part: sum(len(v) for v in load_qa_sets(data, part).values()) for part in SPLITS}
    shared = _shared_files(data)
    how = []
    for name, file in _files(data, split).items():
        if file in shared:
            how.append(
                f"{name}: {file.name} cut by question id, "
                f"{float(data.shared_file_eval_fraction):g} to eval (seed {int(data.split_seed)})"
            )
        else:
            how.append(f"{name}: {file.name}")
    if int(data.get("max_examples", 0) or 0):
        how.append(f"at most {int(data.max_examples)} questions per set")
    return SplitSummary(split, sizes, "; ".join(how))


def ensure_closed_corpus(config: ConfigDict) -> Path:
    """Writes the HotpotQA files' pooled paragraphs to `config.retriever.corpus` when it does
    not exist yet (HotpotQA's closed setting); any other corpus must already be there."""
    corpus = Path(config.retriever.corpus).expanduser()
    if corpus.is_file():
        return corpus
    if config.data.format != "hotpotqa_hf":
        raise DataError(f"config.retriever.corpus={str(corpus)!r} does not exist")
    files = {
        resolve_path(p, f"data.{s}.{n}")
        for s in ("train", "eval")
        for n, p in getattr(config.data, s).items()
    }
    examples = [e for f in sorted(files) for e in load_hotpotqa(f)]
    documents = build_corpus(hotpot_paragraphs(examples))
    corpus.parent.mkdir(parents=True, exist_ok=True)
    tmp = corpus.with_suffix(corpus.suffix + ".tmp")
    write_corpus(tmp, documents)
    tmp.replace(corpus)  # atomic: a concurrent job never reads half a corpus
    logging.info("wrote %d pooled paragraphs to %s", len(documents), corpus)
    return corpus


def ensure_index(config: ConfigDict) -> Path:
    """The in-process retriever's index directory, built from the corpus when absent."""
    from memjax.memory.corpus import build_corpus_index, stale_index
    from memjax.memory.embedder import Embedder

    r = config.retriever
    if not r.index_dir:
        raise ConfigError("config.retriever.index_dir is empty; the in-process retriever needs it")
    index_dir = Path(r.index_dir).expanduser()
    layout = r.encoder.layout or None
    encoder_meta = {"source": r.encoder.source, "layout": layout}
    corpus = Path(r.corpus).expanduser() if r.corpus else None
    stale = stale_index(index_dir, corpus, encoder_meta, r.index_kind)
    if stale is None:
        return index_dir
    if stale:
        print(f"index: {index_dir} was built from other inputs ({describe(stale)}); rebuilding")
    corpus = ensure_closed_corpus(config)
    embedder = Embedder.load(r.encoder.source, layout=layout)
    build_corpus_index(corpus, embedder, index_dir, kind=r.index_kind, encoder_meta=encoder_meta)
    return index_dir


def make_retriever(config: ConfigDict):
    """In-process (`memjax.memory.corpus.Retriever` over `index_dir`) or the HTTP client of a
    running `retriever.serve` at `url`: the same passages either way."""
    kind = config.retriever.kind
    if kind == "in_process":
        from memjax.memory.corpus import Retriever

        return Retriever.load(ensure_index(config))
    if kind == "http":
        from memjax.memory.client import RetrievalClient

        return RetrievalClient(config.retriever.url)
    raise ConfigError(f"config.retriever.kind={kind!r}; choose from {RETRIEVER_KINDS}")


def load_policy_model(config: ConfigDict):
    """The policy's weights, tokenizer and config, with the numerics the config names (the
    paper-scale configs add compute_dtype and remat to param_dtype)."""
    from memjax.checkpoints import load_model

    names = ("param_dtype", "compute_dtype", "remat")
    numerics = {k: config.model[k] for k in names if k in config.model}
    return load_model(config.model.source, **{k: v for k, v in numerics.items() if v})
