"""The wasmtime backend: instantiate the module (it has no imports) and call its ABI.

A call is stopped from any thread through the context's cancel flag in linear memory
(``cancel_flag``), which the VM polls before every instruction and kernels once per row: the
same mechanism as natively. (wasmtime's epoch interruption would also stop flat loops, but
its check on every loop back-edge made a 256x256 MatMul 3.4x slower.) The flag is written
through the memory's base address, which does not move: wasmtime reserves a wasm32 memory's
whole address range up front on 64-bit hosts. The store's linear memory is capped, so even
a hostile module cannot take more than its share.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import wasmtime

from ._stop import Trapped
from .metadata import wasm_metadata, wasm_variant

# linear memory beyond the VM's own limit that the store allows: the module's data (program,
# weights), stack and allocator slack
MEMORY_SLACK = 256 << 20
WASM32_MAX_MEMORY = 4 << 30


# a model's variants, best first, and the wasm features this host's engine has
VARIANTS = ("relaxed-simd", "baseline")
ENGINE_FEATURES = frozenset({"simd128", "bulk-memory", "nontrapping-fptoint", "sign-ext", "mutable-globals",
                             "relaxed-simd"})


def choose_variant(path: Path, metadata: dict, want: str = "auto") -> tuple[Path, str]:
    """The file of the model at ``path`` to run and its variant: ``want`` names one
    ("baseline", "relaxed-simd") or "auto", the best whose features this engine has and
    whose file is beside ``path`` with the same metadata. A named variant that cannot run
    is an error; "auto" falls back to the file given."""
    if want not in ("auto",) + VARIANTS:
        raise ValueError(f"unknown variant '{want}' (choose auto, {', '.join(VARIANTS)})")
    files = metadata.get("variants")
    files = files if isinstance(files, dict) else {}
    this = wasm_variant(path)
    for name in ([want] if want != "auto" else [v for v in VARIANTS if v in files]):
        if name == this:
            return path, name
        problem = None
        entry = files.get(name)
        if entry is None:
            problem = f"the model has no {name} variant (compile with --relaxed-simd)"
        elif not isinstance(entry, dict) or not isinstance(entry.get("file"), str) or "/" in entry["file"]:
            problem = f"its metadata's {name} entry is malformed"
        elif missing := sorted(set(entry.get("features", [])) - ENGINE_FEATURES):
            problem = f"this engine lacks {', '.join(missing)}"
        else:
            other = path.parent / entry["file"]
            if not other.exists():
                problem = f"its {name} file {other} is missing"
            elif wasm_variant(other) != name or wasm_metadata(other) != metadata:
                problem = f"{other} is not the {name} variant of this model (its metadata differs)"
            else:
                return other, name
        if want != "auto":
            raise ValueError(f"cannot run the {name} variant: {problem}")
    return path, this


class WasmBackend:
    """One engine, store and instance: a load of its own, used by one Model."""

    def __init__(self, path: Path):
        self.path = path
        cfg = wasmtime.Config()
        cfg.wasm_simd = True
        cfg.wasm_relaxed_simd = True
        cfg.wasm_bulk_memory = True
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
        self.instantiate()

    def instantiate(self) -> None:
        """A fresh store and instance of the module: its linear memory back to the start."""
        self.store = wasmtime.Store(self.engine)
        self.store.set_limits(memory_size=self.memory_cap)
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

    def cancel_flag(self, ctx: int) -> ctypes.c_int32:
        """The context's cancel flag (sw_cancel_flag), writable from any thread through the
        memory's base address."""
        at = self.call("sw_cancel_flag", ctx)
        if at < 0 or at + 4 > self.memory.data_len(self.store):
            raise Trapped("the module's cancel flag lies outside its memory")
        return ctypes.c_int32.from_address(ctypes.addressof(self.memory.data_ptr(self.store).contents) + at)

    def call(self, name: str, *args):
        fn = self.fns.get(name)
        if fn is None:
            raise ValueError(f"{self.path}: not a symwasm module of this format (it does not export {name})")
        try:
            return fn(self.store, *args)
        except wasmtime.Trap as e:
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
