"""Small worlds for the teacher tests: synthetic conversations over a bag-of-words embedder,
and a hand-written three-question HotpotQA file with its pooled paragraphs as the corpus."""

import json

from memjax.agents.memsearcher.episode import MemSearcherSettings
from memjax.agents.search_r1 import SearchR1Settings
from memjax.agents.search_tool import SearchSettings
from memjax.data.corpus import build_corpus, hotpot_paragraphs
from memjax.data.hotpotqa import load_hotpotqa
from memjax.experiments.teachers.memory_world import MemoryWorld, synthetic_source
from memjax.experiments.teachers.search_world import SearchWorld
from memjax.memory.corpus import Retriever
from memjax.memory.index import ExactIndex
from tests.agents.memory_r1.helpers import BagOfWords


def memory_world(seed=7, conversations=3):
    world = MemoryWorld(BagOfWords())
    source = synthetic_source(seed, conversations, 4)
    return world, source, list(world.conversations(source).values())


def _row(qid, question, answer, support, paragraphs):
    return {
        "id": qid, "question": question, "answer": answer, "type": "bridge", "level": "hard",
        "supporting_facts": {"title": [t for t, _ in support], "sent_id": [i for _, i in support]},
        "context": {"title": [t for t, _ in paragraphs], "sentences": [s for _, s in paragraphs]},
    }  # fmt: skip


HOTPOT_ROWS = [
    _row("q1", "Which city is the birthplace of the author of Moon Harbor", "Lisbon",
         [("Moon Harbor", 0), ("Ana Sousa", 1)],
         [("Moon Harbor", ["Moon Harbor is a novel by Ana Sousa.", " It won a prize."]),
          ("Ana Sousa", ["Ana Sousa is a writer.", " Ana Sousa was born in Lisbon."]),
          ("River Glass", ["River Glass is a film about glass."])]),
    _row("q2", "Who was born earlier, Karl Brenner or Otto Vail?", "Karl Brenner",
         [("Karl Brenner", 0), ("Otto Vail", 0)],
         [("Karl Brenner", ["Karl Brenner was born in 1901 in Graz."]),
          ("Otto Vail", ["Otto Vail was born in 1930 in Linz."]),
          ("Graz Opera", ["The Graz Opera is an opera house."])]),
    _row("q3", "What river flows through the capital of Tovania?", "Sela",
         [("Tovania", 0), ("Mirsk", 1)],
         [("Tovania", ["Tovania is a country whose capital is Mirsk."]),
          ("Mirsk", ["Mirsk is a city.", " The Sela river flows through Mirsk."]),
          ("Sela", ["Sela is a common name."])]),
]  # fmt: skip


def write_hotpot(path):
    path.write_text("".join(json.dumps(r) + "\n" for r in HOTPOT_ROWS))
    return path


def bag_of_words_retriever(examples):
    docs = build_corpus(hotpot_paragraphs(examples))
    embedder = BagOfWords()
    index = ExactIndex(embedder.dim)
    index.upsert([d.id for d in docs], embedder.encode([d.contents for d in docs]))
    return Retriever(index, {d.id: d.to_row() for d in docs}, embedder)


def search_world(tmp_path, examples=None):
    path = write_hotpot(tmp_path / "hotpot.jsonl")
    examples = examples or load_hotpotqa(path)
    retriever = bag_of_words_retriever(examples)
    # One passage per search, so each supporting paragraph takes its own search turn.
    memsearcher = MemSearcherSettings(max_turns=5, search=SearchSettings(1, 1))
    world = SearchWorld(
        examples, retriever, lambda text: len(text.split()), str(path), memsearcher,
        SearchR1Settings(max_turns=5, top_k=1),
    )  # fmt: skip
    return world, examples
