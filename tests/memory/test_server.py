"""The retrieval server over real HTTP on an ephemeral 127.0.0.1 port, with the packaged MiniLM
encoder and a ScaNN index built by the corpus tool."""

import json
import os
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from memjax.memory.client import RetrievalClient, RetrievalError, post_json
from memjax.memory.corpus import CorpusError, Retriever, build_corpus_index, read_corpus
from memjax.memory.embedder import Embedder
from memjax.memory.index import ScannParams
from memjax.memory.server import RetrievalService, make_server

REPO = Path(__file__).resolve().parents[2]
FACTS = [
    ("Paris", "Paris is the capital and largest city of France."),
    ("Hamlet", "Hamlet is a tragedy written by William Shakespeare around 1600."),
    ("Photosynthesis", "Plants convert sunlight, water and carbon dioxide into sugar."),
    ("Mount Everest", "Mount Everest is Earth's highest mountain above sea level."),
    ("Python", "Python is a programming language created by Guido van Rossum."),
    ("Jupiter", "Jupiter is the largest planet in the Solar System."),
    ("Bach", "Johann Sebastian Bach was a German composer of the Baroque period."),
    ("Nile", "The Nile is a major river flowing north through northeastern Africa."),
]
FILLER = [f"Filler passage number {i} about topic {i % 7} and nothing else." for i in range(32)]


def _write_corpus(path: Path) -> None:
    rows = [{"id": f"doc{i}", "contents": f'"{t}"\n{text}'} for i, (t, text) in enumerate(FACTS)]
    rows += [{"id": f"fill{i}", "contents": text} for i, text in enumerate(FILLER)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("retrieval")
    _write_corpus(tmp / "corpus.jsonl")
    embedder = Embedder.load("packaged:minilm", batch_size=16)
    build_corpus_index(
        tmp / "corpus.jsonl",
        embedder,
        tmp / "index",
        scann=ScannParams(num_leaves=4, leaves_to_search=4),
        encoder_meta={"source": "packaged:minilm"},
    )
    retriever = Retriever.load(tmp / "index", embedder)
    assert retriever.index.kind == "scann" and len(retriever) == 40
    srv = make_server(RetrievalService(retriever), "127.0.0.1", 0, max_body_bytes=4096)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    host, port = srv.server_address[:2]
    yield f"http://{host}:{port}"
    srv.shutdown()
    srv.server_close()


def _post_raw(url, data: bytes):
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_search_r1_retrieve(server):
    out = post_json(
        server + "/retrieve",
        {"queries": ["capital of France", "who wrote Hamlet?"], "topk": 2, "return_scores": True},
    )
    assert len(out["result"]) == 2 and all(len(r) == 2 for r in out["result"])
    first = out["result"][0][0]
    assert first["document"] == {"id": "doc0", "contents": '"Paris"\n' + FACTS[0][1]}
    assert out["result"][1][0]["document"]["id"] == "doc1"
    assert first["score"] >= out["result"][0][1]["score"]
    plain = post_json(server + "/retrieve", {"queries": ["highest mountain"]})
    assert len(plain["result"][0]) == 3  # Search-R1's default topk
    assert plain["result"][0][0] == {"id": "doc3", "contents": '"Mount Everest"\n' + FACTS[3][1]}


def test_memsearcher_search_and_batch_search(server):
    docs = post_json(server + "/search", {"query": "largest planet", "top_n": 3})
    assert [set(d) for d in docs] == [{"id", "contents"}] * 3 and docs[0]["id"] == "doc5"
    assert len(post_json(server + "/search", {"query": "largest planet"})) == 10  # default
    docs, scores = post_json(
        server + "/search", {"query": "Baroque composer", "top_n": 2, "return_score": True}
    )
    assert docs[0]["id"] == "doc6" and len(scores) == 2 and scores[0] >= scores[1]
    # MemSearcher forwards the model's tool arguments unchanged: extras ignored, "2" accepted
    docs = post_json(server + "/search", {"query": "river in Africa", "top_n": "2", "x": 1})
    assert [d["id"] for d in docs][:1] == ["doc7"] and len(docs) == 2
    batch = post_json(server + "/batch_search", {"query": ["Shakespeare", "Guido"], "top_n": 1})
    assert [[d["id"] for d in row] for row in batch] == [["doc1"], ["doc4"]]
    docs, scores = post_json(
        server + "/batch_search", {"query": ["sunlight"], "top_n": 2, "return_score": True}
    )
    assert docs[0][0]["id"] == "doc2" and len(scores[0]) == 2


@pytest.mark.parametrize(
    "path, body, status, message",
    [
        ("/retrieve", b"{not json", 400, "not valid JSON"),
        ("/retrieve", b"[1, 2]", 400, "JSON object"),
        ("/retrieve", b"{}", 400, 'missing field "queries"'),
        ("/retrieve", b'{"queries": "one string"}', 400, "list of strings"),
        ("/retrieve", b'{"queries": ["a"], "topk": "many"}', 400, '"topk" must be an integer'),
        ("/retrieve", b'{"queries": ["a"], "topk": 0}', 400, "between 1 and"),
        ("/retrieve", b'{"queries": ["a"], "return_scores": "maybe"}', 400, "true or false"),
        ("/search", b'{"query": ["a list"]}', 400, '"query" must be a string'),
        ("/search", b'{"query": "a", "top_n": 2.5}', 400, "integer"),
        ("/batch_search", b'{"query": [1, 2]}', 400, "list of strings"),
        ("/nowhere", b"{}", 404, "unknown path"),
        ("/search", b'{"query": "' + b"x" * 5000 + b'"}', 413, "over 4096 bytes"),
    ],
)
def test_malformed_requests_get_an_error_and_the_server_keeps_serving(
    server, path, body, status, message
):
    code, payload = _post_raw(server + path, body)
    assert code == status and message in payload["error"]
    with urllib.request.urlopen(server + "/health", timeout=10) as r:
        health = json.loads(r.read())
        assert health["status"] == "ok" and health["documents"] == 40
    assert post_json(server + "/search", {"query": "capital of France", "top_n": 1})[0]["id"] == (
        "doc0"
    )


def test_concurrent_clients_and_the_python_client(server):
    client = RetrievalClient(server)
    queries = [t for t, _ in FACTS]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda q: client.search([q], 1)[0][0]["id"], queries * 2))
    assert results == [f"doc{i}" for i in range(len(FACTS))] * 2
    passages = client.search(["Nile river"], 2)
    assert set(passages[0][0]) == {"id", "contents", "score"}
    with pytest.raises(RetrievalError, match="HTTP 400"):
        post_json(server + "/retrieve", {"queries": 3})


