"""The wasmtime backend: instantiate the module (it has no imports) and call its ABI.

A call is stopped from any thread through the context's cancel flag in linear memory
(``cancel_flag``), which the VM polls before every instruction and kernels once per row: the
same mechanism as natively. (wasmtime's epoch interruption would also stop flat loops, but
its check on every loop back-edge made a 256x256 MatMul 3.4x slower.) The flag is written
through the memory's base address, which does not move: wasmtime reserves a wasm32 memory's
whole address range up front on 64-bit hosts, and the engine is told never to move it
(``memory_may_move``), so the host also copies inputs and outputs through an address it
asked for once. The store's linear memory is capped, so even
a hostile module cannot take more than its share.

Compiling a module with Cranelift is most of a load; the code it makes is kept in the
compiled-code cache (wasm_runtime.cache), and a second load of the same file maps it.
"""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import platform
import threading
import time
import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np
import wasmtime

from ._abi import EXPORTS
from ._copy import bytes_at, copy_in, nbytes
from ._stop import Trapped
from .cache import CacheUnusable, CodeCache
from .cpu import host_flags
from .metadata import wasm_info

try:  # wasmtime-py's ctypes bindings: a call through them skips its per-call type queries
    from wasmtime import _ffi as _wt

    _FAST_CALLS = all(hasattr(_wt, n) for n in ("wasmtime_func_call", "wasmtime_val_t", "wasm_trap_t"))
except ImportError:  # pragma: no cover - another wasmtime-py layout: the public API still works
    _wt, _FAST_CALLS = None, False

# an ABI kind's wasm32 value type, and wasmtime's code for it
_WASM_TYPE = {"i32": "i32", "ptr": "i32", "i64": "i64"}
_VALKIND = {"i32": 0, "i64": 1}

# linear memory beyond the VM's own limit that the store allows: the module's data (program,
# weights), stack and allocator slack
MEMORY_SLACK = 256 << 20
WASM32_MAX_MEMORY = 4 << 30


# the engine's configuration (wasmtime.Config attributes), part of the compiled-code cache's keys
ENGINE_CONFIG = {"wasm_simd": True, "wasm_relaxed_simd": True, "wasm_bulk_memory": True,
                 # the memory's base address stays put as it grows (within the 4 GiB that wasmtime
                 # reserves for a wasm32 memory on 64-bit hosts): the cancel flag is written
                 # through it, and the host's copies skip asking for it after every call
                 "memory_may_move": False}

# a threads variant's engine also has shared memory (part of its compiled-code cache's keys)
THREADS = "threads"
THREADS_CONFIG = {"wasm_threads": True, "shared_memory": True}
# a model's variants, best first (the threads ones only when a call may run on threads), and
# the wasm features this host's engine has
VARIANTS = ("relaxed-simd+threads", "threads", "relaxed-simd", "baseline")
ENGINE_FEATURES = frozenset({"simd128", "bulk-memory", "nontrapping-fptoint", "sign-ext", "mutable-globals",
                             "relaxed-simd", THREADS})


def is_threaded(variant: str) -> bool:
    """Whether a variant's name (``relaxed-simd+threads``) says it has threads."""
    return THREADS in variant.split("+")


# how long a load waits for the threads it starts to enter the pool's loop
THREAD_START_S = 30.0


def choose_variant(path: Path, metadata: dict, this: str, want: str = "auto",
                   threads: bool = False) -> tuple[Path, str]:
    """The file to run of the model at ``path`` (with this metadata, the file of variant
    ``this``), and its variant. ``want`` names one (:data:`VARIANTS`) or is "auto", the best
    whose features this engine has and whose file is beside ``path`` with the same metadata:
    a threads variant only when a call may run on ``threads``. A named variant that cannot
    run is an error; "auto" falls back to the file given."""
    if want not in ("auto",) + VARIANTS:
        raise ValueError(f"unknown variant '{want}' (choose auto, {', '.join(VARIANTS)})")
    files = metadata.get("variants")
    files = files if isinstance(files, dict) else {}
    wanted = [v for v in VARIANTS if v in files and (threads or not is_threaded(v))]
    for name in ([want] if want != "auto" else wanted):
        if name == this:
            return path, name
        problem = None
        entry = files.get(name)
        if entry is None:
            problem = f"the model has no {name} variant (compile with {' and '.join(f'--{f}' for f in name.split('+'))})"
        elif not isinstance(entry, dict) or not isinstance(entry.get("file"), str) or "/" in entry["file"]:
            problem = f"its metadata's {name} entry is malformed"
        elif missing := sorted(set(entry.get("features", [])) - ENGINE_FEATURES):
            problem = f"this engine lacks {', '.join(missing)}"
        else:
            other = path.parent / entry["file"]
            if not other.exists():
                problem = f"its {name} file {other} is missing"
            elif wasm_info(other) != (metadata, name):
                problem = f"{other} is not the {name} variant of this model (its metadata differs)"
            else:
                return other, name
        if want != "auto":
            raise ValueError(f"cannot run the {name} variant: {problem}")
    return path, this


