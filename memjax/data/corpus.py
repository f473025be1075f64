"""Retrieval corpora in the FlashRAG / wiki-18 layout: `{"id": str, "contents": "\"Title\"\ntext"}`.

Pooling the paragraphs of a HotpotQA file gives a closed corpus. Paragraphs are deduplicated on
(title, text), and ids are their first-seen positions ("0", "1", ...) as in wiki-18, so building
twice from the same file gives the same ids.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from memjax.data.hotpotqa import HotpotExample
from memjax.data.jsonl_io import DataFormatError, read_jsonl, require, write_jsonl


@dataclass(frozen=True)
class Document:
    id: str
    contents: str

    @property
    def title(self) -> str:
        return split_contents(self.contents)[0]

    @property
    def text(self) -> str:
        return split_contents(self.contents)[1]

    def to_row(self) -> dict:
        return {"id": self.id, "contents": self.contents}


def format_contents(title: str, text: str) -> str:
    return f'"{title}"\n{text}'


def split_contents(contents: str) -> tuple[str, str]:
    """(title, text) from `"Title"\\ntext`; a contents without a title line gives ("", contents)."""
    first, sep, rest = contents.partition("\n")
    if sep and len(first) >= 2 and first.startswith('"') and first.endswith('"'):
        return first[1:-1], rest
    return "", contents


def build_corpus(paragraphs: Iterable[tuple[str, str]]) -> list[Document]:
    """Deduplicates (title, text) pairs in first-seen order and numbers them."""
    seen: dict[tuple[str, str], None] = {}
    for title, text in paragraphs:
        seen.setdefault((title, text.strip()), None)
    return [
        Document(id=str(i), contents=format_contents(title, text))
        for i, (title, text) in enumerate(seen)
    ]


def hotpot_paragraphs(examples: Iterable[HotpotExample]) -> Iterable[tuple[str, str]]:
    for example in examples:
        for paragraph in example.paragraphs:
            yield paragraph.title, paragraph.text


def write_corpus(path: str | Path, documents: Iterable[Document]) -> int:
    return write_jsonl(path, (d.to_row() for d in documents))


def read_corpus(path: str | Path) -> list[Document]:
    path = Path(path)
    documents = []
    for line_no, obj in read_jsonl(path):
        where = f"{path}:{line_no}"
        doc_id = require(obj, "id", (str, int), where)
        contents = require(obj, "contents", str, where)
        documents.append(Document(id=str(doc_id), contents=contents))
    seen: set[str] = set()
    for doc in documents:
        if doc.id in seen:
            raise DataFormatError(f"{path}: duplicate document id {doc.id!r}")
        seen.add(doc.id)
    return documents
