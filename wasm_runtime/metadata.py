"""Read a module's metadata without running it: the ``symwasm.metadata`` custom section of a
``.wasm`` file (parsed directly), or ``sw_metadata()`` of a native library."""
from __future__ import annotations

import ctypes
import json
from pathlib import Path

WASM_MAGIC = b"\0asm"
SECTION = "symwasm.metadata"


def _leb(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def wasm_custom_sections(data: bytes) -> dict[str, bytes]:
    if data[:4] != WASM_MAGIC:
        raise ValueError("not a WebAssembly module")
    out = {}
    pos = 8
    while pos < len(data):
        sid = data[pos]
        size, pos = _leb(data, pos + 1)
        end = pos + size
        if sid == 0:
            n, p = _leb(data, pos)
            out[data[p:p + n].decode()] = data[p + n:end]
        pos = end
    return out


def read_metadata(path: str | Path) -> dict:
    """The metadata JSON of a compiled module (either target)."""
    p = Path(path)
    with open(p, "rb") as f:
        head = f.read(4)
    if head == WASM_MAGIC:
        sections = wasm_custom_sections(p.read_bytes())
        if SECTION not in sections:
            raise ValueError(f"{p}: a WebAssembly module without symwasm metadata")
        return json.loads(sections[SECTION])
    lib = ctypes.CDLL(str(p.resolve()))
    lib.sw_metadata.restype = ctypes.c_void_p
    lib.sw_metadata_len.restype = ctypes.c_int32
    return json.loads(ctypes.string_at(lib.sw_metadata(), lib.sw_metadata_len()))
