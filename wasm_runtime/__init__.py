"""Run symwasm modules: ``load(path)`` a ``.wasm`` (under wasmtime) or a native library
(through ctypes); both give the same :class:`Model` API. Needs only numpy and wasmtime (a
native library only numpy); models whose inputs or outputs have one of the small dtypes
(bfloat16, float8_*, int4...) also need ml_dtypes, which gives numpy those dtypes.

Threads: each :class:`Model` is one instance of the model (its own VM context: registers,
buffers, memory limit). A Model may be shared between threads; its calls are serialized
by a lock. For parallel runs, load the model once per thread: native loads of one file
share the library's code and differ only in their contexts, so that is cheap; each
``.wasm`` load is its own wasmtime engine, store and instance, whose code comes from the
compiled-code cache after the first load of the file (wasm_runtime.cache).

Threads inside a call: ``load(path, threads=n)`` runs the kernels that split their work (products,
convolutions, large row-wise and elementwise kernels) on n threads, the caller's included (a
``.wasm`` needs its threads variant, ``compile --threads``); the default is the CPUs this process may
use (``SYMWASM_THREADS`` overrides it), as onnxruntime does. The results have the same bits
whatever n. ``Model.threads`` says how many run, ``Model.threads_note`` why fewer than asked.

Stopping a call: ``run(feeds, timeout=seconds)``, or ``Model.cancel()`` from another thread.
Either raises :class:`ModelError` with status CANCELLED, and the model runs normally again.
"""
from __future__ import annotations

import base64
import functools
import math
import os
import struct
import threading
import time
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ._abi import DTYPES, FORMAT_VERSION, MAX_RANK, MAX_THREADS, STATUS, STATUS_MEANING, TENSOR_LAYOUT

DEFAULT_MEMORY_LIMIT = 2 << 30  # the VM's own default (sw_context_create)
# natively, an input of at least this many bytes is read in place (format 3.6) instead of
# copied into the module's buffer: below it the copy (about 1 us for 64 bytes) costs no more
# than asking numpy for the array's address (ndarray.ctypes.data, about 1.2 us)
IN_PLACE_BYTES = 1 << 15
from .cache import CodeCache, default_code_dir
from .metadata import SYMBOL_KINDS, declared_dim, is_wasm, read_metadata, shape_text, wasm_info
from ._stop import Trapped
from . import formula

__all__ = ["load", "Model", "ModelError", "TensorInfo", "read_metadata", "FORMAT_VERSION"]

STRING_CODE = DTYPES["string"][0]
CODE_NAMES = {code: name for name, (code, _, _) in DTYPES.items()}


def _numpy_knows(name: str) -> bool:
    try:
        np.dtype(name)
    except TypeError:
        return False
    return True


def _np_dtype(name: str) -> np.dtype:
    """numpy's dtype for an ABI dtype name: string tensors are object arrays of str. The
    small dtypes exist in numpy once ml_dtypes is imported, which happens here, the first
    time a model needs one; ImportError says what to install where it is missing."""
    if name == "string":
        return np.dtype(object)
    if not _numpy_knows(name):
        try:
            import ml_dtypes  # noqa: F401 - gives numpy the small dtypes (bfloat16, float8_*, int4...)
        except ImportError:
            raise ImportError(f"dtype {name} needs the ml_dtypes package (numpy has it only through "
                              f"ml_dtypes): pip install ml_dtypes") from None
    return np.dtype(name)


_CODE_DTYPES: dict[int, np.dtype] = {}


def _code_dtype(code: int) -> np.dtype | None:
    """numpy's dtype for an ABI dtype code (None for a code the ABI does not have)."""
    dt = _CODE_DTYPES.get(code)
    if dt is None and code in CODE_NAMES:
        dt = _CODE_DTYPES[code] = _np_dtype(CODE_NAMES[code])
    return dt


# a feed's (little-endian, numeric) numpy dtype -> its DTYPES entry, without building its name;
# feeds of the small dtypes (numpy has them only through ml_dtypes) are found by their names
_FEED_DTYPES = {np.dtype(name).newbyteorder("<"): entry for name, entry in DTYPES.items()
                if name != "string" and _numpy_knows(name)}


def _abi_name(dt: np.dtype) -> str:
    """The ABI dtype name of a numpy dtype (text of any numpy kind is "string")."""
    return "string" if dt.kind in "OUS" else dt.name


