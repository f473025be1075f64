"""Reading and writing safetensors files with numpy memory maps.

memjax reads the format itself (an 8-byte header length, a JSON header, raw little-endian data)
so that every tensor keeps its own dtype (bf16 included, through ml_dtypes), files are memory
mapped rather than read whole, and a sharded checkpoint is read one tensor at a time.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator, Mapping
from pathlib import Path

import ml_dtypes
import numpy as np

from memjax.model_errors import WeightsError, WeightsNotFoundError

_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": ml_dtypes.bfloat16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}


class SafetensorsError(WeightsError):
    pass


class SafetensorsFile:
    """Lazy access to the tensors of one .safetensors file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            with open(self.path, "rb") as f:
                (header_len,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(header_len))
        except (OSError, struct.error, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise SafetensorsError(f"{self.path}: not a readable safetensors file ({e})") from None
        self.metadata = header.pop("__metadata__", {})
        self._header = header
        self._data_start = 8 + header_len
        self._mmap = None

    def keys(self) -> list[str]:
        return list(self._header)

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._header[name]["shape"])

    def get(self, name: str) -> np.ndarray:
        if name not in self._header:
            raise KeyError(name)
        if self._mmap is None:
            self._mmap = np.memmap(self.path, dtype=np.uint8, mode="r")
        info = self._header[name]
        if info["dtype"] not in _DTYPES:
            raise SafetensorsError(
                f"{self.path}: tensor {name} has unsupported dtype {info['dtype']}"
            )
        start, end = info["data_offsets"]
        raw = self._mmap[self._data_start + start : self._data_start + end]
        return raw.view(_DTYPES[info["dtype"]]).reshape(info["shape"])


class SafetensorsCheckpoint:
    """All tensors of an HF checkpoint directory: one model.safetensors, or several shards listed
    in model.safetensors.index.json."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise WeightsNotFoundError(f"checkpoint directory {self.directory} does not exist")
        index = self.directory / "model.safetensors.index.json"
        single = self.directory / "model.safetensors"
        self._where: dict[str, Path] = {}
        if index.is_file():
            try:
                weight_map = json.loads(index.read_text())["weight_map"]
            except (json.JSONDecodeError, KeyError) as e:
                raise SafetensorsError(f"{index}: malformed index ({e})") from None
            for name, file in weight_map.items():
                self._where[name] = self.directory / file
            missing = {p for p in self._where.values() if not p.is_file()}
            if missing:
                raise WeightsNotFoundError(
                    f"{index} lists missing shard files {sorted(map(str, missing))}"
                )
        elif single.is_file():
            for name in SafetensorsFile(single).keys():
                self._where[name] = single
        else:
            raise WeightsNotFoundError(
                f"no model.safetensors or model.safetensors.index.json in {self.directory}"
            )
        self._open: dict[Path, SafetensorsFile] = {}

    def keys(self) -> list[str]:
        return list(self._where)

    def __contains__(self, name: str) -> bool:
        return name in self._where

    def _file(self, name: str) -> SafetensorsFile:
        path = self._where[name]
        if path not in self._open:
            self._open[path] = SafetensorsFile(path)
        return self._open[path]

    def shape(self, name: str) -> tuple[int, ...]:
        return self._file(name).shape(name)

    def get(self, name: str) -> np.ndarray:
        if name not in self._where:
            raise KeyError(f"tensor {name!r} is missing from checkpoint {self.directory}")
        return self._file(name).get(name)


def write_safetensors(
    path: str | Path, tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str] | None = None
) -> None:
    """Writes one .safetensors file atomically (a temporary file renamed into place)."""
    path = Path(path)
    header: dict = {"__metadata__": dict(metadata or {"format": "pt"})}
    offset = 0
    arrays = {}
    for name, array in tensors.items():
        array = np.ascontiguousarray(array)
        if array.dtype not in _NAMES:
            raise SafetensorsError(f"tensor {name}: dtype {array.dtype} cannot be written")
        header[name] = {
            "dtype": _NAMES[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + array.nbytes],
        }
        offset += array.nbytes
        arrays[name] = array
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # the data section starts 8-byte aligned
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for array in arrays.values():
            f.write(array.tobytes())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def iter_tensors(directory: str | Path) -> Iterator[tuple[str, np.ndarray]]:
    ckpt = SafetensorsCheckpoint(directory)
    for name in ckpt.keys():
        yield name, ckpt.get(name)
