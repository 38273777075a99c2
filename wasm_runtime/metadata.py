"""Read a module's metadata without running it: the ``symwasm.metadata`` custom section of a
``.wasm`` file (parsed directly), or ``sw_metadata()`` of a native library."""
from __future__ import annotations

import json
from pathlib import Path

WASM_MAGIC = b"\0asm"
SECTION = "symwasm.metadata"
VARIANT_SECTION = "symwasm.variant"  # "baseline" or "relaxed-simd": which of a model's files a .wasm is


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


def is_wasm(path: str | Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == WASM_MAGIC


def wasm_metadata(path: str | Path) -> dict:
    sections = wasm_custom_sections(Path(path).read_bytes())
    if SECTION not in sections:
        raise ValueError(f"{path}: a WebAssembly module without symwasm metadata")
    return json.loads(sections[SECTION])


def wasm_variant(path: str | Path) -> str:
    """Which of its model's files a .wasm is: "baseline" or "relaxed-simd" (files from before
    variants existed are the baseline)."""
    raw = wasm_custom_sections(Path(path).read_bytes()).get(VARIANT_SECTION, b"baseline")
    return raw.decode(errors="replace")


def read_metadata(path: str | Path) -> dict:
    """The metadata JSON of a compiled module (either target), also of a native library for
    a CPU this machine is not (its metadata says which: inspect shows it)."""
    if is_wasm(path):
        return wasm_metadata(path)
    from .native_host import NativeBackend

    return NativeBackend(Path(path), check_cpu=False).metadata()