@lru_cache(maxsize=None)
def _engine_key(threaded: bool = False) -> str:
    """What, beside a module's bytes, decides the code Cranelift makes: the wasmtime build
    (its library file; a stat, where asking importlib.metadata for the version costs 50 ms),
    the engine's configuration, and this machine's CPU."""
    lib = getattr(getattr(wasmtime, "_ffi", None), "filename", None)
    if lib is not None:
        st = os.stat(lib)
        build = f"{lib} {st.st_size} {st.st_mtime_ns}"
    else:  # pragma: no cover - another wasmtime-py layout
        import importlib.metadata

        build = importlib.metadata.version("wasmtime")
    config = ENGINE_CONFIG | THREADS_CONFIG if threaded else ENGINE_CONFIG
    return json.dumps([build, config, platform.machine(), sorted(host_flags() or ())])


def code_key(sha256: str, threaded: bool = False) -> str:
    """The compiled-code cache's key for a module (the sha256 of its bytes) under this engine."""
    return hashlib.sha256(f"{sha256} {_engine_key(threaded)}".encode()).hexdigest()


class _Shared(wasmtime.SharedMemory if hasattr(wasmtime, "SharedMemory") else object):
    """A shared memory as an import. (wasmtime-py 50's own SharedMemory hands C a pointer to
    its pointer when it is an import, so instantiation fails.)"""

    def _as_extern(self):
        return _wt.wasmtime_extern_t(_wt.WASMTIME_EXTERN_SHAREDMEMORY, _wt.wasmtime_extern_union(sharedmemory=self.ptr()))

    # the Memory methods the backend uses, without a store (the memory is the engine's)
    def data_ptr(self, store=None):  # noqa: ARG002 - Memory's signature
        return super().data_ptr()

    def data_len(self, store=None):  # noqa: ARG002
        return super().data_len()