def utf8_parts(arr: np.ndarray, what: str) -> list[bytes]:
    """Each element of a string tensor (str or bytes) as UTF-8 bytes."""
    parts = []
    for i, s in enumerate(arr.reshape(-1)):
        if isinstance(s, str):
            parts.append(s.encode("utf-8", "surrogatepass"))
        elif isinstance(s, (bytes, bytearray, np.bytes_)):
            parts.append(bytes(s))
        else:
            raise ModelError(f"{what}: element {i} is {type(s).__name__}, not a string", STATUS["INVALID_INPUT"])
    return parts


def string_buffer(parts: list[bytes], base: int) -> bytes:
    """A string tensor as an input buffer at address ``base`` holds it: the sw_str elements
    {address, length}, then every element's bytes (the VM checks that each element points
    into the buffer); 16 bytes an element plus the text."""
    lens = np.array([len(b) for b in parts], dtype="<i8")
    starts = base + 16 * len(parts) + np.cumsum(lens) - lens
    return np.stack([starts, lens], axis=-1).astype("<i8").tobytes() + b"".join(parts)


class ModelError(RuntimeError):
    """A failed run or load. ``status`` is the module's status code (see the ABI); the
    message is the module's own, naming the input, op and dim."""

    def __init__(self, message: str, status: int = STATUS["INTERNAL"]):
        super().__init__(message)
        self.status = status


class TensorInfo:
    """An input or output: name, numpy dtype and symbolic shape (ints and symbol names)."""

    def __init__(self, d: dict, where: str = ""):
        self.name: str = d["name"]
        try:
            self.dtype = _np_dtype(d["dtype"])
        except ImportError as e:
            raise ImportError(f"{where}'{self.name}': {e}") from None
        self.shape: tuple = tuple(d["shape"])
        self._default = d.get("default")  # compile --overridable: the value a run that does not feed it gets

    @functools.cached_property
    def default(self) -> np.ndarray | None:
        """The value a run that does not feed this input gets (compile --overridable), or None;
        read-only, decoded once."""
        if self._default is None:
            return None
        data = base64.b64decode(self._default["data"])
        le = self.dtype.newbyteorder("<") if self.dtype.kind in "biuf" else self.dtype
        return np.frombuffer(data, le).reshape(self._default["shape"])

    def __repr__(self) -> str:
        return f"TensorInfo({self.name!r}, {self.dtype}, {self.shape})"

    def __str__(self) -> str:
        return f"{self.name}: {_abi_name(self.dtype)}{shape_text(self.shape)}"


def check_format(metadata: dict, where: str) -> None:
    """A module of another major format version cannot run on this host."""
    if not isinstance(metadata, dict):
        raise ValueError("the metadata is not a JSON object")
    version = tuple(metadata.get("format_version") or (0, 0))
    if metadata.get("format") != "symwasm" or version[0] != FORMAT_VERSION[0]:
        raise ModelError(f"{where}: module format {'.'.join(map(str, version))} cannot run on this host "
                         f"(it reads format {FORMAT_VERSION[0]}.x); recompile the model with this symwasm",
                         STATUS["INVALID_PROGRAM"])


