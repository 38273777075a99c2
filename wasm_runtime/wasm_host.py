"""The wasmtime backend: instantiate the module (it has no imports) and call its ABI."""
from __future__ import annotations

import threading
from pathlib import Path

import wasmtime

_ENGINE: wasmtime.Engine | None = None
_ENGINE_LOCK = threading.Lock()


def engine() -> wasmtime.Engine:
    global _ENGINE
    with _ENGINE_LOCK:
        if _ENGINE is None:
            cfg = wasmtime.Config()
            cfg.wasm_simd = True
            cfg.wasm_bulk_memory = True
            _ENGINE = wasmtime.Engine(cfg)
        return _ENGINE


class WasmBackend:
    """One store and instance: a load of its own, used by one Model."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.module = wasmtime.Module.from_file(engine(), str(path))
        except wasmtime.WasmtimeError as e:
            raise ValueError(f"not a valid WebAssembly module ({str(e).splitlines()[0]})") from None
        if self.module.imports:
            raise ValueError(f"the module imports {[i.name for i in self.module.imports]}; "
                             f"symwasm modules import nothing")
        if "memory" not in [e.name for e in self.module.exports]:
            raise ValueError("the module exports no memory; it is not a symwasm module")
        self.instantiate()

    def instantiate(self) -> None:
        """A fresh store and instance of the module: its linear memory back to the start."""
        self.store = wasmtime.Store(engine())
        self.instance = wasmtime.Instance(self.store, self.module, [])
        exports = self.instance.exports(self.store)
        self.memory: wasmtime.Memory = exports["memory"]
        self.fns = {name: exports[name] for name in
                    [e.name for e in self.module.exports] if name.startswith("sw_")}

    def call(self, name: str, *args):
        fn = self.fns.get(name)
        if fn is None:
            raise ValueError(f"{self.path}: not a symwasm module of this format (it does not export {name})")
        try:
            return fn(self.store, *args)
        except wasmtime.Trap as e:
            # traps are bugs, never the user's fault; still report them with context
            raise RuntimeError(f"the module trapped in {name} (a symwasm bug): {e}") from None

    def write(self, ptr: int, data: bytes) -> None:
        self.memory.write(self.store, data, ptr)

    def read(self, ptr: int, n: int) -> bytes:
        return bytes(self.memory.read(self.store, ptr, ptr + n)) if n else b""

    def cstr(self, ptr: int, limit: int = 4096) -> str:
        """The NUL-terminated UTF-8 text at ``ptr`` (at most ``limit`` bytes)."""
        size = self.memory.data_len(self.store)
        raw = self.read(ptr, max(0, min(limit, size - ptr)))
        return raw.split(b"\0", 1)[0].decode(errors="replace")

    def last_error(self, ctx: int) -> str:
        ptr = self.call("sw_last_error", ctx)
        n = self.call("sw_last_error_len", ctx)
        return self.read(ptr, n).decode(errors="replace")
