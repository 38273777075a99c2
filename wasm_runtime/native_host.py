"""The native backend: the same ABI from a shared library through ctypes."""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import tempfile
from pathlib import Path

c_i32, c_i64, c_ptr = ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p

SIGNATURES = {
    "sw_init": (c_i32, []), "sw_num_inputs": (c_i32, []), "sw_num_outputs": (c_i32, []),
    "sw_input_buffer": (c_ptr, [c_i32, c_i64]), "sw_shape_buffer": (c_ptr, []),
    "sw_set_input": (c_i32, [c_i32, c_i32, c_i32]), "sw_run": (c_i32, []),
    "sw_output_tensor": (c_ptr, [c_i32]), "sw_output_data": (c_ptr, [c_i32]), "sw_output_dtype": (c_i32, [c_i32]),
    "sw_output_rank": (c_i32, [c_i32]), "sw_output_dim": (c_i64, [c_i32, c_i32]),
    "sw_last_error": (c_ptr, []), "sw_last_error_len": (c_i32, []),
    "sw_set_memory_limit": (None, [c_i64]), "sw_metadata": (c_ptr, []), "sw_metadata_len": (c_i32, []),
}


_LOADED: set[str] = set()


class NativeBackend:
    def __init__(self, path: Path):
        real = str(Path(path).resolve())
        if real in _LOADED:
            # dlopen returns the already loaded library for the same file, and the VM's state
            # is in its globals: a second load gets a private copy so models never share state
            fd, copy = tempfile.mkstemp(suffix=Path(real).suffix, prefix="symwasm-")
            os.close(fd)
            shutil.copyfile(real, copy)
            self.lib = ctypes.CDLL(copy)
            os.unlink(copy)  # the mapping stays valid
        else:
            _LOADED.add(real)
            self.lib = ctypes.CDLL(real)
        self.fns = {}
        for name, (res, args) in SIGNATURES.items():
            fn = getattr(self.lib, name)
            fn.restype, fn.argtypes = res, args
            self.fns[name] = fn

    def call(self, name: str, *args):
        r = self.fns[name](*args)
        return 0 if r is None and SIGNATURES[name][0] is c_ptr else r

    def write(self, ptr: int, data: bytes) -> None:
        ctypes.memmove(ptr, data, len(data))

    def read(self, ptr: int, n: int) -> bytes:
        return ctypes.string_at(ptr, n) if n else b""

    def metadata(self) -> dict:
        """Read through this library's own handle: a path may name a newer file than the
        one a process loaded before."""
        return json.loads(self.read(self.call("sw_metadata"), self.call("sw_metadata_len")))

    def last_error(self) -> str:
        return self.read(self.call("sw_last_error"), self.call("sw_last_error_len")).decode(errors="replace")
