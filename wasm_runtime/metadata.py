"""Read a module's metadata without running it: the ``symwasm.metadata`` custom section of a
``.wasm`` file (parsed directly), or ``sw_metadata()`` of a native library."""
from __future__ import annotations

import io
import json
from pathlib import Path

from ._abi import SHARED_DIM_MARK

WASM_MAGIC = b"\0asm"
SECTION = "symwasm.metadata"
VARIANT_SECTION = "symwasm.variant"  # "baseline" or "relaxed-simd": which of a model's files a .wasm is


def _leb(f) -> int:
    """An unsigned LEB128 number read from a file."""
    result = shift = 0
    while True:
        byte = f.read(1)
        if not byte:
            raise ValueError("the file is truncated")
        result |= (byte[0] & 0x7F) << shift
        shift += 7
        if not byte[0] & 0x80:
            return result


def wasm_custom_sections(path: str | Path) -> dict[str, bytes]:
    """The custom sections of a .wasm file by name, wherever they are (symwasm's lead the file;
    an older symwasm put them at its end). Only their bytes are read: the others (code, and a
    model's weights in its data section) are skipped."""
    with open(path, "rb") as f:
        if f.read(4) != WASM_MAGIC:
            raise ValueError("not a WebAssembly module")
        f.seek(8)
        out = {}
        while sid := f.read(1):
            size = _leb(f)
            if sid[0] != 0:
                f.seek(size, 1)
                continue
            body = f.read(size)
            if len(body) != size:
                raise ValueError("the file is truncated")
            with io.BytesIO(body) as b:
                name = b.read(_leb(b))
                out[name.decode()] = b.read()
        return out


def is_wasm(path: str | Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == WASM_MAGIC


def wasm_info(path: str | Path) -> tuple[dict, str]:
    """A .wasm file's metadata, and which of its model's files it is: "baseline" or
    "relaxed-simd" (files from before variants existed are the baseline)."""
    sections = wasm_custom_sections(path)
    if SECTION not in sections:
        raise ValueError("a WebAssembly module without symwasm metadata")
    return json.loads(sections[SECTION]), sections.get(VARIANT_SECTION, b"baseline").decode(errors="replace")


def wasm_metadata(path: str | Path) -> dict:
    return wasm_info(path)[0]


SYMBOL_KINDS = {"input": "bound from input shapes", "data": "computed at run time from tensor values"}
def declared_dim(symbol: str) -> str:
    """The name the model gave the dim a symbol stands for (``N`` for ``N@y``)."""
    return symbol.partition(SHARED_DIM_MARK)[0]


def shape_text(shape) -> str:
    """A symbolic shape as inspect and the hosts print it: ``(n, 4)``, ``(3,)``, ``()``."""
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def read_metadata(path: str | Path) -> dict:
    """The metadata JSON of a compiled module (either target), also of a native library for
    a CPU this machine is not (its metadata says which: inspect shows it)."""
    if is_wasm(path):
        return wasm_metadata(path)
    from .native_host import NativeBackend

    return NativeBackend(Path(path), check_cpu=False).metadata()
