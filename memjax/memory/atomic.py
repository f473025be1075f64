"""Crash-safe directory snapshots: a reader always finds the last complete save.

Layout of a save root:

    root/LATEST                 one line: the name of the current snapshot directory
    root/snapshot-000007/       a complete snapshot (never modified after it is published)

`atomic_save(root, write)` lets `write(tmp)` fill a fresh temporary directory beside the
snapshots, fsyncs every file and the directory, renames it to the next `snapshot-N`, and only
then replaces LATEST (write LATEST.tmp, fsync, os.replace, fsync root). A crash at any moment
leaves LATEST naming either the previous snapshot or the new one, both complete. Older
snapshots and leftovers of interrupted saves are removed after the switch.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

from memjax import workdir

LATEST = "LATEST"
_SNAPSHOT = re.compile(r"^snapshot-(\d{6,})$")


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(path: Path) -> None:
    for file in sorted(path.rglob("*")):
        if file.is_file():
            with open(file, "rb") as f:
                os.fsync(f.fileno())
    for d in sorted({p.parent for p in path.rglob("*")} | {path}, key=lambda p: -len(p.parts)):
        fsync_dir(d)


def _snapshots(root: Path) -> list[tuple[int, Path]]:
    out = []
    for p in root.iterdir() if root.is_dir() else []:
        m = _SNAPSHOT.match(p.name)
        if m and p.is_dir():
            out.append((int(m.group(1)), p))
    return sorted(out)


def latest_snapshot(root: str | Path) -> Path:
    """The directory LATEST names; a clear error when there is no complete save."""
    root = Path(root)
    pointer = root / LATEST
    if not pointer.is_file():
        raise FileNotFoundError(f"{root}: no saved snapshot ({LATEST} is missing)")
    name = pointer.read_bytes().decode("utf-8", "replace").strip()  # garbage: no such name
    snapshot = root / name
    if not _SNAPSHOT.match(name) or not snapshot.is_dir():
        raise FileNotFoundError(f"{pointer} names {name!r}, which is not a snapshot directory")
    return snapshot


def atomic_save(root: str | Path, write: Callable[[Path], None]) -> Path:
    """Publishes a new snapshot filled by `write(tmp_dir)`; returns its directory."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp-{uuid.uuid4().hex}"
    tmp.mkdir()
    try:
        write(tmp)
        fsync_tree(tmp)
        existing = _snapshots(root)
        number = existing[-1][0] + 1 if existing else 1
        final = root / f"snapshot-{number:06d}"
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_dir(root)
    pointer_tmp = root / f"{LATEST}.tmp"
    with open(pointer_tmp, "w") as f:
        f.write(final.name + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(pointer_tmp, root / LATEST)
    fsync_dir(root)
    _clean(root, keep=final)
    return final


def _clean(root: Path, keep: Path) -> None:
    for _, p in _snapshots(root):
        if p != keep:
            shutil.rmtree(p, ignore_errors=True)
    for p in root.glob(".tmp-*"):
        shutil.rmtree(p, ignore_errors=True)


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Writes a small text file so a reader sees the old content or the new, never half (a
    local file or one in a bucket: see memjax.workdir)."""
    workdir.write_text(path, text)
    return path if workdir.is_remote(path) else Path(path)
