"""How to run zig (the ziglang package's: clang, lld and wasm-ld on the LLVM of llvmlite's
generation). Every compile runs it at least twice (the weights' object, the link), so the
binary the package ships is run directly: ``python -m ziglang`` starts an interpreter only to
exec that binary, 50 ms of a small model's 130 ms link. Where the package has no binary of
that name (another layout), the module is run as before."""
from __future__ import annotations

import functools
import importlib.util
import os
import sys
from pathlib import Path


@functools.cache
def command() -> tuple[str, ...]:
    """The argv prefix that runs zig: ``(path of the binary,)``, else ``(python, -m, ziglang)``."""
    spec = importlib.util.find_spec("ziglang")
    for where in (spec.submodule_search_locations or []) if spec else []:
        exe = Path(where) / ("zig.exe" if os.name == "nt" else "zig")
        if exe.is_file() and os.access(exe, os.X_OK):
            return (str(exe),)
    return (sys.executable, "-m", "ziglang")
