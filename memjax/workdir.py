"""A run's directory, local or in a bucket: one path type for every file a job writes.

    python -m memjax.launch --config=configs/toy_grpo.py --workdir=gs://my-bucket/toy

A workdir is a local folder or a `gs://bucket/path` (Google Cloud Storage). Everything a run
writes there (orbax checkpoints, TensorBoard events, plots, curves, reports, exported weights) goes
through `path()`, an `etils.epath.Path`: local paths behave as `pathlib.Path`, `gs://` paths go
through fsspec's `gcsfs`, and orbax writes the arrays through tensorstore's own GCS driver.

`gs://` needs the optional `gcs` extra (`pip install 'memjax[gcs]'`); `check()` says so in one line
before anything is created (without it a `gs://` string would be a local folder named `gs:`).

Atomic writes: a local file is written beside its target, fsynced and renamed over it; a GCS
object upload is already all-or-nothing (a reader sees the old object or the new one), so a remote
file is uploaded in one request. Code that only speaks local files (a library that writes a folder
of weights) writes into `staged_dir()`, which uploads the folder when the block ends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from etils import epath

from memjax.errors import ConfigError

REMOTE_SCHEMES = ("gs://",)
GCS_EXTRA = "pip install 'memjax[gcs]'"


def is_remote(p: str | os.PathLike) -> bool:
    return str(p).startswith(REMOTE_SCHEMES)


def check(workdir: str | None, *, name: str = "--workdir") -> None:
    """Refuses, in one line, a workdir this installation cannot write (nothing is created)."""
    if not workdir or not is_remote(workdir):
        return
    bucket = str(workdir)[len("gs://") :].split("/", 1)[0]
    if not bucket:
        raise ConfigError(f"{name}={workdir}: no bucket name (write gs://BUCKET/path)")
    try:
        import gcsfs  # noqa: F401  (etils.epath's backend for gs://)
    except ImportError:
        raise ConfigError(
            f"{name}={workdir}: gs:// workdirs need gcsfs; install it: {GCS_EXTRA}"
        ) from None


def path(p: str | os.PathLike) -> epath.Path:
    """The workdir path type: `gs://...` stays a bucket path, anything else is a local path."""
    if isinstance(p, epath.Path):
        return p
    if is_remote(p):
        return epath.Path(str(p))
    return epath.Path(Path(p).absolute())


def local(p: str | os.PathLike) -> Path | None:
    """`p` as a local `pathlib.Path`, or None when it lies in a bucket."""
    return None if is_remote(p) else Path(os.fspath(p))


def write_bytes(target: str | os.PathLike, data: bytes) -> epath.Path:
    """Writes a file so a reader sees the old content or the new, never half."""
    target = path(target)
    dest = local(target)
    if dest is None:
        target.write_bytes(data)  # one object upload: all or nothing
        return target
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def write_text(target: str | os.PathLike, text: str) -> epath.Path:
    return write_bytes(target, text.encode("utf-8"))


def upload_tree(source: Path, target: str | os.PathLike) -> None:
    """Copies a local folder to `target` (a bucket prefix or a local folder), file by file."""
    target = path(target)
    for file in sorted(p for p in source.rglob("*") if p.is_file()):
        dest = target / file.relative_to(source).as_posix()
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(file.read_bytes())


def download_tree(source: str | os.PathLike, target: Path) -> None:
    """Copies a folder under `source` (bucket or local) into the local folder `target`."""
    source = path(source)
    for file in source.rglob("*"):
        if file.is_file():
            dest = target / str(file.relative_to(source))
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(file.read_bytes())


@contextlib.contextmanager
def staged_dir(target: str | os.PathLike) -> Iterator[Path]:
    """A local folder to fill that ends up at `target`: the folder itself when `target` is local;
    a temporary one, uploaded when the block ends without error, when it is in a bucket."""
    dest = local(target)
    if dest is not None:
        dest.mkdir(parents=True, exist_ok=True)
        yield dest
        return
    with tempfile.TemporaryDirectory(prefix="memjax-stage-") as tmp:
        yield Path(tmp)
        upload_tree(Path(tmp), target)


def move(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """Moves a file or folder (in a bucket: copy, then delete; GCS has no rename)."""
    src, dst = local(source), local(target)
    if src is not None and dst is not None:
        shutil.move(str(src), str(dst))
        return
    source, target = path(source), path(target)
    for file in source.rglob("*"):
        if file.is_file():
            dest = target / str(file.relative_to(source))
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(file.read_bytes())
    source.rmtree(missing_ok=True)


__all__ = [
    "check",
    "download_tree",
    "is_remote",
    "local",
    "move",
    "path",
    "staged_dir",
    "upload_tree",
    "write_bytes",
    "write_text",
]
