"""An HTTP client for the retrieval server (`retriever.serve`), as a memjax.agents Retriever.

    retriever = RetrievalClient("http://127.0.0.1:8000")
    retriever.search(["who wrote Hamlet?"], k=3)   # [[{"id", "contents", "score"}, ...]]

It speaks Search-R1's POST /retrieve, so it also works against Search-R1's own server.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request


class RetrievalError(RuntimeError):
    pass


class RetrievalClient:
    def __init__(self, url: str = "http://127.0.0.1:8000", timeout: float = 30.0):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def search(self, queries: list[str], k: int) -> list[list[dict]]:
        if not queries:
            return []
        body = {"queries": list(queries), "topk": int(k), "return_scores": True}
        result = post_json(self.url + "/retrieve", body, self.timeout)["result"]
        return [
            [
                {
                    "id": str(h["document"]["id"]),
                    "contents": h["document"]["contents"],
                    "score": float(h["score"]),
                }
                for h in row
            ]
            for row in result
        ]


def post_json(url: str, body, timeout: float = 30.0):
    """POSTs `body` as JSON and returns the decoded answer; HTTP errors carry the server's
    message."""
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as e:
        detail = e.read().decode(errors="replace")
        raise RetrievalError(f"{url}: HTTP {e.code}: {detail}") from None
