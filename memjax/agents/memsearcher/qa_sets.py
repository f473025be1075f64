"""The question sets a MemSearcher job reads: named files of any QA layout, train and eval.

    data.eval  = {"hotpotqa": PATH, ...}     or   data.eval_files  = "mine=PATH,other=PATH"
    data.train = {"nq": PATH, ...}           or   data.train_files = "mine=PATH"

A set's name is the user's (it only labels the report); its layout is read from the file
(`memjax.data.qa_formats`: FlashRAG / Search-R1 jsonl, HotpotQA, 2Wiki, MuSiQue, Bamboogle ...).
`*_files`, when set, replaces the section (the config is locked, so a new name cannot be added
to it from the command line). An evaluation reads only evaluation files; training only
training files. One file named as both is cut into training and evaluation questions only when
asked (`data.shared_file_eval_fraction` > 0), and the cut is printed; otherwise that is an
error. A set with no questions is an error. Relative paths absent from the working directory
are taken relative to the repository root, so the CPU config's `../shared/data/...` works from
anywhere.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from ml_collections import ConfigDict

from memjax.data.qa import QAExample
from memjax.data.qa_formats import FORMATS, QAFile, describe, load_qa_file
from memjax.data.splits import SplitSummary, held_out_ids
from memjax.errors import ConfigError, DataError

REPO_ROOT = Path(__file__).resolve().parents[3]
SPLITS = ("train", "eval")


@dataclasses.dataclass(frozen=True)
class QAData:
    """`config.data` as read. The file names stay as the user gave them: they are parsed,
    resolved and checked where they are used (a job that needs no training file never fails on
    one), so every error keeps its text and its turn."""

    train: Mapping[str, str] = dataclasses.field(default_factory=dict)
    eval: Mapping[str, str] = dataclasses.field(default_factory=dict)
    train_files: str = ""  # "name=path,...": replaces `train` when set
    eval_files: str = ""
    format: str = "auto"
    add_question_mark: bool = True
    shared_file_eval_fraction: float = 0.0  # checked when a shared file is cut
    split_seed: int = 0
    max_examples: int = 0  # per set; 0: all

    @classmethod
    def from_section(cls, data: ConfigDict) -> QAData:
        return cls(
            train=dict(data.get("train", {}) or {}),
            eval=dict(data.get("eval", {}) or {}),
            train_files=str(data.get("train_files", "") or ""),
            eval_files=str(data.get("eval_files", "") or ""),
            format=str(data.get("format", "auto") or "auto"),
            add_question_mark=bool(data.get("add_question_mark", True)),
            shared_file_eval_fraction=float(data.get("shared_file_eval_fraction", 0.0) or 0.0),
            split_seed=int(data.get("split_seed", 0)),
            max_examples=int(data.get("max_examples", 0) or 0),
        )

    def section(self, split: str) -> Mapping[str, str]:
        return self.train if split == "train" else self.eval

    def files_spec(self, split: str) -> str:
        return self.train_files if split == "train" else self.eval_files


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


def named_files(data: QAData, split: str) -> dict[str, str]:
    """name -> path as the config gives them: `data.<split>_files` when set, else the section."""
    spec = data.files_spec(split).strip()
    if not spec:
        return dict(data.section(split))
    out = {}
    for part in spec.split(","):
        name, sep, path = part.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise ConfigError(
                f"config.data.{split}_files={spec!r}: write name=path[,name=path...], got {part!r}"
            )
        if name.strip() in out:
            raise ConfigError(f"config.data.{split}_files: the name {name.strip()!r} is used twice")
        out[name.strip()] = path.strip()
    return out


def files(data: QAData, split: str) -> dict[str, Path]:
    field = f"data.{split}_files" if data.files_spec(split) else f"data.{split}"
    return {
        name: resolve_path(path, f"{field}.{name}")
        for name, path in named_files(data, split).items()
    }


def _other_files(data: QAData, split: str) -> set[Path]:
    """The other split's files that exist (an evaluation needs no training file)."""
    other = "train" if split == "eval" else "eval"
    found = set()
    for name, path in named_files(data, other).items():
        try:
            found.add(resolve_path(path, f"data.{other}.{name}"))
        except DataError:
            continue
    return found


