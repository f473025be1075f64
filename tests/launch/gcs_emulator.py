"""A Google Cloud Storage emulator on 127.0.0.1 (gcp-storage-emulator, in memory) and the
environment that points gcsfs and tensorstore's GCS driver at it instead of storage.googleapis.com."""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _send_generation_headers() -> None:
    """Media downloads answer with the object's `x-goog-generation`, as Cloud Storage does:
    tensorstore's OCDBT reads a manifest's generation from that header before it updates the
    manifest (a conditional write), and the emulator's download handler leaves it out."""
    from gcp_storage_emulator import server
    from gcp_storage_emulator.handlers import objects

    original = objects.download
    if getattr(original, "sends_generation", False):
        return

    def download(request, response, storage, *args, **kwargs):
        original(request, response, storage, *args, **kwargs)
        try:
            obj = storage.get_file_obj(request.params["bucket_name"], request.params["object_id"])
        except Exception:  # not found: the original answered 404
            return
        response["x-goog-generation"] = str(obj["generation"])
        response["x-goog-metageneration"] = str(obj["metageneration"])

    download.sends_generation = True
    objects.download = download  # objects.get (alt=media) calls it by name
    server.HANDLERS = tuple(
        (pattern, {m: download if h is original else h for m, h in methods.items()})
        for pattern, methods in server.HANDLERS
    )


@contextlib.contextmanager
def gcs_emulator(bucket: str) -> Iterator[dict[str, str]]:
    """Serves an empty `bucket`; yields the environment variables a client needs."""
    from gcp_storage_emulator.server import create_server

    # A missing object is an expected answer (orbax and gcsfs probe for files): not an error.
    logging.getLogger("gcp_storage_emulator").setLevel(logging.CRITICAL)
    _send_generation_headers()
    port = free_port()
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket=bucket)
    server.start()
    url = f"http://127.0.0.1:{port}"
    try:
        yield {
            "STORAGE_EMULATOR_HOST": url,  # gcsfs (and google-cloud-storage)
            "TENSORSTORE_GCS_HTTP_URL": url,  # tensorstore's gcs kvstore (orbax's arrays)
            # tensorstore asks the metadata server for credentials unless it is given a token
            "GOOGLE_AUTH_TOKEN_FOR_TESTING": "emulator",
            # gcsfs's hierarchical-namespace probe asks the storage control API (which the
            # emulator lacks) with default credentials (which the test has not), per bucket
            "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
        }
    finally:
        server.stop()
