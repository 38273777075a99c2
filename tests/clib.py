"""Call the C kernels of wasm_runtime/clib/sw_lib.h directly, natively, through ctypes.

These tests check the C functions in isolation (their contract in sw_lib.h) against
independent references (Python's str and re, Pillow); the ops built on them are tested end
to end on both targets by their op tests. ``library()`` compiles the C sources once per
session into a shared object with the VM's flags.
"""
from __future__ import annotations

import ctypes
import functools
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from toolkit import abi, zig
from toolkit.ir.dtypes import dtype_of_numpy
from toolkit.link import CLIB

CLIB_DIR = CLIB.dir  # the C libraries' sources and headers; they include sw_abi.h of the VM's
LIB_SOURCES = CLIB.sources
STRING = next(d.code for d in abi.DTYPES if d.name == "string")


_CTYPES = {"ptr": ctypes.c_void_p, "i32": ctypes.c_int32, "i64": ctypes.c_int64}


def _fields(struct: str) -> list:
    """An ABI struct's fields (toolkit.abi.STRUCTS) as ctypes lays them out natively."""
    return [(f.name, _CTYPES[f.kind] * f.count if f.count > 1 else _CTYPES[f.kind]) for f in abi.STRUCTS[struct]]


class Tensor(ctypes.Structure):
    _fields_ = _fields("sw_tensor")


class Str(ctypes.Structure):
    _fields_ = _fields("sw_str")


LIB_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.POINTER(Tensor)), ctypes.POINTER(ctypes.c_int64),
                          ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int32),
                          ctypes.POINTER(ctypes.c_int64), ctypes.c_char_p)


def compile_flags(wasm: bool) -> list[str]:
    flags = ["-O2", "-std=c11", "-Wall", "-Werror", "-fno-strict-aliasing"]
    for d in CLIB.includes():
        flags += ["-I", str(d)]
    if wasm:
        return ["-target", "wasm32-freestanding", *flags, "-ffreestanding", "-fno-builtin", "-nostdlib",
                "-mbulk-memory", "-mnontrapping-fptoint", "-msimd128"]
    return flags + ["-fPIC"]


def compile_wasm(source: str, out: Path) -> subprocess.CompletedProcess:
    """Compile one source for wasm32 (freestanding), as the module links it."""
    return subprocess.run([*zig.command(), "cc", *compile_flags(True), "-c",
                           str(CLIB_DIR / source), "-o", str(out)], capture_output=True, text=True)


@functools.lru_cache(maxsize=None)
def library(sources: tuple[str, ...] = LIB_SOURCES) -> ctypes.CDLL:
    out = Path(tempfile.mkdtemp(prefix="symwasm-clib-")) / "libsw.so"
    r = subprocess.run([*zig.command(), "cc", *compile_flags(False), "-shared",
                        *(str(CLIB_DIR / s) for s in sources), "-o", str(out)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"compiling {', '.join(sources)} failed:\n{r.stderr}")
    return ctypes.CDLL(str(out))


class Arg:
    """One tensor argument; keeps its buffers alive while the call runs."""

    def __init__(self, array: np.ndarray | None = None, *, strings=None, shape=None, dtype=None):
        self.keep: list = []
        if strings is not None:  # a string tensor from nested lists / arrays of str or bytes
            arr = np.array(strings, dtype=object)
            flat = [s.encode() if isinstance(s, str) else bytes(s) for s in arr.reshape(-1)]
            elems = (Str * max(len(flat), 1))()
            for i, b in enumerate(flat):
                buf = ctypes.create_string_buffer(b, len(b) or 1)
                self.keep.append(buf)
                elems[i].ptr, elems[i].len = ctypes.addressof(buf), len(b)
            self.keep.append(elems)
            self.t = Tensor(ctypes.addressof(elems), STRING, arr.ndim)
            shape = arr.shape
        else:
            if array is None:  # an output buffer
                code = STRING if dtype == "string" else dtype_of_numpy(dtype).code
                size = 16 if dtype == "string" else np.dtype(dtype).itemsize
                n = int(np.prod(shape, dtype=np.int64))
                raw = ctypes.create_string_buffer(max(n * size, 1))
                self.keep.append(raw)
                self.t = Tensor(ctypes.addressof(raw), code, len(shape))
                self.out_dtype = dtype
            else:
                array = np.ascontiguousarray(array)
                self.keep.append(array)
                self.t = Tensor(array.ctypes.data, dtype_of_numpy(array.dtype).code, array.ndim)
                shape = array.shape
        for i, d in enumerate(shape):
            self.t.shape[i] = d
        self.shape = tuple(int(d) for d in shape)

    def array(self) -> np.ndarray:
        """An output's contents: a numpy array, or an object array of str for strings."""
        n = int(np.prod(self.shape, dtype=np.int64))
        if self.t.dtype == STRING:
            elems = (Str * max(n, 1)).from_address(self.t.data)
            return np.array([ctypes.string_at(elems[i].ptr, elems[i].len).decode("utf-8", "surrogateescape")
                             if elems[i].len else "" for i in range(n)], dtype=object).reshape(self.shape)
        dt = np.dtype(self.out_dtype)
        return np.frombuffer(ctypes.string_at(self.t.data, n * dt.itemsize), dt).reshape(self.shape).copy()


def call(name: str, args: list[Arg], scalars=(), params=(), blob: bytes = b"", cancel: int = 0,
         lib: ctypes.CDLL | None = None) -> tuple[int, list[int], list[int]]:
    """Run ``name`` (an sw_lib.h function); returns (status, scalars after, detail)."""
    fn = LIB_FN(("sw_" + name if not name.startswith("sw_") else name, lib or library()))
    ptrs = (ctypes.POINTER(Tensor) * max(len(args), 1))(*[ctypes.pointer(a.t) for a in args])
    sc = (ctypes.c_int64 * 64)(*scalars)
    detail = (ctypes.c_int64 * 3)()
    flag = ctypes.c_int32(cancel)
    pr = (ctypes.c_int64 * max(len(params), 1))(*params)
    status = fn(ptrs, sc, detail, ctypes.pointer(flag), pr, blob)
    return status, list(sc[:8]), list(detail)
