"""The memory service over real HTTP (uvicorn on 127.0.0.1, the `requests` client): Mem0's
routes and payloads, provenance in history, user isolation, concurrent adds, restarts, and
4xx JSON for malformed requests. Roles are scripted; the MiniLM embedder is real."""

import threading
import time

import pytest
import requests
import uvicorn

from memjax.memory_layer import Memory, ScriptedAnswer, ScriptedFacts, ScriptedManager
from memjax.serving.memory_server import ServerSettings, make_app


class RunningServer:
    """A uvicorn server in a thread on a free port; `stop()` shuts it down."""

    def __init__(self, memory: Memory, max_body_bytes: int = 1 << 20):
        app = make_app(memory, ServerSettings(port=0, max_body_bytes=max_body_bytes))
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:  # startup, not a timing assumption: it either starts
            if not self.thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def stop(self):
        self.server.should_exit = True
        self.thread.join()


def scripted_memory(root, embedder) -> Memory:
    return Memory(
        root,
        facts=ScriptedFacts(),
        manager=ScriptedManager(),
        answer=ScriptedAnswer(),
        embedder=embedder,
    )


@pytest.fixture
def service(tmp_path, minilm):
    server = RunningServer(scripted_memory(tmp_path, minilm))
    yield server
    server.stop()


def add(url, user, text, **extra):
    body = {"messages": [{"role": "user", "content": text}], "user_id": user, **extra}
    r = requests.post(f"{url}/memories", json=body)
    assert r.status_code == 200, r.text
    return r.json()["results"]


def test_add_search_update_history_delete(service):
    url = service.url
    added = add(url, "alice", "I live in Paris. I have a dog named Rex.", metadata={"src": "chat"})
    assert [(r["event"], r["memory"]) for r in added] == [
        ("ADD", "I live in Paris"),
        ("ADD", "I have a dog named Rex"),
    ]
    home = added[0]["id"]
    hits = requests.post(
        f"{url}/search", json={"query": "Where does she live?", "user_id": "alice"}
    )
    assert hits.json()["results"][0]["id"] == home
    assert hits.json()["results"][0]["metadata"] == {"src": "chat"}

    # A new fact about the same thing updates the memory rather than adding one.
    updated = add(url, "alice", "I live in Berlin.")
    assert updated == [
        {
            "id": home,
            "memory": "I live in Berlin",
            "event": "UPDATE",
            "previous_memory": "I live in Paris",
        }
    ]
    assert requests.get(f"{url}/memories/{home}").json()["memory"] == "I live in Berlin"
    assert len(requests.get(f"{url}/memories", params={"user_id": "alice"}).json()["results"]) == 2

    history = requests.get(f"{url}/memories/{home}/history").json()
    assert [(h["event"], h["old_memory"], h["new_memory"]) for h in history] == [
        ("ADD", None, "I live in Paris"),
        ("UPDATE", "I live in Paris", "I live in Berlin"),
    ]
    # Provenance: each operation names the add it came from and the manager's raw output.
    first, second = history
    assert first["provenance"]["source"].startswith("add:")
    assert second["provenance"]["source"].startswith("add:")
    assert first["provenance"]["source"] != second["provenance"]["source"]
    assert '"UPDATE"' in second["provenance"]["model_output"]

    r = requests.put(f"{url}/memories/{home}", json={"text": "Lives in Munich"})
    assert r.status_code == 200 and "message" in r.json()
    assert requests.delete(f"{url}/memories/{home}").status_code == 200
    assert requests.get(f"{url}/memories/{home}").status_code == 404
    events = [h["event"] for h in requests.get(f"{url}/memories/{home}/history").json()]
    assert events == ["ADD", "UPDATE", "UPDATE", "DELETE"]
    left = requests.get(f"{url}/memories", params={"user_id": "alice"}).json()["results"]
    assert [m["memory"] for m in left] == ["I have a dog named Rex"]


def test_infer_false_stores_each_message(service):
    body = {
        "messages": [
            {"role": "user", "content": "Remember: gate code 4417."},
            {"role": "assistant", "content": "Noted."},
        ],
        "user_id": "carol",
        "infer": False,
    }
    results = requests.post(f"{service.url}/memories", json=body).json()["results"]
    assert [(r["event"], r["memory"]) for r in results] == [
        ("ADD", "Remember: gate code 4417."),
        ("ADD", "Noted."),
    ]


def test_two_users_are_isolated(service):
    url = service.url
    alice = add(url, "alice", "I work as a nurse in Boston.")[0]["id"]
    bob = add(url, "bob", "I work as a pilot in Denver.")[0]["id"]
    bobs = requests.get(f"{url}/memories", params={"user_id": "bob"}).json()["results"]
    assert [m["id"] for m in bobs] == [bob]
    found = requests.post(f"{url}/search", json={"query": "nurse in Boston", "user_id": "bob"})
    assert [m["id"] for m in found.json()["results"]] == [bob]
    # Bob's add about the same thing updates his memory, never Alice's.
    assert add(url, "bob", "I work as a pilot in Seattle.")[0]["id"] == bob
    # Naming the user scopes the id routes: Alice's memory is not Bob's to read or change.
    scoped = {"user_id": "bob"}
    assert requests.get(f"{url}/memories/{alice}", params=scoped).status_code == 404
    assert (
        requests.put(f"{url}/memories/{alice}", params=scoped, json={"text": "x"}).status_code
        == 404
    )
    assert requests.delete(f"{url}/memories/{alice}", params=scoped).status_code == 404
    assert requests.get(f"{url}/memories/{alice}/history", params=scoped).status_code == 404
    assert requests.delete(f"{url}/memories", params=scoped).status_code == 200
    assert requests.get(f"{url}/memories/{alice}").json()["memory"] == "I work as a nurse in Boston"
    assert requests.get(f"{url}/memories", params=scoped).json()["results"] == []