def eval_fraction(data: QAData) -> float:
    fraction = data.shared_file_eval_fraction
    if not 0.0 <= fraction < 1.0:
        raise ConfigError(
            f"config.data.shared_file_eval_fraction={fraction:g}: the fraction of a shared file "
            "that evaluates must be in (0, 1), or 0 to never cut a file"
        )
    return fraction


def shared_files(data: QAData, split: str) -> set[Path]:
    """Files of `split` also named by the other split: cut by question id when asked."""
    shared = set(files(data, split).values()) & _other_files(data, split)
    if shared and not eval_fraction(data):
        names = ", ".join(sorted(str(p) for p in shared))
        raise ConfigError(
            f"config.data: {names} is named for both training and evaluation; set "
            "--config.data.shared_file_eval_fraction=0.2 (say what fraction evaluates) to cut "
            "it by question id, or name separate files"
        )
    return shared


@lru_cache(maxsize=32)
def _read(path: Path, stamp: tuple, name: str, add_mark: bool, expect: str) -> QAFile:
    del stamp  # part of the cache key: a file changed on disk is read again
    return load_qa_file(path, name, add_mark, expect)


def read_qa_file(data: QAData, name: str, path: Path) -> QAFile:
    expect = data.format
    if expect not in ("auto", *FORMATS):
        raise ConfigError(f"config.data.format={expect!r}; choose auto or one of {FORMATS}")
    stat = path.stat()
    return _read(path, (stat.st_mtime_ns, stat.st_size), name, data.add_question_mark, expect)


def _held_out(data: QAData, examples: list[QAExample], path: Path) -> set[str]:
    try:
        return held_out_ids([e.id for e in examples], eval_fraction(data), data.split_seed)
    except ValueError as e:
        raise DataError(f"{path}: cannot cut into train and eval questions: {e}") from None


def load_qa_sets(data: QAData, split: str) -> dict[str, list[QAExample]]:
    """`split`'s sets, name -> questions, each cut to `data.max_examples` (0: all)."""
    limit = data.max_examples
    shared = shared_files(data, split)
    sets = {}
    for name, path in files(data, split).items():
        examples = read_qa_file(data, name, path).examples
        if path in shared:
            held_out = _held_out(data, examples, path)
            examples = [e for e in examples if (e.id in held_out) == (split == "eval")]
        sets[name] = examples[:limit] if limit else examples
        if not sets[name]:
            raise DataError(f"config.data.{split}.{name}={str(path)!r}: no questions to use")
    if not sets:
        raise ConfigError(f"config.data.{split} names no question file")
    return sets


def qa_split_summary(data: QAData, split: str) -> SplitSummary:
    """The report's statement of its questions: every part's size and how they were made."""
    sizes = {split: sum(len(v) for v in load_qa_sets(data, split).values())}
    shared = shared_files(data, split)
    how = []
    for name, path in files(data, split).items():
        qa = read_qa_file(data, name, path)
        line = f"{name}: {describe(qa)}"
        if path in shared:
            other = "train" if split == "eval" else "eval"
            n_eval = len(_held_out(data, qa.examples, path))
            n_other = n_eval if other == "eval" else len(qa.examples) - n_eval
            sizes[other] = sizes.get(other, 0) + n_other
            line += (
                f", cut by question id, {eval_fraction(data):g} to eval (seed {data.split_seed})"
            )
        how.append(line)
    other = "train" if split == "eval" else "eval"
    if not shared and named_files(data, other):
        # The other part's size, when its files are at hand (an evaluation needs none).
        with contextlib.suppress(DataError, ConfigError):
            sizes[other] = sum(len(v) for v in load_qa_sets(data, other).values())
    if data.max_examples:
        how.append(f"at most {data.max_examples} questions per set")
    return SplitSummary(split, sizes, "; ".join(how))


def corpus_sources(data: QAData, split: str | None) -> list[QAFile]:
    """The QA files whose paragraphs make the closed corpus: `split`'s files (both splits'
    that exist when None), in a fixed order."""
    names: dict[Path, str] = {}
    for s in SPLITS if split is None else (split,):
        try:
            found = files(data, s)
        except DataError:
            if split is None:
                continue
            raise
        for name, path in found.items():
            names.setdefault(path, name)
    return [read_qa_file(data, names[p], p) for p in sorted(names)]
