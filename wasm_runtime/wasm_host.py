"""The wasmtime backend: instantiate the module (it has no imports) and call its ABI.

Each backend has its own engine with epoch interruption on, so a call can be stopped from
any thread (``interrupt``) without touching other models: wasmtime checks the epoch at every
loop header and function entry, so a running kernel stops within microseconds. The store's
linear memory is capped, so even a hostile module cannot take more than its share.
"""
from __future__ import annotations

from pathlib import Path

import wasmtime

from ._stop import Interrupted, Trapped

# linear memory beyond the VM's own limit that the store allows: the module's data (program,
# weights), stack and allocator slack
MEMORY_SLACK = 256 << 20
WASM32_MAX_MEMORY = 4 << 30


class WasmBackend:
    """One engine, store and instance: a load of its own, used by one Model."""

    def __init__(self, path: Path):
        self.path = path
        cfg = wasmtime.Config()
        cfg.wasm_simd = True
        cfg.wasm_bulk_memory = True
        cfg.epoch_interruption = True
        self.engine = wasmtime.Engine(cfg)
        try:
            self.module = wasmtime.Module.from_file(self.engine, str(path))
        except wasmtime.WasmtimeError as e:
            raise ValueError(f"not a valid WebAssembly module ({str(e).splitlines()[0]})") from None
        if self.module.imports:
            raise ValueError(f"the module imports {[i.name for i in self.module.imports]}; "
                             f"symwasm modules import nothing")
        if "memory" not in [e.name for e in self.module.exports]:
            raise ValueError("the module exports no memory; it is not a symwasm module")
        self.memory_cap = WASM32_MAX_MEMORY
        self.in_run = False
        self.instantiate()

    def instantiate(self) -> None:
        """A fresh store and instance of the module: its linear memory back to the start."""
        self.store = wasmtime.Store(self.engine)
        self.store.set_limits(memory_size=self.memory_cap)
        self.store.set_epoch_deadline(1)
        try:
            self.instance = wasmtime.Instance(self.store, self.module, [])
        except wasmtime.Trap as e:
            raise ValueError(f"the module trapped while starting ({e.message})") from None
        exports = self.instance.exports(self.store)
        self.memory: wasmtime.Memory = exports["memory"]
        self.fns = {name: exports[name] for name in
                    [e.name for e in self.module.exports] if name.startswith("sw_")}

    def limit_memory(self, vm_limit: int) -> None:
        """Cap linear memory at the VM's limit plus slack (the VM refuses first; the cap only
        binds a module that does not keep its own accounts)."""
        self.memory_cap = min(WASM32_MAX_MEMORY, vm_limit + MEMORY_SLACK)
        self.store.set_limits(memory_size=self.memory_cap)

    def arm(self, ctx: int) -> None:
        """Start a run: an interrupt from now on stops it."""
        self.store.set_epoch_deadline(1)
        self.in_run = True

    def disarm(self) -> None:
        self.in_run = False

    def interrupt(self) -> None:
        """Stop the running call (from any thread): the epoch passes the store's deadline."""
        self.engine.increment_epoch()

    def call(self, name: str, *args):
        fn = self.fns.get(name)
        if fn is None:
            raise ValueError(f"{self.path}: not a symwasm module of this format (it does not export {name})")
        if not self.in_run:
            self.store.set_epoch_deadline(1)  # an interrupt while idle does not stop later calls
        try:
            return fn(self.store, *args)
        except wasmtime.Trap as e:
            if e.trap_code == wasmtime.TrapCode.INTERRUPT:
                raise Interrupted() from None
            raise Trapped(f"the module trapped in {name}: {e.message}") from None

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