class Model:
    """One instance of a loaded module. ``run`` takes the inputs (a dict by name, or a list
    in the model's input order) and returns a dict of arrays; ``run_list`` a list in the
    model's output order. Thread-safe: calls on one Model are serialized.

    ``load_seconds`` is the time :func:`load` took (not counting the import of wasmtime, once
    per process). ``code_cache`` says where a .wasm's compiled code came from: "hit" (the
    compiled-code cache), "stored" (compiled, and written to the cache), "replaced" (compiled,
    and written over an entry that did not verify), "off", or "unusable: ..." / "not stored:
    ..." with the reason; None for a native library, which has no code to compile."""

    load_seconds: float = 0.0
    code_cache: str | None = None
    threads = 1  # threads a call runs on, the caller's included (set_threads)
    threads_note = ""  # why they are fewer than asked; empty when they are not

    def __init__(self, backend, metadata: dict, path: Path, threads: int | None = None):
        self._threads_asked = default_threads() if threads is None else _thread_count(threads)
        self._b = backend
        self.metadata = metadata
        self.path = path
        self.file_bytes = path.stat().st_size
        self.target = metadata.get("target")
        self.inputs = [TensorInfo(d, f"{path.name}: input ") for d in metadata["inputs"]]
        self.outputs = [TensorInfo(d, f"{path.name}: output ") for d in metadata["outputs"]]
        self._input_names = [i.name for i in self.inputs]
        self._output_names = [o.name for o in self.outputs]
        self._lock = threading.Lock()
        self._stop_reason = ""  # why the running call is being stopped, set by cancel or a timer
        # the running call's cancel flag (None between calls), guarded so that a cancel never
        # writes to the flag of a context that was destroyed since
        self._flag = None
        self._flag_lock = threading.Lock()
        self._ptr_size = 4 if self.target == "wasm32" else 8
        self._layout = TENSOR_LAYOUT[self._ptr_size]
        self._tensor = tensor_struct(self._ptr_size)
        self._ctx = 0
        version = self._b.call("sw_format_version")
        if (version >> 16, version & 0xFFFF) != tuple(metadata["format_version"]):
            raise ModelError(f"{path}: the module's code is format {version >> 16}.{version & 0xFFFF} but its "
                             f"metadata says {metadata['format_version']}: the file is corrupt",
                             STATUS["INVALID_PROGRAM"])
        self._check_program()
        # natively from format 3.6, a large input is read where the caller's array holds it
        self._in_place = self.target != "wasm32" and (version >> 16, version & 0xFFFF) >= (3, 6)
        self._memory_limit = DEFAULT_MEMORY_LIMIT
        self._new_context()

    def _check_program(self) -> None:
        """The metadata must describe the program the module runs: a module whose metadata was
        edited (inputs reordered, a dtype changed) would otherwise run silently wrong."""
        b = self._b
        where = f"{self.path}: the module's metadata disagrees with its program"
        n_in, n_out = b.call("sw_num_inputs"), b.call("sw_num_outputs")
        if (n_in, n_out) != (len(self.inputs), len(self.outputs)):
            raise ModelError(f"{where}: the program has {n_in} inputs and {n_out} outputs, the metadata "
                             f"{len(self.inputs)} and {len(self.outputs)}", STATUS["INVALID_PROGRAM"])
        for i, info in enumerate(self.inputs):
            name, code, rank = b.cstr(b.call("sw_input_name", i)), b.call("sw_input_dtype", i), b.call("sw_input_rank", i)
            meta = (info.name, DTYPES.get(_abi_name(info.dtype), (None,))[0], len(info.shape))
            if (name, code, rank) != meta:
                raise ModelError(f"{where}: input {i} is '{name}' (dtype code {code}, rank {rank}) in the program "
                                 f"but '{info.name}' ({info.dtype}, rank {len(info.shape)}) in the metadata",
                                 STATUS["INVALID_PROGRAM"])
        for i, info in enumerate(self.outputs):
            name = b.cstr(b.call("sw_output_name", i))
            if name != info.name:
                raise ModelError(f"{where}: output {i} is '{name}' in the program but '{info.name}' in the "
                                 f"metadata", STATUS["INVALID_PROGRAM"])

    def _new_context(self) -> None:
        self._ctx = self._b.call("sw_context_create")
        if not self._ctx:
            raise ModelError(f"{self.path}: out of memory while creating the model's context",
                             STATUS["OUT_OF_MEMORY"])
        self._check(self._b.call("sw_context_status", self._ctx))
        self._b.call("sw_set_memory_limit", self._ctx, self._memory_limit)
        self._shape_buffer = self._b.call("sw_shape_buffer", self._ctx)
        self._buffers: dict[int, tuple[int, int]] = {}  # input -> (address, capacity)
        # fixed for the context's life: its cancel flag and (format 3.5) its io table
        self._cancel_flag = self._b.cancel_flag(self._ctx)
        one_call = self._b.has("sw_run_io") and self._b.has("sw_io_table")
        self._io = self._b.call("sw_io_table", self._ctx) if one_call else 0
        self._in_descs = bytearray(self._tensor.size * len(self.inputs))
        self._start_threads()

    def _start_threads(self) -> None:
        asked = self._threads_asked
        if not self._b.has("sw_set_threads"):
            self.threads, why = 1, "the module is older than format 3.7, which added threads"
        else:
            count = self._b.call("sw_set_threads", self._ctx, asked)
            self._join_threads()  # the previous pool's, which it told to leave
            try:
                self.threads = self._b.start_threads(self._ctx, count) if self.target == "wasm32" else count
            except RuntimeError as e:  # a .wasm thread that could not start: the pool is stopped
                self._b.call("sw_set_threads", self._ctx, 1)
                self._join_threads()
                raise ModelError(f"{self.path.name}: {e}", STATUS["INTERNAL"]) from None
            why = f"the pool holds at most {MAX_THREADS}" if asked > MAX_THREADS else \
                "the system refused to start more, or the memory limit leaves no room for their stacks"
            if self.target == "wasm32" and not getattr(self._b, "threaded", False):
                why = "this .wasm has no threads (compile with --threads for its threads variant, which needs " \
                      "shared memory)"
        self.threads_note = "" if self.threads >= asked else f"{self.threads} of {asked} threads: {why}"

    def set_threads(self, n: int) -> int:
        """Run calls on ``n`` threads from now on (the caller's included); returns how many
        run (``threads_note`` says why, when fewer)."""
        with self._lock:
            self._live()
            self._threads_asked = _thread_count(n)
            self._start_threads()
            return self.threads

    variant: str | None = None  # wasm32: the variant running ("baseline", "relaxed-simd")

    def signature(self) -> str:
        """The inputs and outputs with their symbolic dims: ``(x: float32(n, 4)) -> (idx:
        int64(count, 2))``."""
        return f"({', '.join(map(str, self.inputs))}) -> ({', '.join(map(str, self.outputs))})"

    def __repr__(self) -> str:
        target = f"{self.target}, {self.variant}" if self.variant else self.target
        return f"<symwasm.Model {self.path.name} ({target}): {self.signature()}>"

    def summary(self) -> str:
        """What the model is, as text (``print(model.summary())``): file, target, variant
        and size, the inputs and outputs with their symbolic dims, the symbols, the memory
        plan, and how the load went."""
        meta = self.metadata
        if self.target == "wasm32":
            variants = meta.get("variants") or {}
            target = f"wasm32, {self.variant} variant" + (f" (of {', '.join(variants)})" if len(variants) > 1 else "")
        else:
            features = ", ".join(meta.get("features") or ()) or "none beyond the baseline"
            target = f"{self.target}, CPU {meta.get('cpu')} (ISA extensions: {features})"
        model = meta.get("model") or {}
        lines = [f"{self.path.name}: symwasm model '{model.get('name')}' (opset {model.get('opset')}), {target}, "
                 f"{self.file_bytes / 1e3:.1f} kB, format {'.'.join(map(str, meta['format_version']))}",
                 "inputs:", *(f"  {i}" for i in self.inputs), "outputs:", *(f"  {o}" for o in self.outputs)]
        symbols = meta.get("symbols") or {}
        if symbols:
            lines.append("symbols:")
            for name, s in symbols.items():
                hi = "inf" if s.get("max") is None else s["max"]
                lines.append(f"  {name}: {SYMBOL_KINDS.get(s.get('kind'), s.get('kind'))}, range [{s.get('min')}, {hi}]")
        plan = self.memory_plan()
        dynamic = f", dynamic arena {plan['dynamic_formula']} bytes" if plan["blocks"] else ""
        runtime = f", {len(plan['runtime'])} buffers sized from data" if plan["runtime"] else ""
        lines.append(f"memory: static arena {plan['static_bytes']} bytes{dynamic}{runtime}")
        cache = f" (compiled code: {self.code_cache})" if self.code_cache else ""
        lines.append(f"loaded in {self.load_seconds * 1e3:.1f} ms{cache}")
        return "\n".join(lines)

    def close(self) -> None:
        """Free the instance's memory now (it is freed when the Model is collected anyway)."""
        with self._lock:
            if self._ctx:
                self._b.call("sw_context_destroy", self._ctx)
                self._ctx = 0
                self._join_threads()

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if getattr(self, "_ctx", 0):
                self._b.call("sw_context_destroy", self._ctx)
        except Exception:  # noqa: BLE001 - interpreter shutdown may have torn the backend down
            pass

    def set_memory_limit(self, nbytes: int) -> None:
        """Cap the bytes the instance holds at once: its static arena, input buffers and
        run-time buffers together."""
        with self._lock:
            self._live()
            self._memory_limit = max(0, int(nbytes))
            self._b.call("sw_set_memory_limit", self._ctx, self._memory_limit)
            self._b.limit_memory(self._memory_limit)

    def required_bytes(self, **symbols: int) -> int:
        """The bytes a run with these symbol values needs under the memory limit, before
        running it: the static arena, the dynamic arena the compiler planned (a formula of
        the input symbols, in the metadata) and the input buffers. Buffers whose sizes depend
        on data (NonZero counts, loop results: ``memory_plan()['runtime']``) come on top.
        ``model.required_bytes(batch=4, seq=512) <= budget`` says before a run whether it fits."""
        plan = self.memory_plan()
        need = set(formula.symbols(plan["dynamic_bytes"]))
        for info in self.inputs:
            need |= {d for d in info.shape if isinstance(d, str)}
        # an input's own copy of a shared dim name (N@y) is sized from the name when not given
        symbols = {**{s: symbols[declared_dim(s)] for s in need if declared_dim(s) in symbols}, **symbols}
        missing = sorted(need - set(symbols))
        if missing:
            raise ValueError(f"required_bytes needs a value for {', '.join(missing)} "
                             f"(the symbols are: {', '.join(sorted(need)) or 'none'})")
        total = plan["static_bytes"] + formula.evaluate(plan["dynamic_bytes"], symbols)
        for info in self.inputs:
            n = DTYPES[_abi_name(info.dtype)][1]  # a string's text comes on top of its 16 bytes
            for d in info.shape:
                n *= symbols[d] if isinstance(d, str) else int(d)
            total += n
        return total

    def memory_plan(self) -> dict:
        """The compiler's memory plan: ``static_bytes``, ``dynamic_bytes`` (a formula),
        ``dynamic_formula`` (the same as text), ``reserve`` (the dynamic arena at the symbols'
        bounds), ``blocks`` (which values share each block) and ``runtime`` (values the
        run-time allocator holds)."""
        plan = self.metadata.get("memory")
        if plan is None:
            return {"static_bytes": self.metadata["program"].get("arena_size", 0), "dynamic_bytes": 0,
                    "dynamic_formula": "0", "reserve": 0, "blocks": [], "runtime": []}
        return plan

    def memory_held(self) -> int:
        """The bytes the instance holds now, as counted against the limit."""
        with self._lock:
            self._live()
            return self._b.call("sw_memory_held", self._ctx)

    def trim(self) -> None:
        """Give memory back: a new context (and for a .wasm a new instance, since linear memory
        never shrinks), keeping the memory limit. The next run starts from nothing."""
        with self._lock:
            self._live()
            self._b.call("sw_context_destroy", self._ctx)
            self._join_threads()
            self._restart()

    def _join_threads(self) -> None:
        """A .wasm's threads, once its context's pool told them to leave, are joined."""
        join = getattr(self._b, "join_threads", None)
        if join is not None:
            join()

    def _restart(self) -> None:
        """A new instance and context, keeping the memory limit: after a trim, or after a
        .wasm call was stopped midway (its instance's state is then unknown)."""
        self._ctx = 0
        self._b.instantiate()
        self._new_context()

    def cancel(self) -> None:
        """Stop the call running on this Model now (from any thread); it raises ModelError
        with status CANCELLED. No effect on calls that start later."""
        self._stop("cancelled")

    def _stop(self, reason: str) -> None:
        with self._flag_lock:
            if self._flag is not None:
                self._stop_reason = reason
                self._flag.value = 1

    def _live(self) -> None:
        if not self._ctx:
            raise ModelError(f"{self.path.name}: the model was closed", STATUS["INVALID_INPUT"])

    def _check(self, status: int) -> None:
        if status != 0:
            msg = self._b.last_error(self._ctx) or STATUS_MEANING.get(status, f"status {status}")
            raise ModelError(msg, status)

    def run(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray],
            timeout: float | None = None) -> dict[str, np.ndarray]:
        """Run the model. ``inputs`` maps input names to arrays, or is a list (or tuple) of
        arrays in the model's input order (``model.inputs``): ``run({"a": a, "b": b})`` and
        ``run([a, b])`` are the same run. Returns output name -> array. ``timeout``
        (seconds) stops a call that takes longer, as :meth:`cancel` does."""
        return dict(zip(self._output_names, self._call(inputs, timeout)))

    def run_list(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray],
                 timeout: float | None = None) -> list[np.ndarray]:
        """As :meth:`run`, with the outputs as a list in the model's output order
        (``model.outputs``)."""
        return self._call(inputs, timeout)

    def _call(self, inputs, timeout: float | None) -> list[np.ndarray]:
        if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ModelError(f"timeout must be a positive number of seconds, not {timeout!r}",
                             STATUS["INVALID_INPUT"])
        values = self._input_values(inputs)
        with self._lock:
            self._live()
            self._stop_reason = ""
            with self._flag_lock:
                self._flag = self._cancel_flag
                self._flag.value = 0
            timer = None
            if timeout is not None:
                timer = threading.Timer(timeout, self._stop, (f"timed out after {timeout:g} s",))
                timer.daemon = True
                timer.start()
            try:
                return self._run(values)
            except ModelError as e:
                if e.status == STATUS["CANCELLED"]:
                    raise ModelError(f"the call was {self._stop_reason or 'cancelled'}", e.status) from None
                if not getattr(self._b, "broken", False):
                    raise
                trapped = Trapped(f"{e} ({'; '.join(self._b.thread_errors)})")  # a .wasm thread trapped
            except Trapped as e:
                trapped = e
            finally:
                if timer is not None:
                    timer.cancel()
                with self._flag_lock:
                    self._flag = None
            self._restart()
            raise ModelError(f"{self.path.name}: {trapped} (a symwasm bug, or a module built to trap); the model "
                             f"was restarted", STATUS["INTERNAL"])

    def _input_values(self, inputs) -> Sequence:
        """The arrays for the model's inputs, in its input order."""
        names = self._input_names
        if type(inputs) is dict or isinstance(inputs, Mapping):  # (a dict skips the ABC's check)
            unknown = [repr(k) if not isinstance(k, str) else k for k in inputs if k not in names]
            if unknown:
                weights = [k for k in unknown if k in self.metadata["model"].get("weight_inputs", ())]
                why = (f" ({', '.join(weights)}: initializers the model also lists as inputs, which symwasm "
                       f"compiles as the constants they hold; compile with --overridable {','.join(weights)} to "
                       f"let a run feed them)") if weights else ""
                raise ModelError(f"unknown input(s) {', '.join(unknown)}; the model takes "
                                 f"{', '.join(names)}{why}", STATUS["INVALID_INPUT"])
            defaults = {}
            for info in self.inputs:
                if info.name not in inputs:
                    defaults[info.name] = info.default
                    if defaults[info.name] is None:
                        raise ModelError(f"input '{info.name}' is missing", STATUS["INVALID_INPUT"])
            return [inputs[name] if name in inputs else defaults[name] for name in names]
        if isinstance(inputs, (list, tuple)):
            if len(inputs) != len(names):
                raise ModelError(f"run got {len(inputs)} arrays, but the model takes {len(names)} inputs: "
                                 f"{', '.join(names)}", STATUS["INVALID_INPUT"])
            return inputs
        raise ModelError(f"run takes a mapping of input names to arrays, or a list of arrays in the model's "
                         f"input order ({', '.join(names)}), not {type(inputs).__name__}", STATUS["INVALID_INPUT"])

    def _run(self, values: Sequence) -> list[np.ndarray]:
        b = self._b
        one_call = bool(self._io)  # format 3.5: the whole run in one export call through the io table
        descs = self._in_descs
        held = []  # the arrays of inputs read in place, alive until the call returns
        for index, info in enumerate(self.inputs):
            arr, code = self._input_array(info, values[index])
            data = 0  # an input read in place: its address
            if code == STRING_CODE:
                parts = utf8_parts(arr, f"input '{info.name}'")
                ptr = self._input_buffer(index, 16 * len(parts) + sum(map(len, parts)))
                b.write(ptr, string_buffer(parts, ptr))
            elif one_call and self._in_place and arr.nbytes >= IN_PLACE_BYTES and arr.flags.aligned:
                data = arr.ctypes.data  # (values holds arr, or _input_array's copy of it, past the call)
                held.append(arr)
            else:
                b.put(self._input_buffer(index, arr.nbytes), arr)
            shape = arr.shape + (0,) * (MAX_RANK - arr.ndim)
            if one_call:
                self._tensor.pack_into(descs, index * self._tensor.size, data, code, arr.ndim, *shape)
            else:
                b.write(self._shape_buffer, struct.pack(f"<{MAX_RANK}q", *shape))
                self._check(b.call("sw_set_input", self._ctx, index, code, arr.ndim))
        if not one_call:
            self._check(b.call("sw_run", self._ctx))
            return [self._output(i) for i in range(len(self.outputs))]
        b.write(self._io, descs)
        self._check(b.call("sw_run_io", self._ctx))
        out = b.read(self._io + len(descs), self._tensor.size * len(self.outputs))
        return [self._read_tensor(i, desc) for i, desc in enumerate(self._tensor.iter_unpack(out))]

    def _input_array(self, info: TensorInfo, value) -> tuple[np.ndarray, int]:
        """The feed for an input as the module reads it (C order, little-endian; strings an
        object array) and its dtype code; checks what the host must check before copying."""
        try:
            arr = np.asarray(value)
        except Exception as e:  # noqa: BLE001 - whatever the object is, say so
            raise ModelError(f"input '{info.name}': cannot be read as an array ({type(e).__name__}: {e})",
                             STATUS["INVALID_INPUT"]) from None
        entry = _FEED_DTYPES.get(arr.dtype) or DTYPES.get(_abi_name(arr.dtype))
        if entry is None:
            raise ModelError(f"input '{info.name}': dtype {arr.dtype} is not supported "
                             f"(expected {info.dtype})", STATUS["INVALID_INPUT"])
        if arr.ndim > MAX_RANK:
            raise ModelError(f"input '{info.name}': rank {arr.ndim} exceeds {MAX_RANK}", STATUS["INVALID_INPUT"])
        # before any copy: a broadcast view may stand for far more bytes than it holds
        if arr.nbytes > self._memory_limit:
            raise ModelError(f"input '{info.name}': cannot allocate {arr.nbytes} bytes (memory limit "
                             f"{self._memory_limit})", STATUS["OUT_OF_MEMORY"])
        if entry[0] == STRING_CODE:
            if info.dtype.kind != "O":
                raise ModelError(f"input '{info.name}': dtype {arr.dtype} is not supported (expected {info.dtype})",
                                 STATUS["INVALID_INPUT"])
            return np.asarray(arr, dtype=object), entry[0]
        if arr.dtype.byteorder == ">":  # the module reads little-endian
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        if not arr.flags.c_contiguous:  # (np.ascontiguousarray would make 0-d arrays 1-d)
            arr = arr.copy(order="C")
        return arr, entry[0]

    def _input_buffer(self, index: int, nbytes: int) -> int:
        """The module's buffer for an input; asked for again only when it must grow."""
        ptr, capacity = self._buffers.get(index, (0, -1))
        if nbytes > capacity:
            ptr = self._b.call("sw_input_buffer", self._ctx, index, nbytes)
            if not ptr:
                self._buffers.pop(index, None)
                self._check(STATUS["OUT_OF_MEMORY"])
            self._buffers[index] = (ptr, nbytes)
        return ptr

    def _output(self, i: int) -> np.ndarray:
        """Output i through sw_output_tensor (modules before format 3.5)."""
        ptr = self._b.call("sw_output_tensor", self._ctx, i)
        if not ptr:
            raise ModelError(f"output '{self.outputs[i].name}' was not produced (a symwasm bug)", STATUS["INTERNAL"])
        return self._read_tensor(i, self._tensor.unpack(self._b.read(ptr, self._tensor.size)))

    def _read_tensor(self, i: int, desc: tuple) -> np.ndarray:
        """Output i's array, copied out of the module once, from its sw_tensor (as a tuple:
        data, dtype, rank, then the dims)."""
        data, code, rank, dims = desc[0], desc[1], desc[2], desc[3:]
        if not data and not code:
            raise ModelError(f"output '{self.outputs[i].name}' was not produced (a symwasm bug)", STATUS["INTERNAL"])
        dtype = _code_dtype(code)
        shape = dims[:rank] if 0 <= rank <= MAX_RANK else ()
        if dtype is None or not 0 <= rank <= MAX_RANK or min(shape, default=0) < 0:
            raise Trapped(f"output '{self.outputs[i].name}' has a corrupt descriptor (dtype code {code}, rank {rank})")
        if code == STRING_CODE:
            n = math.prod(shape)
            elems = np.frombuffer(self._b.read(data, 16 * n), dtype="<i8").reshape(n, 2)
            out = np.empty(n, dtype=object)
            for k, (addr, length) in enumerate(elems.tolist()):
                out[k] = self._b.read(addr, length).decode("utf-8", "surrogateescape") if length else ""
            return out.reshape(shape)
        return self._b.copy_out(data, shape, dtype)


