"""The native backend: the same ABI from a shared library through ctypes.

Every load of one file shares the library (its code and read-only program); the VM keeps
all run state in a context per Model, so instances never interfere. ctypes releases the GIL
during calls, so Models on different threads run in parallel.
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import struct
import tempfile
import threading
from pathlib import Path

import numpy as np

from ._abi import EXPORTS
from ._copy import bytes_at, copy_in, copy_out, nbytes
from .cpu import missing_features

_CTYPES = {"void": None, "i32": ctypes.c_int32, "i64": ctypes.c_int64, "ptr": ctypes.c_void_p}

_LIBS: dict[str, tuple[tuple, ctypes.CDLL]] = {}
_LIBS_LOCK = threading.Lock()


CPU_SECTION = b".symwasm.cpu"


def _library(path: Path, check_cpu: bool = True) -> ctypes.CDLL:
    """The loaded library for ``path``, shared by every load of the same file. With
    ``check_cpu``, a library whose code needs ISA extensions this machine lacks is refused
    before anything of it is loaded."""
    real = os.path.realpath(path)
    st = os.stat(real)
    with open(real, "rb") as f:
        _check_elf(f, st.st_size)
        if check_cpu:
            _check_cpu(_section(f, st.st_size, CPU_SECTION))
    stamp = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
    with _LIBS_LOCK:
        cached = _LIBS.get(real)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        if cached is None:
            lib = _dlopen(real)
        else:
            # the file was replaced (recompiled) since it was loaded, and dlopen would hand back
            # the old mapping for the same name: load the new file through a copy
            fd, copy = tempfile.mkstemp(suffix=Path(real).suffix, prefix="symwasm-")
            os.close(fd)
            shutil.copyfile(real, copy)
            try:
                lib = _dlopen(copy)
            finally:
                os.unlink(copy)  # the mapping stays valid
        _LIBS[real] = (stamp, lib)
        return lib


def _dlopen(path: str) -> ctypes.CDLL:
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        raise ValueError(f"the shared library cannot be loaded ({e})") from None


def _check_elf(f, size: int) -> None:
    """Refuse what dlopen would map past the end of the file: a truncated library loads, then
    faults (SIGBUS) on the first touch of a page the file no longer has. Reads only the
    headers."""
    head = f.read(64)
    if head[:4] != b"\x7fELF":
        raise ValueError("not a WebAssembly module nor a shared library")
    if len(head) < 64 or head[4] != 2 or head[5] != 1:
        raise ValueError("not a 64-bit little-endian shared library")
    phoff, shoff = struct.unpack_from("<QQ", head, 32)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", head, 54)
    for what, end in (("program", phoff + phentsize * phnum), ("section", shoff + shentsize * shnum)):
        if end > size:
            raise ValueError(f"the file is truncated ({size} bytes; its {what} headers end at {end})")
    if phentsize < 56:
        raise ValueError("its program headers are malformed")
    f.seek(phoff)
    table = f.read(phentsize * phnum)
    for i in range(phnum):
        p_type, = struct.unpack_from("<I", table, i * phentsize)
        p_offset, = struct.unpack_from("<Q", table, i * phentsize + 8)
        p_filesz, = struct.unpack_from("<Q", table, i * phentsize + 32)
        if p_type == 1 and p_offset + p_filesz > size:  # PT_LOAD
            raise ValueError(f"the file is truncated ({size} bytes; a loaded segment ends at "
                             f"{p_offset + p_filesz})")


def _section(f, size: int, name: bytes) -> bytes | None:
    """The contents of the section called ``name``, or None; the headers are already known
    to lie within the file (_check_elf)."""
    f.seek(0)
    head = f.read(64)
    shoff, = struct.unpack_from("<Q", head, 40)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 58)
    if shnum == 0:
        return None
    if shentsize < 64 or shstrndx >= shnum:
        raise ValueError("its section headers are malformed")
    f.seek(shoff)
    table = f.read(shentsize * shnum)

    def span(i: int) -> tuple[int, int]:
        offset, length = struct.unpack_from("<QQ", table, i * shentsize + 24)
        if offset + length > size:
            raise ValueError(f"the file is truncated ({size} bytes; a section ends at {offset + length})")
        return offset, length

    f.seek(span(shstrndx)[0])
    names = f.read(span(shstrndx)[1])
    for i in range(shnum):
        at, = struct.unpack_from("<I", table, i * shentsize)
        if names[at:at + len(name) + 1] == name + b"\0":
            offset, length = span(i)
            f.seek(offset)
            return f.read(length)
    return None


def _check_cpu(record: bytes | None) -> None:
    """Refuse a library whose CPU record names ISA extensions this machine lacks. A library
    without the record (from before it existed) is for the machine that compiled it, and a
    machine whose flags cannot be read is not checked."""
    if record is None:
        return
    try:
        cpu = json.loads(record)
        name, features = str(cpu["cpu"]), [str(f) for f in cpu["features"]]
    except (ValueError, KeyError, TypeError):
        raise ValueError("its CPU record is malformed") from None
    missing = missing_features(features)
    if missing:
        raise ValueError(f"it was compiled for CPU '{name}', and this machine's CPU lacks "
                         f"{', '.join(missing)} (recompile it for this machine: --cpu native)")


class NativeBackend:
    """One load of a shared library (its code shared with other loads of the same file).
    ``check_cpu=False`` skips the CPU check, to read the metadata of a library for another
    CPU: sw_metadata is the VM's C code, compiled for the baseline x86-64 (link.py)."""

    def __init__(self, path: Path, check_cpu: bool = True):
        self.path = path
        self.lib = _library(path, check_cpu)
        self.fns: dict[str, ctypes._CFuncPtr] = {}

    def _fn(self, name: str):
        fn = self.fns.get(name)
        if fn is None:
            res, args = EXPORTS[name]
            try:
                fn = getattr(self.lib, name)
            except AttributeError:
                raise ValueError(f"{self.path}: not a symwasm module of this format (it does not "
                                 f"export {name})") from None
            fn.restype, fn.argtypes = _CTYPES[res], [_CTYPES[a] for a in args]
            self.fns[name] = fn
        return fn

    def call(self, name: str, *args):
        r = self._fn(name)(*args)
        return 0 if r is None and EXPORTS[name][0] == "ptr" else r

    def has(self, name: str) -> bool:
        try:
            self._fn(name)
        except ValueError:
            return False
        return True

    def put(self, ptr: int, arr) -> None:
        """Copy a C-contiguous array to ``ptr``."""
        copy_in(ptr, arr)

    def copy_out(self, ptr: int, shape: tuple, dtype) -> "np.ndarray":
        """A new array of the bytes at ``ptr``."""
        return copy_out(ptr, shape, dtype, nbytes(shape, dtype))

    def write(self, ptr: int, data: bytes | bytearray) -> None:
        if data:
            bytes_at(ptr, len(data))[:] = data

    def read(self, ptr: int, n: int) -> bytes:
        return ctypes.string_at(ptr, n) if n else b""

    def instantiate(self) -> None:
        """Nothing to do natively: a new context starts with nothing allocated."""

    def limit_memory(self, vm_limit: int) -> None:
        """Nothing to do natively: the VM's own limit is the only one."""

    def cancel_flag(self, ctx: int) -> ctypes.c_int32:
        """The context's cancel flag (sw_cancel_flag), writable from any thread."""
        return ctypes.c_int32.from_address(self.call("sw_cancel_flag", ctx))

    def cstr(self, ptr: int, limit: int = 4096) -> str:
        return ctypes.string_at(ptr).decode(errors="replace")[:limit] if ptr else ""

    def metadata(self) -> dict:
        """Read through this library's own handle: a path may name a newer file than the
        one a process loaded before."""
        return json.loads(self.read(self.call("sw_metadata"), self.call("sw_metadata_len")))

    def last_error(self, ctx: int) -> str:
        return self.read(self.call("sw_last_error", ctx), self.call("sw_last_error_len", ctx)).decode(errors="replace")