def test_model_output_with_a_lone_surrogate_is_searched_by_minilm(server):
    """Half of an escaped emoji in a model's search query: the real MiniLM tokenizer raises on
    it, so the server makes it valid text first and answers the whole batch."""
    out = post_json(
        server + "/batch_search", {"query": ["capital of France \ud83d", "Hamlet\x00"], "top_n": 1}
    )
    assert [row[0]["id"] for row in out] == ["doc0", "doc1"]
    with urllib.request.urlopen(server + "/health", timeout=10) as r:
        health = json.loads(r.read())
    assert health["failed_queries"] == 0 and health["repaired_queries"] >= 2


def test_corpus_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "c.jsonl"
    bad.write_text('{"id": 1, "contents": "a"}\n{"id": 2}\n')
    with pytest.raises(CorpusError, match=r"c.jsonl:2: .*contents"):
        read_corpus(bad)
    bad.write_text('{"id": 1, "contents": "a"}\n{"id": 1, "contents": "b"}\n')
    with pytest.raises(CorpusError, match="c.jsonl:2: duplicate id '1'"):
        read_corpus(bad)
    bad.write_text('{"id": 1, "contents": "a"}\nnot json\n')
    with pytest.raises(CorpusError, match="c.jsonl:2: not valid JSON"):
        read_corpus(bad)


@pytest.mark.heavy
def test_launch_jobs_build_then_serve(tmp_path):
    """`index.build` then `retriever.serve` through memjax.launch, as a user runs them."""
    _write_corpus(tmp_path / "corpus.jsonl")
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    launch = [sys.executable, "-m", "memjax.launch"]
    subprocess.run(
        launch
        + [
            "--config=configs/index_build.py",
            f"--config.corpus={tmp_path / 'corpus.jsonl'}",
            f"--config.output={tmp_path / 'index'}",
        ],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        launch
        + [
            "--config=configs/retriever_serve.py",
            f"--config.index_dir={tmp_path / 'index'}",
            f"--config.port={port}",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        while line and "serving" not in line:
            line = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}" in line
        out = post_json(f"http://127.0.0.1:{port}/retrieve", {"queries": ["capital of France"]})
        assert out["result"][0][0]["id"] == "doc0"
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