def tensor_struct(ptr_size: int) -> struct.Struct:
    """sw_tensor as a ``struct.Struct`` (the ABI's layout for this pointer size): unpacks to
    data, dtype, rank and the MAX_RANK dims, flat."""
    lay = TENSOR_LAYOUT[ptr_size]
    fmt, at = "<", 0
    for name, code in (("data", "I" if ptr_size == 4 else "Q"), ("dtype", "i"), ("rank", "i"),
                       ("shape", f"{MAX_RANK}q")):
        fmt += "x" * (lay[name] - at) + code
        at = lay[name] + struct.calcsize("<" + code)
    return struct.Struct(fmt + "x" * (lay["size"] - at))


def default_threads() -> int:
    """Threads a call runs on unless ``load`` is told: ``SYMWASM_THREADS`` if set, else the
    CPUs this process may run on (its affinity mask, which containers narrow)."""
    env = os.environ.get("SYMWASM_THREADS", "").strip()
    if env:
        try:
            return _thread_count(int(env))
        except ValueError:
            raise ModelError(f"SYMWASM_THREADS must be a whole number of threads (1 or more), not {env!r}",
                             STATUS["INVALID_INPUT"]) from None
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _thread_count(n) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ModelError(f"threads must be a whole number of threads (1 or more), not {n!r}", STATUS["INVALID_INPUT"])
    return n


