"""Scripted MemSearcher and Search-R1 rollouts through the real retrieval server over HTTP on
127.0.0.1, with a closed corpus built by memjax.data.corpus and embedded by the packaged
MiniLM; the in-process retriever returns the same passages."""

import threading

import pytest

from memjax.agents.episode import ModelOutput, run_episodes
from memjax.agents.memsearcher import MemSearcherEpisode
from memjax.agents.retrieval import Retriever
from memjax.agents.search_r1 import SearchR1Episode
from memjax.agents.search_r1.format import STOP as SR1_STOP
from memjax.data.corpus import build_corpus, write_corpus
from tests.agents.scripted import boxed, memory, tool_call, word_count

PARAGRAPHS = [
    ("Denise Levertov", "Denise Levertov was a British-born American poet, born in 1923."),
    ("Harvey Pekar", "Harvey Pekar was an American comic book writer, born in 1939."),
    ("American Splendor", "American Splendor is a comic book series written by Harvey Pekar."),
    ("Nile", "The Nile is a major river flowing north through northeastern Africa."),
    ("Bach", "Johann Sebastian Bach was a German composer of the Baroque period."),
    ("Denise Levertov", "Denise Levertov was a British-born American poet, born in 1923."),
]
QUESTION = "Between Harvey Pekar and Denise Levertov who was born earlier?"
GOLD = ["Denise Levertov"]


@pytest.fixture(scope="module")
def retrievers(tmp_path_factory):
    from memjax.memory.client import RetrievalClient
    from memjax.memory.corpus import Retriever as IndexRetriever
    from memjax.memory.corpus import build_corpus_index
    from memjax.memory.embedder import Embedder
    from memjax.memory.server import RetrievalService, make_server

    tmp = tmp_path_factory.mktemp("closed_corpus")
    docs = build_corpus(PARAGRAPHS)
    assert len(docs) == 5  # the repeated paragraph is pooled once
    write_corpus(tmp / "corpus.jsonl", docs)
    embedder = Embedder.load("packaged:minilm", batch_size=8)
    build_corpus_index(tmp / "corpus.jsonl", embedder, tmp / "index", kind="exact")
    local = IndexRetriever.load(tmp / "index", embedder)
    srv = make_server(RetrievalService(local), "127.0.0.1", 0, max_body_bytes=1 << 16)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    host, port = srv.server_address[:2]
    yield local, RetrievalClient(f"http://{host}:{port}")
    srv.shutdown()
    srv.server_close()


def memsearcher_policy(call):
    last = call.messages[-1]["content"]
    if last.startswith("<tool_response>"):
        # Keep the previous memory and add the new facts, as the update request asks.
        previous = call.messages[1]["content"].split("<memory>")[1].split("</memory>")[0]
        born = [line for line in last.split("\n") if "born in" in line]
        return ModelOutput(memory(" ".join([previous.strip(), *born]).strip()), True)
    if "1923" in call.messages[1]["content"] and "1939" in call.messages[1]["content"]:
        return ModelOutput(boxed("Denise Levertov"), True)
    query = "Harvey Pekar birth" if "1923" in call.messages[1]["content"] else "Denise Levertov"
    return ModelOutput(tool_call(query, top_n=1), True)


def search_r1_policy(call):
    seen = call.assistant_prefix
    if "1923" in seen and "1939" in seen:
        return ModelOutput(
            "<think>1923 is earlier.</think>\n<answer> Denise Levertov </answer>", True
        )
    query = "Harvey Pekar" if "1923" in seen else "Denise Levertov poet"
    return ModelOutput(f"<think>Search.</think>\n<search> {query} </search>", False)


def test_http_and_in_process_give_the_same_passages(retrievers):
    local, remote = retrievers
    assert isinstance(remote, Retriever) and isinstance(local, Retriever)
    queries = ["Denise Levertov", "Harvey Pekar birth", "river in Africa"]
    got_local, got_remote = local.search(queries, 2), remote.search(queries, 2)
    assert [[p["id"] for p in r] for r in got_local] == [[p["id"] for p in r] for r in got_remote]
    assert [p["contents"] for p in got_remote[2]][0].startswith('"Nile"\n')


@pytest.mark.parametrize("which", [0, 1])
def test_scripted_rollouts_over_http(retrievers, which):
    retriever = retrievers[which]
    mem = MemSearcherEpisode(QUESTION, word_count)
    sr1 = SearchR1Episode(QUESTION)
    run_episodes(
        [mem, sr1],
        lambda call: (search_r1_policy if call.stop == SR1_STOP else memsearcher_policy)(call),
        retriever,
    )
    mem_result, sr1_result = mem.result(GOLD), sr1.result(GOLD)
    assert (mem_result.reward, mem_result.stop_reason, len(mem_result.contexts)) == (
        1.0,
        "answer",
        3,
    )
    assert mem.memories[-1].count("born in") == 2
    assert (sr1_result.reward, sr1_result.answer) == (1.0, "Denise Levertov")
    # Search-R1 reads 3 passages per search: both birth years may come back at once.
    assert len(sr1_result.turn_contexts) == len(sr1_result.searches) + 1 >= 2