class WasmBackend:
    """One engine, store and instance: a load of its own, used by one Model. With a
    ``cache``, the module's compiled code comes from it or goes into it, and
    ``cache_status`` says which (see Model.code_cache). ``threaded``: the module is a threads
    variant, which imports its memory, shared: the backend makes the memory, and runs the
    context's threads (:meth:`start_threads`), each an instance of its own over it."""

    def __init__(self, path: Path, cache: CodeCache | None = None, threaded: bool = False):
        self.path = path
        self.threaded = threaded
        cfg = wasmtime.Config()
        for name, value in (ENGINE_CONFIG | THREADS_CONFIG if threaded else ENGINE_CONFIG).items():
            setattr(cfg, name, value)
        self.engine = wasmtime.Engine(cfg)
        self.module, self.cache_status = self._module(path, cache)
        self.shared_limits = self._check_imports()
        self._threads: list[threading.Thread] = []
        self.thread_errors: list[str] = []  # why a thread stopped in a trap (or did not start)
        self.broken = False  # one did: the instance's pool fails every call until a restart
        self.signatures = self._check_signatures()
        self.fast = _FAST_CALLS
        self.memory_cap = WASM32_MAX_MEMORY
        self.instantiate()

    def _compile(self, data: bytes) -> wasmtime.Module:
        try:
            return wasmtime.Module(self.engine, data)
        except wasmtime.WasmtimeError as e:
            raise ValueError(f"not a valid WebAssembly module ({str(e).splitlines()[0]})") from None

    def _module(self, path: Path, cache: CodeCache | None) -> tuple[wasmtime.Module, str]:
        """The compiled module, from the cache when it holds a verified entry for it."""
        if cache is None:
            return self._compile(path.read_bytes()), "off"
        try:
            with cache.entry(code_key(cache.file_sha256(path), self.threaded)) as (found, state):
                if found is not None:
                    with contextlib.suppress(wasmtime.WasmtimeError):
                        return wasmtime.Module.deserialize_file(self.engine, found), "hit"
                    state = "corrupt"  # sealed, yet this engine refuses it: compile it again
        except CacheUnusable as e:
            warnings.warn(f"symwasm: compiled code is not cached: {e}", RuntimeWarning, stacklevel=4)
            return self._compile(path.read_bytes()), f"unusable: {e}"
        data = path.read_bytes()
        module = self._compile(data)
        try:  # under the key of the bytes compiled, should the file have changed meanwhile
            cache.store(code_key(hashlib.sha256(data).hexdigest(), self.threaded), module.serialize())
        except (OSError, CacheUnusable) as e:
            return module, f"not stored: {e}"
        return module, "stored" if state == "missing" else "replaced"

    def _check_imports(self) -> tuple[int, int] | None:
        """A plain module imports nothing and exports its memory; a threads variant imports
        one shared memory, ``env.memory``, whose limits (in pages) are returned."""
        imports = self.module.imports
        if not self.threaded:
            if imports:
                raise ValueError(f"the module imports {[i.name for i in imports]}; symwasm modules import nothing "
                                 f"(but a threads variant's memory)")
            if "memory" not in [e.name for e in self.module.exports]:
                raise ValueError("the module exports no memory; it is not a symwasm module")
            return None
        ty = imports[0].type if len(imports) == 1 else None
        if not (isinstance(ty, wasmtime.MemoryType) and (imports[0].module, imports[0].name) == ("env", "memory")
                and ty.is_shared and ty.limits.max is not None):
            raise ValueError(f"the module imports {[f'{i.module}.{i.name}' for i in imports]}; a symwasm threads "
                             f"variant imports one shared memory, env.memory")
        if _wt is None:
            raise ValueError("this wasmtime-py has no shared memories: run the model's variant without threads")
        return ty.limits.min, ty.limits.max

    def instantiate(self) -> None:
        """A fresh store and instance of the module: its linear memory back to the start. The
        old memory's threads were joined when its context was destroyed; after a call stopped
        midway they may wait on it for ever, and are left (daemon threads, as the old memory)."""
        self._threads = []
        self.thread_errors, self.broken = [], False
        self.store = wasmtime.Store(self.engine)
        self.store.set_limits(memory_size=self.memory_cap)
        imports = []
        if self.threaded:
            lo, hi = self.shared_limits
            self.shared = _Shared(self.engine, wasmtime.MemoryType(wasmtime.Limits(lo, hi), shared=True))
            imports = [self.shared]
        try:
            self.instance = wasmtime.Instance(self.store, self.module, imports)
        except wasmtime.Trap as e:
            raise ValueError(f"the module trapped while starting ({e.message})") from None
        exports = self.instance.exports(self.store)
        self.memory = self.shared if self.threaded else exports["memory"]
        self.fns = {name: exports[name] for name in self.signatures}
        self._mem: tuple[int, int] | None = None  # memory's base address and size, while known
        self._prepared: dict = {}  # per export, the ctypes values of a fast call (call)
        self._bytes: np.ndarray | None = None  # the memory's bytes while _mem holds (copy_out)

    def _check_signatures(self) -> dict[str, tuple[list[int], int, bool]]:
        """Each ABI export's wasm signature must be the ABI's (calls skip wasmtime-py's
        per-call checks, so a module must not get this far with another signature). Returns,
        per export the module has, its parameters' value kinds, its result count and
        whether the result is an address."""
        out = {}
        for e in self.module.exports:
            if e.name not in EXPORTS:
                continue
            ret, params = EXPORTS[e.name]
            want = ([_WASM_TYPE[k] for k in params], [] if ret == "void" else [_WASM_TYPE[ret]])
            ty = e.type
            got = ([str(t) for t in ty.params], [str(t) for t in ty.results]) if isinstance(ty, wasmtime.FuncType) \
                else None
            if got != want:
                shown = f"({', '.join(got[0])}) -> ({', '.join(got[1])})" if got else f"a {type(ty).__name__}"
                raise ValueError(f"export {e.name} is {shown} but the ABI says ({', '.join(want[0])}) -> "
                                 f"({', '.join(want[1])}); not a symwasm module of this format")
            out[e.name] = ([_VALKIND[_WASM_TYPE[k]] for k in params], len(want[1]), ret == "ptr")
        return out

    def has(self, name: str) -> bool:
        return name in self.fns

    def start_threads(self, ctx: int, count: int) -> int:
        """Start the threads of the context's pool (``count`` with the caller's, as
        sw_set_threads gave), each an instance of the module over the shared memory running
        sw_thread_start on the stack the pool holds for it; returns how many run with the
        caller's, once they are in the pool's loop."""
        if not self.threaded or count <= 1:
            return 1
        self.thread_errors = []
        for index in range(1, count):
            top = self.call("sw_thread_stack", ctx, index)
            if not top:
                break
            t = threading.Thread(target=self._thread, args=(self.shared, top, ctx, index), daemon=True,
                                 name=f"symwasm-{self.path.name}-{index}")
            t.start()
            self._threads.append(t)
        deadline = time.monotonic() + THREAD_START_S
        while self.call("sw_threads_running", ctx) < len(self._threads):
            if self.thread_errors or time.monotonic() > deadline:
                why = "; ".join(self.thread_errors) or f"not started within {THREAD_START_S:g} s"
                raise RuntimeError(f"the module's threads did not start: {why}")
            time.sleep(0.0002)
        return 1 + len(self._threads)

    def _thread(self, memory: _Shared, stack_top: int, ctx: int, index: int) -> None:
        """Thread ``index``: its own store and instance over the shared memory (the module's
        start function finds the memory's data in place), in the pool's loop until it stops.
        A trap (a bug) is told to the pool (sw_thread_failed), so the call waiting for the
        thread's part fails rather than waits for ever, and the Model restarts the module."""
        exports = store = None
        try:
            store = wasmtime.Store(self.engine)
            exports = wasmtime.Instance(store, self.module, [memory]).exports(store)
            exports["sw_thread_start"](store, stack_top, ctx, index)
        except Exception as e:  # noqa: BLE001 - said by start_threads and the failed call
            self.thread_errors.append(f"thread {index}: {type(e).__name__}: {str(e).splitlines()[0]}")
            if exports is not None and memory is getattr(self, "shared", None):
                self.broken = True
                with contextlib.suppress(Exception):
                    exports["sw_thread_failed"](store, ctx, index)

    def join_threads(self) -> None:
        """Wait for the threads, which the context's pool has told to leave (sw_set_threads,
        sw_context_destroy)."""
        for t in self._threads:
            t.join()
        self._threads = []

    def limit_memory(self, vm_limit: int) -> None:
        """Cap linear memory at the VM's limit plus slack (the VM refuses first; the cap only
        binds a module that does not keep its own accounts)."""
        self.memory_cap = min(WASM32_MAX_MEMORY, vm_limit + MEMORY_SLACK)
        self.store.set_limits(memory_size=self.memory_cap)

    def cancel_flag(self, ctx: int) -> ctypes.c_int32:
        """The context's cancel flag (sw_cancel_flag), writable from any thread through the
        memory's base address."""
        return ctypes.c_int32.from_address(self._at(self.call("sw_cancel_flag", ctx), 4))

    def call(self, name: str, *args):
        fn = self.fns.get(name)
        if fn is None:
            raise ValueError(f"{self.path}: not a symwasm module of this format (it does not export {name})")
        kinds, nres, address = self.signatures[name]
        # (the memory may grow in the call, but its base does not move: _at asks for its size
        # again when an address lies past the size it knows)
        if not self.fast:
            try:
                r = fn(self.store, *args)
            except wasmtime.Trap as e:
                raise Trapped(f"the module trapped in {name}: {e.message}") from None
            return r & 0xFFFFFFFF if address else r
        # wasmtime_func_call with values prepared once per export (the signature was checked at
        # load): building them for every call cost a run of a one-op model about 1 us
        prepared = self._prepared.get(name)
        if prepared is None:
            params = (_wt.wasmtime_val_t * max(1, len(kinds)))()
            for p, kind in zip(params, kinds):
                p.kind = kind
            trap = ctypes.POINTER(_wt.wasm_trap_t)()
            prepared = self._prepared[name] = (params, (_wt.wasmtime_val_t * max(1, nres))(), trap,
                                               ctypes.byref(fn._func), ctypes.byref(trap))
        params, results, trap, func_ref, trap_ref = prepared
        for p, kind, a in zip(params, kinds, args):
            if kind:
                p.of.i64 = a
            else:
                p.of.i32 = a
        # the store's context is asked for on every call: it raises once the store is closed
        # (a Model collected after its store, at exit), where a cached pointer would dangle
        error = _wt.wasmtime_func_call(self.store._context(), func_ref, params, len(args), results, nres, trap_ref)
        if error:
            raise Trapped(f"the call of {name} failed: {wasmtime.WasmtimeError._from_ptr(error)}")
        if trap:
            del self._prepared[name]  # (the trap pointer is taken; the next call gets a null one)
            raise Trapped(f"the module trapped in {name}: {wasmtime.Trap._from_ptr(trap).message}")
        if not nres:
            return None
        r = results[0]
        if r.kind:
            return r.of.i64
        return r.of.i32 & 0xFFFFFFFF if address else r.of.i32

    def _at(self, ptr: int, n: int) -> int:
        """The host address of the module's bytes [ptr, ptr + n), which must lie in its memory
        (a module's addresses are checked before the host touches them). The memory's base
        does not move (ENGINE_CONFIG's memory_may_move); its size is asked for again when a
        range lies past the size known, as after a call that grew it."""
        mem = self._mem
        if mem is None or ptr + n > mem[1]:
            mem = self._mem = (ctypes.addressof(self.memory.data_ptr(self.store).contents),
                               self.memory.data_len(self.store))
            self._bytes = None
        if ptr < 0 or n < 0 or ptr + n > mem[1]:
            raise Trapped(f"the module gave the range [{ptr}, {ptr + n}) outside its {mem[1]}-byte memory")
        return mem[0] + ptr

    def put(self, ptr: int, arr: np.ndarray) -> None:
        """Copy a C-contiguous array into memory at ``ptr``."""
        copy_in(self._at(ptr, arr.nbytes), arr)

    def copy_out(self, ptr: int, shape: tuple, dtype: np.dtype) -> np.ndarray:
        """A new array of the module's bytes at ``ptr`` (checked to lie in its memory before
        anything is allocated), copied from an array over the whole memory: 0.4 us less per
        output than a memoryview of its bytes made for each (_copy.copy_out)."""
        n = nbytes(shape, dtype)
        self._at(ptr, n)
        if not n:
            return np.empty(shape, dtype=dtype)
        whole = self._bytes
        if whole is None:  # the memory's bytes as they are now (after _at, which knows them)
            base, size = self._mem
            whole = self._bytes = np.frombuffer((ctypes.c_char * size).from_address(base), np.uint8)
        return np.ndarray(shape, dtype, whole, ptr).copy()

    def write(self, ptr: int, data: bytes | bytearray) -> None:
        at = self._at(ptr, len(data))
        if data:
            bytes_at(at, len(data))[:] = data

    def read(self, ptr: int, n: int) -> bytes:
        return ctypes.string_at(self._at(ptr, n), n) if n else b""

    def cstr(self, ptr: int, limit: int = 4096) -> str:
        """The NUL-terminated UTF-8 text at ``ptr`` (at most ``limit`` bytes)."""
        self._mem = None
        size = self.memory.data_len(self.store)
        raw = self.read(ptr, max(0, min(limit, size - ptr)))
        return raw.split(b"\0", 1)[0].decode(errors="replace")

    def last_error(self, ctx: int) -> str:
        ptr = self.call("sw_last_error", ctx)
        n = self.call("sw_last_error_len", ctx)
        return self.read(ptr, n).decode(errors="replace")