def load(path: str | os.PathLike, variant: str = "auto", cache: bool | str | os.PathLike = True,
         threads: int | None = None) -> Model:
    """Load a compiled model: ``.wasm`` runs under wasmtime, anything else is a native
    library loaded with ctypes. Each call gives a new, independent instance.

    ``threads``: how many threads a call runs on, the caller's included (default
    :func:`default_threads`: the CPUs this process may use). Results have the same bits
    whatever the count; ``Model.threads`` says how many run.

    ``variant`` (wasm32): a model compiled with ``--relaxed-simd`` has two files, the
    baseline and ``NAME.relaxed.wasm``; "auto" runs the best one this engine supports whose
    file is beside ``path`` (``Model.variant`` says which), "baseline" or "relaxed-simd"
    demand one.

    ``cache`` (wasm32): the compiled-code cache, which makes a second load of the same file
    take a few milliseconds instead of compiling it again. True is the cache in
    $SYMWASM_CACHE/code (default ~/.cache/symwasm/code; SYMWASM_CODE_CACHE=0 turns it off),
    False none, a path a cache in that directory. ``Model.code_cache`` says how it went."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such model: {p}")
    threads = default_threads() if threads is None else _thread_count(threads)
    chosen = code_cache = None
    try:
        if is_wasm(p):
            from .wasm_host import WasmBackend, choose_variant, is_threaded

            t0 = time.perf_counter()
            metadata, this = wasm_info(p)
            check_format(metadata, str(p))
            p, chosen = choose_variant(p, metadata, this, variant, threads > 1)
            directory = default_code_dir() if cache is True else (cache or None)
            backend = WasmBackend(p, CodeCache(directory) if directory is not None else None,
                                  threaded=is_threaded(chosen))
            code_cache = backend.cache_status
        else:
            from .native_host import NativeBackend

            t0 = time.perf_counter()
            backend = NativeBackend(p)
            metadata = backend.metadata()
            check_format(metadata, str(p))
        check_metadata(metadata)
    except ModelError:
        raise
    except (ValueError, UnicodeDecodeError, KeyError, TypeError, IndexError) as e:
        # a truncated or edited file: bad JSON, bad UTF-8, missing fields, a foreign library
        raise ModelError(f"{p}: cannot load the model: {e}", STATUS["INVALID_PROGRAM"]) from None
    model = Model(backend, metadata, p, threads)
    model.variant = chosen
    model.code_cache = code_cache
    model.load_seconds = time.perf_counter() - t0
    return model


def check_metadata(metadata: dict) -> None:
    """The fields the host reads exist and have the right types (ValueError otherwise)."""
    if not isinstance(metadata, dict):
        raise ValueError("the metadata is not a JSON object")
    for key in ("inputs", "outputs"):
        items = metadata.get(key)
        if not isinstance(items, list):
            raise ValueError(f"the metadata has no list of {key}")
        for d in items:
            if isinstance(d, dict) and isinstance(d.get("name"), str) and isinstance(d.get("dtype"), str) \
                    and d["dtype"] not in DTYPES:
                # a dtype a later minor format added: this host cannot hand it over
                version = ".".join(map(str, metadata.get("format_version") or (0, 0)))
                raise ValueError(f"{key[:-1]} '{d['name']}' has dtype {d['dtype']}, which this host does not know "
                                 f"(the module is format {version}, this host reads "
                                 f"{FORMAT_VERSION[0]}.{FORMAT_VERSION[1]}); load it with a newer symwasm")
            if not (isinstance(d, dict) and isinstance(d.get("name"), str) and d.get("dtype") in DTYPES
                    and isinstance(d.get("shape"), list)):
                raise ValueError(f"the metadata's {key} entry {d!r:.80} is not {{name, dtype, shape}}")
