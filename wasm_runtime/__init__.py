"""Run symwasm modules: ``load(path)`` a ``.wasm`` (under wasmtime) or a native library
(through ctypes); both give the same :class:`Model` API. Needs only numpy and wasmtime."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

import numpy as np

from .metadata import is_wasm, read_metadata, wasm_metadata

__all__ = ["load", "Model", "ModelError", "TensorInfo", "read_metadata"]

DTYPES = {"float32": np.float32, "int32": np.int32, "int64": np.int64, "bool": np.bool_}
DTYPE_CODES = {"float32": 1, "int32": 6, "int64": 7, "bool": 9}
CODE_DTYPES = {v: k for k, v in DTYPE_CODES.items()}
STATUS_NAMES = {1: "invalid input", 2: "out of range", 3: "out of memory",
                4: "invalid program", 5: "internal error"}
MAX_RANK = 8


class ModelError(RuntimeError):
    """A failed run or load. ``status`` is the module's status code; the message is the
    module's own, naming the input, op and dim."""

    def __init__(self, message: str, status: int = 5):
        super().__init__(message)
        self.status = status


class TensorInfo:
    """An input or output: name, numpy dtype and symbolic shape (ints and symbol names)."""

    def __init__(self, d: dict):
        self.name: str = d["name"]
        self.dtype = np.dtype(DTYPES[d["dtype"]])
        self.shape: tuple = tuple(d["shape"])

    def __repr__(self) -> str:
        return f"TensorInfo({self.name!r}, {self.dtype}, {self.shape})"


class Model:
    """A loaded module. ``run`` takes a dict of arrays and returns a dict of arrays."""

    def __init__(self, backend, metadata: dict, path: Path):
        self._b = backend
        self.metadata = metadata
        self.path = path
        self.target = metadata.get("target")
        self.inputs = [TensorInfo(d) for d in metadata["inputs"]]
        self.outputs = [TensorInfo(d) for d in metadata["outputs"]]
        self._check(self._b.call("sw_init"))
        self._shape_buffer = self._b.call("sw_shape_buffer")
        self._buffers: dict[int, tuple[int, int]] = {}  # input -> (address, capacity)
        self._ptr_size = 4 if self.target == "wasm32" else 8

    def __repr__(self) -> str:
        return f"<symwasm.Model {self.path.name} ({self.target}) inputs={self.inputs} outputs={self.outputs}>"

    def set_memory_limit(self, nbytes: int) -> None:
        self._b.call("sw_set_memory_limit", int(nbytes))

    def _check(self, status: int) -> None:
        if status != 0:
            msg = self._b.last_error() or STATUS_NAMES.get(status, f"status {status}")
            raise ModelError(msg, status)

    def run(self, feeds: Mapping[str, "np.ndarray"]) -> dict[str, np.ndarray]:
        names = [i.name for i in self.inputs]
        unknown = set(feeds) - set(names)
        if unknown:
            raise ModelError(f"unknown input(s) {', '.join(sorted(unknown))}; the model takes "
                             f"{', '.join(names)}", 1)
        for index, info in enumerate(self.inputs):
            if info.name not in feeds:
                raise ModelError(f"input '{info.name}' is missing", 1)
            arr = np.asarray(feeds[info.name])
            code = DTYPE_CODES.get(arr.dtype.name)
            if code is None:
                raise ModelError(f"input '{info.name}': dtype {arr.dtype} is not supported "
                                 f"(expected {info.dtype})", 1)
            if arr.ndim > MAX_RANK:
                raise ModelError(f"input '{info.name}': rank {arr.ndim} exceeds {MAX_RANK}", 1)
            if arr.dtype.byteorder == ">":  # the module reads little-endian
                arr = arr.astype(arr.dtype.newbyteorder("<"))
            if not arr.flags.c_contiguous:  # (np.ascontiguousarray would make 0-d arrays 1-d)
                arr = arr.copy(order="C")
            ptr = self._input_buffer(index, arr.nbytes)
            self._b.write(ptr, arr.tobytes())
            self._b.write(self._shape_buffer, np.array(list(arr.shape) + [0] * (MAX_RANK - arr.ndim),
                                                       dtype="<i8").tobytes())
            self._check(self._b.call("sw_set_input", index, code, arr.ndim))
        self._check(self._b.call("sw_run"))
        return {info.name: self._output(i) for i, info in enumerate(self.outputs)}

    def _input_buffer(self, index: int, nbytes: int) -> int:
        """The module's buffer for an input; asked for again only when it must grow."""
        ptr, capacity = self._buffers.get(index, (0, -1))
        if nbytes > capacity:
            ptr = self._b.call("sw_input_buffer", index, nbytes)
            if not ptr:
                self._buffers.pop(index, None)
                self._check(3)
            self._buffers[index] = (ptr, nbytes)
        return ptr

    def _output(self, i: int) -> np.ndarray:
        ptr = self._b.call("sw_output_tensor", i)
        if not ptr:
            raise ModelError(f"output '{self.outputs[i].name}' was not produced (a symwasm bug)", 5)
        desc = self._b.read(ptr, 16 + 8 * MAX_RANK)
        ptr = int.from_bytes(desc[:self._ptr_size], "little")
        code, rank = np.frombuffer(desc[self._ptr_size:self._ptr_size + 8], dtype="<i4")
        shape = tuple(int(d) for d in np.frombuffer(desc[16:16 + 8 * rank], dtype="<i8"))
        dtype = np.dtype(DTYPES[CODE_DTYPES[int(code)]])
        raw = self._b.read(ptr, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def load(path: str | os.PathLike) -> Model:
    """Load a compiled model: ``.wasm`` runs under wasmtime, anything else is a native
    library loaded with ctypes."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such model: {p}")
    if is_wasm(p):
        from .wasm_host import WasmBackend

        return Model(WasmBackend(p), wasm_metadata(p), p)
    from .native_host import NativeBackend

    backend = NativeBackend(p)
    return Model(backend, backend.metadata(), p)