def test_eight_concurrent_adds_for_one_user_lose_nothing(tmp_path, minilm):
    server = RunningServer(scripted_memory(tmp_path, minilm))
    texts = [f"My favourite number is {n} and my lucky colour is shade {n}." for n in range(8)]
    barrier = threading.Barrier(len(texts))
    statuses = []

    def send(text):
        barrier.wait()
        body = {"messages": [{"role": "user", "content": text}], "user_id": "dana", "infer": False}
        statuses.append(requests.post(f"{server.url}/memories", json=body).status_code)

    threads = [threading.Thread(target=send, args=(t,)) for t in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    server.stop()
    assert statuses == [200] * 8
    # What was saved, read back by a fresh process's Memory: every add is there.
    reloaded = scripted_memory(tmp_path, minilm)
    kept = reloaded.get_all("dana")["results"]
    assert sorted(m["memory"] for m in kept) == sorted(texts)
    user = reloaded._users["dana"]
    assert [r.op.kind for r in user.bank.log] == ["ADD"] * 8


def test_bank_survives_a_server_restart(tmp_path, minilm):
    first = RunningServer(scripted_memory(tmp_path, minilm))
    memory_id = add(first.url, "erin", "I adopted a cat named Miso.")[0]["id"]
    add(first.url, "erin", "I adopted a cat named Tofu.")
    first.stop()

    second = RunningServer(scripted_memory(tmp_path, minilm))
    try:
        got = requests.get(f"{second.url}/memories/{memory_id}").json()
        assert got["memory"] == "I adopted a cat named Tofu" and got["user_id"] == "erin"
        events = [
            h["event"] for h in requests.get(f"{second.url}/memories/{memory_id}/history").json()
        ]
        assert events == ["ADD", "UPDATE"]
        hits = requests.post(f"{second.url}/search", json={"query": "cat", "user_id": "erin"})
        assert hits.json()["results"][0]["id"] == memory_id
        assert requests.post(f"{second.url}/reset").status_code == 200
        assert requests.get(f"{second.url}/memories/{memory_id}").status_code == 404
    finally:
        second.stop()
    assert scripted_memory(tmp_path, minilm).get_all("erin")["results"] == []


MALFORMED = [
    ("post", "/memories", b"{not json", 422),
    ("post", "/memories", b"[]", 422),
    ("post", "/memories", {"user_id": "u"}, 422),
    ("post", "/memories", {"messages": "hi", "user_id": "u"}, 422),
    ("post", "/memories", {"messages": [], "user_id": "u"}, 422),
    ("post", "/memories", {"messages": [{"role": "robot", "content": "x"}], "user_id": "u"}, 422),
    ("post", "/memories", {"messages": [{"role": "user", "content": ""}], "user_id": "u"}, 422),
    ("post", "/memories", {"messages": [{"role": "user", "content": "x"}]}, 400),
    ("post", "/memories", {"messages": [{"role": "user", "content": "x"}], "agent_id": "a"}, 400),
    ("post", "/memories", {"messages": [{"role": "user", "content": "x"}], "user_id": "  "}, 400),
    (
        "post",
        "/memories",
        {"messages": [{"role": "user", "content": "x"}], "user_id": "u", "metadata": [1]},
        422,
    ),
    (
        "post",
        "/memories",
        {"messages": [{"role": "user", "content": "x"}], "user_id": "u", "infer": 7},
        422,
    ),
    (
        "post",
        "/memories",
        {"messages": [{"role": "user", "content": "x" * 20_000}], "user_id": "u"},
        422,
    ),
    ("post", "/memories", b'{"messages": "' + b"x" * 70_000 + b'"}', 413),
    ("post", "/search", {"user_id": "u"}, 422),
    ("post", "/search", {"query": "x", "user_id": "u", "top_k": 0}, 400),
    ("post", "/search", {"query": "", "user_id": "u"}, 400),
    ("post", "/search", {"query": "x"}, 400),
    ("get", "/memories", None, 400),
    ("delete", "/memories", None, 400),
    ("get", "/memories/no-such-id", None, 404),
    ("get", "/memories/no-such-id/history", None, 404),
    ("put", "/memories/no-such-id", {"text": "x"}, 404),
    ("put", "/memories/no-such-id", {"colour": "x"}, 422),
    ("delete", "/memories/no-such-id", None, 404),
    ("get", "/no/such/route", None, 404),
    ("patch", "/memories", None, 405),
]


def test_malformed_requests_get_4xx_json(tmp_path, minilm):
    server = RunningServer(scripted_memory(tmp_path, minilm), max_body_bytes=65_536)
    try:
        for method, path, body, status in MALFORMED:
            kwargs = {"data": body} if isinstance(body, bytes) else {"json": body}
            if isinstance(body, bytes):
                kwargs["headers"] = {"Content-Type": "application/json"}
            r = getattr(requests, method)(server.url + path, **kwargs)
            assert r.status_code == status, (method, path, str(body)[:60], r.status_code, r.text)
            assert "detail" in r.json(), (method, path)
        # A known memory with a PUT that has no text: 400, and the memory unchanged.
        memory_id = add(server.url, "u", "I live in Oslo now.")[0]["id"]
        r = requests.put(f"{server.url}/memories/{memory_id}", json={})
        assert r.status_code == 400 and "text" in r.json()["detail"]
        assert (
            requests.get(f"{server.url}/memories/{memory_id}").json()["memory"]
            == "I live in Oslo now"
        )
        assert requests.get(f"{server.url}/health").json() == {"status": "ok"}
    finally:
        server.stop()
