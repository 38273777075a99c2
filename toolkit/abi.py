"""The module ABI, defined once: dtypes, status codes, struct layouts, exports, the kernel
signature and the format version.

Everything that must agree between the compiler, the C VM, the Python host and the JS
loader is generated from the tables here by :mod:`toolkit.generate`, which writes every
generated file of the repository (``python -m toolkit.generate``, or ``python -m toolkit.abi``,
its alias; ``--check`` fails naming each stale file, as ``make test`` does):

- ``wasm_runtime/vm/sw_abi.h``: C defines, structs with static layout checks, prototypes;
- ``wasm_runtime/vm/sw_isa.h``: the instruction set (from :mod:`toolkit.vm.isa`);
- ``wasm_runtime/_abi.py``: the Python host's tables (it must not import the compiler);
- ``js_loader/abi.js``: the JS loader's tables.

The compiler reads the tables directly (dtypes in :mod:`toolkit.ir.dtypes`, the tensor and
program structs in :mod:`toolkit.codegen.kernel` and :mod:`toolkit.codegen.embed`).

Format version: a major bump means hosts of an older major cannot run the module; a minor
bump only adds (instructions, exports).
"""
from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

# 2.0: every export takes a context (sw_context*); more dtypes; sw_output_data & co. removed
# 3.0: kernel signatures, outputs and a cancel flag; a program checksum; metadata-check exports
# 3.1: MOVE, COPY and APPEND (control flow); ARENA and ALLOC_AT (the dynamic arena)
# 3.2: the small formats: bfloat16, float8 (4 kinds), float4, int4/uint4, int2/uint2
# 3.3: float8 e8m0 (the MX scale format)
# 3.4: string tensors (dtype 8): elements are sw_str {address, length} of UTF-8 bytes
# 3.5: sw_io_table and sw_run_io: a whole run (inputs declared, outputs described) in one call;
#      a .wasm's sw_metadata is empty (the custom section holds the metadata, once)
# 3.6: an io table input entry whose data is not null is read there, in place (a native
#      host's own memory), instead of from the input's buffer
# 3.7: sw_set_threads: kernels split in parts run on several threads
FORMAT_VERSION = (3, 7)
MAX_RANK = 8
MAX_THREADS = 64  # the most threads a context's pool runs (vm/sw_pool.c), the caller's included
# a dim name that several inputs give, whose copies never meet in an op, is one symbol per
# input (toolkit/frontend/onnx/shared_dims.py): N for the first input, N@y for input y's copy;
# hosts size a copy from the declared name when a caller gives only that (required_bytes)
SHARED_DIM_MARK = "@"


@dataclass(frozen=True)
class DTypeSpec:
    name: str  # also the numpy dtype name
    code: int  # ONNX TensorProto code
    size: int  # bytes per element
    kind: str  # "f" float, "i" signed integer, "u" unsigned integer, "b" bool (0 or 1), "s" string (UTF-8)
    c_type: str
    js_array: str  # the typed array holding it in JS


DTYPES: tuple[DTypeSpec, ...] = (
    DTypeSpec("float32", 1, 4, "f", "float", "Float32Array"),
    DTypeSpec("uint8", 2, 1, "u", "uint8_t", "Uint8Array"),
    DTypeSpec("int8", 3, 1, "i", "int8_t", "Int8Array"),
    DTypeSpec("uint16", 4, 2, "u", "uint16_t", "Uint16Array"),
    DTypeSpec("int16", 5, 2, "i", "int16_t", "Int16Array"),
    DTypeSpec("int32", 6, 4, "i", "int32_t", "Int32Array"),
    DTypeSpec("int64", 7, 8, "i", "int64_t", "BigInt64Array"),
    DTypeSpec("bool", 9, 1, "b", "uint8_t", "Uint8Array"),
    # IEEE binary16 bits; JS has no Float16Array in every engine we support
    DTypeSpec("float16", 10, 2, "f", "uint16_t", "Uint16Array"),
    DTypeSpec("float64", 11, 8, "f", "double", "Float64Array"),
    DTypeSpec("uint32", 12, 4, "u", "uint32_t", "Uint32Array"),
    DTypeSpec("uint64", 13, 8, "u", "uint64_t", "BigUint64Array"),
    # the small formats hold their raw codes, as ml_dtypes (and so numpy) holds them:
    # bfloat16 the high half of a float32; float8 and float4 one code per byte (float4 and
    # the 4- and 2-bit integers in the low bits; float8 e8m0 is an exponent alone: 2**(code
    # - 127), no sign, no zero, 0xFF NaN). Kernels compute on them as float32 (or int8/uint8
    # for the small integers); toolkit/codegen/minifloat.py converts.
    DTypeSpec("bfloat16", 16, 2, "f", "uint16_t", "Uint16Array"),
    DTypeSpec("float8_e4m3fn", 17, 1, "f", "uint8_t", "Uint8Array"),
    DTypeSpec("float8_e4m3fnuz", 18, 1, "f", "uint8_t", "Uint8Array"),
    DTypeSpec("float8_e5m2", 19, 1, "f", "uint8_t", "Uint8Array"),
    DTypeSpec("float8_e5m2fnuz", 20, 1, "f", "uint8_t", "Uint8Array"),
    DTypeSpec("uint4", 21, 1, "u", "uint8_t", "Uint8Array"),
    DTypeSpec("int4", 22, 1, "i", "uint8_t", "Uint8Array"),
    DTypeSpec("float4_e2m1fn", 23, 1, "f", "uint8_t", "Uint8Array"),
    DTypeSpec("float8_e8m0fnu", 24, 1, "f", "uint8_t", "Uint8Array"),
    DTypeSpec("uint2", 25, 1, "u", "uint8_t", "Uint8Array"),
    DTypeSpec("int2", 26, 1, "i", "uint8_t", "Uint8Array"),
    # UTF-8 text: each element is an sw_str (the address and length of its bytes, which
    # live in an input buffer, the module's read-only data or a buffer the run allocated);
    # JS passes a plain Array of strings
    DTypeSpec("string", 8, 16, "s", "sw_str", "Array"),
)


@dataclass(frozen=True)
class Status:
    name: str
    code: int
    meaning: str  # the message hosts show when the module gives none
    detail: str  # when it happens


STATUSES: tuple[Status, ...] = (
    Status("OK", 0, "success", "success"),
    Status("INVALID_INPUT", 1, "invalid input",
           "wrong rank, dtype or dim, a broken shape constraint, an input not set"),
    Status("OUT_OF_RANGE", 2, "out of range", "a data value out of range (a Gather index)"),
    Status("OUT_OF_MEMORY", 3, "out of memory", "an allocation over the memory limit, or memory cannot grow"),
    Status("INVALID_PROGRAM", 4, "invalid program",
           "the embedded program failed verification (a compiler bug or a corrupt file), or a module "
           "of another format"),
    Status("INTERNAL", 5, "internal error", "any other internal failure"),
    Status("CANCELLED", 6, "cancelled", "the host stopped the call (a cancel or a time limit)"),
)


# Why a kernel written in C (wasm_runtime/clib/sw_lib.h) refused its input: it returns
# SW_INVALID_INPUT with detail[0] one of these codes (1, 2, ...), and the compiler writes
# the message's reason as a choice over them ({0?...}, filled in by the VM)
LIB_REASONS: dict[str, tuple[tuple[str, str], ...]] = {
    "image": (
        ("UNRECOGNIZED", "the data is not an image in a known format (JPEG, PNG, BMP, PNM, TIFF, WebP, JPEG 2000)"),
        ("UNSUPPORTED_FORMAT", "the image format is recognized but not decoded by symwasm (WebP, JPEG 2000)"),
        ("UNSUPPORTED_FEATURE", "the image uses a feature symwasm does not decode (for example arithmetic "
                                "coding, 12-bit samples, CMYK, or a TIFF compression other than none)"),
        ("CORRUPT", "the image data is corrupt or truncated"),
        ("TOO_LARGE", "the image is larger than 16384 pixels on a side"),
    ),
}


# scalar kinds: how a value travels between host and module
#   i32, i64: integers; ptr: an address (4 bytes on wasm32, 8 natively); void: nothing
@dataclass(frozen=True)
class Field:
    name: str
    kind: str  # i32, i64 or ptr
    c_type: str
    count: int = 1  # > 1: an array
    doc: str = ""


STRUCTS: dict[str, tuple[Field, ...]] = {
    # a tensor descriptor: what registers hold and kernels receive
    # one element of a string tensor: the address of its first UTF-8 byte (a wasm32 address
    # zero-extended) and its length; the same 16 bytes on both targets
    "sw_str": (
        Field("ptr", "i64", "int64_t", doc="address of the first byte"),
        Field("len", "i64", "int64_t", doc="bytes (UTF-8, no terminator)"),
    ),
    "sw_tensor": (
        Field("data", "ptr", "void*"),
        Field("dtype", "i32", "int32_t"),
        Field("rank", "i32", "int32_t"),
        Field("shape", "i64", "int64_t", MAX_RANK),
    ),
    # the compiled model's program, emitted by the compiler as the global `sw_model`
    "sw_program": (
        Field("words", "ptr", "const int32_t*"),
        Field("nwords", "i32", "int32_t"),
        Field("nregs", "i32", "int32_t"),
        Field("heap_init", "ptr", "const int64_t*", doc="initial shape heap: constants preset, the rest 0"),
        Field("nheap", "i32", "int32_t"),
        Field("strings", "ptr", "const char*", doc="messages and names, NUL-terminated, at string_offsets"),
        Field("string_offsets", "ptr", "const int32_t*"),
        Field("nstrings", "i32", "int32_t"),
        Field("consts", "ptr", "const sw_tensor*"),
        Field("nconsts", "i32", "int32_t"),
        Field("kernels", "ptr", "const sw_kernel_fn*"),
        Field("kernel_info", "ptr", "const int32_t*",
              doc="per kernel, SW_KERNEL_INFO int32s: tensors, scalars, outputs (its last tensors, the ones "
                  "it writes), offset of its signature in kernel_sigs, split in parts (0 or 1)"),
        Field("nkernels", "i32", "int32_t"),
        Field("inputs", "ptr", "const int32_t*", doc="per input: dtype, rank, name string"),
        Field("ninputs", "i32", "int32_t"),
        Field("outputs", "ptr", "const int32_t*", doc="per output: name string"),
        Field("noutputs", "i32", "int32_t"),
        Field("metadata", "ptr", "const char*", doc="the metadata JSON"),
        Field("metadata_len", "i32", "int32_t"),
        Field("arena_size", "i64", "int64_t", doc="bytes of the static arena"),
        Field("kernel_sigs", "ptr", "const int32_t*",
              doc="per kernel tensor: dtype, rank, then each dim: >= 0 static, -1 - k its k-th "
                  "symbol, SW_DIM_UNCHECKED an expression the VM does not evaluate"),
        Field("nkernel_sigs", "i32", "int32_t"),
        Field("checksum", "i64", "int64_t", doc="FNV-1a of the program tables (toolkit.codegen.embed.checksum)"),
    ),
}

# value types of exports: C type and scalar kind
TYPES: dict[str, tuple[str, str]] = {
    "void": ("void", "void"),
    "i32": ("int32_t", "i32"),
    "i64": ("int64_t", "i64"),
    "status": ("sw_status_t", "i32"),
    "ctx": ("sw_context*", "ptr"),
    "ptr": ("void*", "ptr"),
    "cstr": ("const char*", "ptr"),
    "dims": ("int64_t*", "ptr"),
    "tensor": ("const sw_tensor*", "ptr"),
    "io": ("sw_tensor*", "ptr"),
}


@dataclass(frozen=True)
class Export:
    name: str
    ret: str  # a key of TYPES
    params: tuple[tuple[str, str], ...]  # (type key, name)
    doc: str
    since: tuple[int, int] = (3, 0)  # the format version that added it: older modules lack it


CTX = ("ctx", "ctx")
EXPORTS: tuple[Export, ...] = (
    Export("sw_format_version", "i32", (), "the module's format version, major << 16 | minor"),
    Export("sw_num_inputs", "i32", (), "how many inputs the model has"),
    Export("sw_num_outputs", "i32", (), "how many outputs the model has"),
    Export("sw_metadata", "cstr", (), "a native library's metadata JSON; in a .wasm (from format 3.5) empty, "
                                      "since its symwasm.metadata custom section holds the metadata"),
    Export("sw_metadata_len", "i32", (), "its length in bytes"),
    Export("sw_input_name", "cstr", (("i32", "index"),),
           "input index's name as the program knows it (NUL-terminated); NULL if there is no such input"),
    Export("sw_input_dtype", "i32", (("i32", "index"),), "input index's dtype code; 0 if there is no such input"),
    Export("sw_input_rank", "i32", (("i32", "index"),), "input index's rank; -1 if there is no such input"),
    Export("sw_output_name", "cstr", (("i32", "index"),),
           "output index's name as the program knows it; NULL if there is no such output"),
    Export("sw_context_create", "ctx", (),
           "a new instance of the model: its own registers, shape heap, static arena, inputs, "
           "outputs, memory limit and error text; NULL when out of memory"),
    Export("sw_context_status", "status", (CTX,),
           "SW_OK, or why the context cannot run (the program failed verification, the static "
           "arena cannot be allocated); the message is in sw_last_error"),
    Export("sw_context_destroy", "void", (CTX,), "frees the context and every buffer it holds"),
    Export("sw_set_memory_limit", "void", (CTX, ("i64", "bytes")),
           "cap on the bytes the context may hold at once, counting its static and dynamic arenas, input "
           "buffers and run-time buffers (default 2 GiB)"),
    Export("sw_memory_held", "i64", (CTX,), "the bytes the context holds now, as counted against the limit"),
    Export("sw_input_buffer", "ptr", (CTX, ("i32", "index"), ("i64", "nbytes")),
           "a context-owned buffer of at least nbytes for input index, valid until the next call "
           "for that index; NULL on failure (message set)"),
    Export("sw_shape_buffer", "dims", (CTX,),
           "an int64[MAX_RANK] the host fills with an input's shape before sw_set_input"),
    Export("sw_set_input", "status", (CTX, ("i32", "index"), ("i32", "dtype"), ("i32", "rank")),
           "declares input index: data in its input buffer, shape in the shape buffer"),
    Export("sw_run", "status", (CTX,), "runs the model; outputs stay valid until the next run"),
    Export("sw_output_tensor", "tensor", (CTX, ("i32", "index")),
           "output index's descriptor (sw_tensor), NULL if there is none"),
    Export("sw_io_table", "io", (CTX,),
           "the context's io table, sw_tensor[ninputs + noutputs], at a fixed address for the "
           "context's life: the host fills each input's dtype, rank and shape before sw_run_io, and "
           "leaves its data null (the data goes in the input's buffer) or (from format 3.6, not for "
           "strings) points it at memory of its own holding the input, read in place and never "
           "written, which must stay valid until sw_run_io returns and while the host reads an "
           "output that is that input; such an input is undeclared after the call", since=(3, 5)),
    Export("sw_run_io", "status", (CTX,),
           "one call per run: sw_set_input for every input from the io table, then sw_run; the table's "
           "entries after the inputs then describe the outputs (all zero for one not produced)",
           since=(3, 5)),
    Export("sw_cancel_flag", "ptr", (CTX,),
           "an int32 that, set non-zero (from any thread) during sw_run, stops the call with "
           "SW_CANCELLED; the host clears it before each sw_run"),
    Export("sw_set_threads", "i32", (CTX, ("i32", "threads")),
           "runs the kernels split in parts on this many threads, the caller's included, from the next "
           "sw_run: the old threads are stopped and a new pool made, even of the same count (natively the "
           "library starts the others and stops them at sw_context_destroy); fewer when the memory limit "
           "leaves no room for a .wasm thread's stack; returns the count in effect: 1 where the module has "
           "no threads", since=(3, 7)),
    Export("sw_thread_stack", "ptr", (CTX, ("i32", "index")),
           "a .wasm of the threads variant: the top of the stack the context's pool holds for thread index "
           "(1 <= index < the count sw_set_threads gave); NULL otherwise", since=(3, 7)),
    Export("sw_thread_start", "void", (("ptr", "stack_top"), CTX, ("i32", "index")),
           "a .wasm of the threads variant: thread index's loop, called in an instance of the module of its "
           "own over the same shared memory, on the stack sw_thread_stack gave, until the context's threads "
           "stop (sw_set_threads, sw_context_destroy); elsewhere it returns at once", since=(3, 7)),
    Export("sw_thread_failed", "void", (CTX, ("i32", "index")),
           "a .wasm's host: thread index stopped in a trap, so the call waiting for its part fails with "
           "SW_INTERNAL, as every later one: the host then loads the module again", since=(3, 7)),
    Export("sw_threads_running", "i32", (CTX,),
           "how many threads are inside sw_thread_start's loop (natively: the library's own)", since=(3, 7)),
    Export("sw_last_error", "cstr", (CTX,), "the last error message (UTF-8)"),
    Export("sw_last_error_len", "i32", (CTX,), "its length in bytes"),
)

# every generated kernel: tensors (inputs then outputs), in/out scalars, on failure up to
# three int64 details for the error message, the context's cancel flag (an int32 the
# kernel polls between rows), and which part of its work to do of how many (a kernel whose
# program entry is `parted` computes part p of parts; every other kernel is called with 0 of
# 1 and does all of it); returns a status
KERNEL_PARAMS = ("ptr", "ptr", "ptr", "ptr", "i32", "i32")
# each kernel's entry in the program's kernel_info table, in this order: its tensors,
# scalars, outputs (its last tensors), the offset of its signature in kernel_sigs, and
# whether its work is split in parts across the context's threads (1) or not (0)
KERNEL_INFO = ("tensors", "scalars", "outputs", "signature", "parted")
KERNEL_INFO_PARTED_SINCE = (3, 7)  # modules of earlier formats have the first four only


def kernel_info_fields(version: Sequence[int]) -> tuple[str, ...]:
    """The kernel_info fields of a module of format ``version`` (its metadata's)."""
    return KERNEL_INFO if tuple(version) >= KERNEL_INFO_PARTED_SINCE else KERNEL_INFO[:4]
# a kernel signature's dim that the VM does not check (an expression of the kernel's symbols)
DIM_UNCHECKED = -(2 ** 31)


# ----------------------------------------------------------------------------- layouts


def _field_size(f: Field, ptr_size: int) -> int:
    return ptr_size if f.kind == "ptr" else {"i32": 4, "i64": 8}[f.kind]


def layout(struct: str, ptr_size: int) -> dict[str, int]:
    """Byte offsets of a struct's fields, and its ``size``, with C's alignment rules for a
    target whose pointers have ``ptr_size`` bytes."""
    out: dict[str, int] = {}
    offset = align = 0
    for f in STRUCTS[struct]:
        size = _field_size(f, ptr_size)
        offset = -(-offset // size) * size
        out[f.name] = offset
        offset += size * f.count
        align = max(align, size)
    out["size"] = -(-offset // align) * align
    return out


# ----------------------------------------------------------------------------- generators

GENERATED = "generated by toolkit/abi.py (python -m toolkit.abi), do not edit"


def c_header() -> str:
    major, minor = FORMAT_VERSION
    L = [f"/* {GENERATED} */", "#ifndef SW_ABI_H", "#define SW_ABI_H", "",
         "#include <stddef.h>", "#include <stdint.h>", "",
         f"#define SW_FORMAT_MAJOR {major}", f"#define SW_FORMAT_MINOR {minor}",
         f"#define SW_MAX_RANK {MAX_RANK}",
         f"#define SW_MAX_THREADS {MAX_THREADS} /* the most threads a context's pool runs */", "",
         "/* dtype codes (ONNX TensorProto) */"]
    for d in DTYPES:
        L.append(f"#define SW_DT_{d.name.upper()} {d.code} /* {d.c_type}, {d.size} byte(s) */")
    L += ["", "/* bytes per element; 0 for a code that is not a dtype */",
          "static inline int64_t sw_dtype_size(int32_t code) {", "  switch (code) {"]
    L += [f"    case SW_DT_{d.name.upper()}: return {d.size};" for d in DTYPES]
    L += ["    default: return 0;", "  }", "}", "",
          "/* 'f' float, 'i' signed, 'u' unsigned, 'b' bool; 0 for a code that is not a dtype */",
          "static inline char sw_dtype_kind(int32_t code) {", "  switch (code) {"]
    L += [f"    case SW_DT_{d.name.upper()}: return '{d.kind}';" for d in DTYPES]
    L += ["    default: return 0;", "  }", "}", "",
          "static inline const char* sw_dtype_name(int32_t code) {", "  switch (code) {"]
    L += [f'    case SW_DT_{d.name.upper()}: return "{d.name}";' for d in DTYPES]
    L += ['    default: return "unknown dtype";', "  }", "}", "",
          "/* status codes: 0 is success */", "typedef int32_t sw_status_t;"]
    L += [f"#define SW_{s.name} {s.code} /* {s.detail} */" for s in STATUSES]
    L += ["", "typedef struct sw_tensor sw_tensor;",
          f"typedef sw_status_t (*sw_kernel_fn)({', '.join(['sw_tensor* const*', 'int64_t*', 'int64_t*', 'const volatile int32_t*', 'int32_t', 'int32_t'])});",
          f"#define SW_KERNEL_INFO {len(KERNEL_INFO)} /* int32s per kernel in sw_program.kernel_info */",
          *(f"#define SW_KI_{name.upper()} {i}" for i, name in enumerate(KERNEL_INFO)),
          f"#define SW_DIM_UNCHECKED ({DIM_UNCHECKED + 1} - 1) /* a signature dim the VM does not check */",
          ""]
    for name, fields in STRUCTS.items():
        L.append(f"struct {name} {{" if name == "sw_tensor" else f"typedef struct {name} {{")
        for f in fields:
            arr = f"[{'SW_MAX_RANK' if f.count == MAX_RANK else f.count}]" if f.count > 1 else ""
            doc = f" /* {f.doc} */" if f.doc else ""
            L.append(f"  {f.c_type} {f.name}{arr};{doc}")
        L.append("};" if name == "sw_tensor" else f"}} {name};")
        L.append("")
    # the layouts the compiler and the hosts assume, checked by the C compiler
    for name in STRUCTS:
        for ptr in (4, 8):
            lay = layout(name, ptr)
            cond = " && ".join([f"offsetof({name}, {f.name}) == {lay[f.name]}" for f in STRUCTS[name]]
                               + [f"sizeof({name}) == {lay['size']}"])
            L.append(f"#if UINTPTR_MAX == {'0xFFFFFFFFu' if ptr == 4 else '0xFFFFFFFFFFFFFFFFu'}")
            L.append(f'_Static_assert({cond}, "{name} layout ({ptr}-byte pointers)");')
            L.append("#endif")
    for family, reasons in LIB_REASONS.items():
        L.append(f"/* why a {family} kernel refused its input (detail[0]); see LIB_REASONS */")
        L += [f"#define SW_REASON_{family.upper()}_{name} {i} /* {text} */" for i, (name, text) in enumerate(reasons, 1)]
    L += ["", "typedef struct sw_context sw_context;", "",
          "#if defined(__wasm__)", "#define SW_EXPORT(name) __attribute__((export_name(#name)))", "#else",
          '#define SW_EXPORT(name) __attribute__((visibility("default")))', "#endif", ""]
    for e in EXPORTS:
        params = ", ".join(f"{TYPES[t][0]} {n}" for t, n in e.params) or "void"
        L.append(f"/* {e.doc} */")
        L.append(f"SW_EXPORT({e.name}) {TYPES[e.ret][0]} {e.name}({params});")
    L += ["", "#endif", ""]
    return "\n".join(L)


def python_module() -> str:
    L = [f'"""The module ABI for the Python host: {GENERATED}."""', "",
         f"FORMAT_VERSION = {FORMAT_VERSION!r}", f"MAX_RANK = {MAX_RANK}", f"MAX_THREADS = {MAX_THREADS}",
         f"SHARED_DIM_MARK = {SHARED_DIM_MARK!r}  # N@y: input y's own copy of a dim name N", "",
         "# name -> (code, bytes, kind: f float, i signed, u unsigned, b bool)", "DTYPES = {"]
    L += [f'    "{d.name}": ({d.code}, {d.size}, "{d.kind}"),' for d in DTYPES]
    L += ["}", "", "STATUS = {"]
    L += [f'    "{s.name}": {s.code},' for s in STATUSES]
    L += ["}", "STATUS_MEANING = {"]
    L += [f'    {s.code}: "{s.meaning}",' for s in STATUSES]
    L += ["}", "", "# name -> (result kind, parameter kinds); kinds: void, i32, i64, ptr", "EXPORTS = {"]
    for e in EXPORTS:
        kinds = ", ".join(f'"{TYPES[t][1]}"' for t, _ in e.params)
        L.append(f'    "{e.name}": ("{TYPES[e.ret][1]}", ({kinds}{"," if len(e.params) == 1 else ""})),')
    L += ["}", "", "# exports added after 3.0, with the format version that added them: a module of an older",
          "# minor version lacks them", "EXPORTS_SINCE = {"]
    L += [f'    "{e.name}": {e.since!r},' for e in EXPORTS if e.since != (3, 0)]
    L += ["}", "", "# byte offsets of sw_tensor's fields (and its size) by pointer size", "TENSOR_LAYOUT = {"]
    for ptr in (4, 8):
        L.append(f"    {ptr}: {layout('sw_tensor', ptr)!r},")
    L += ["}", ""]
    return "\n".join(L)


def _wasm_type(t: str) -> str:
    """The wasm32 value type of an export's parameter or result."""
    return "i64" if TYPES[t][1] == "i64" else "i32"


def js_module() -> str:
    def obj(items: dict) -> str:
        return "Object.freeze({ " + ", ".join(f"{k}: {v}" for k, v in items.items()) + " })"

    L = [f"/** The module ABI for the JS loader: {GENERATED}. */", "",
         f"export const FORMAT_VERSION = Object.freeze([{FORMAT_VERSION[0]}, {FORMAT_VERSION[1]}]);",
         f"export const MAX_RANK = {MAX_RANK};",
         f"export const SHARED_DIM_MARK = '{SHARED_DIM_MARK}';  // N@y: input y's own copy of a dim name N", "",
         "/** name -> code, bytes, kind (f float, i signed, u unsigned, b bool) and typed array. */",
         "export const DTYPES = Object.freeze({"]
    for d in DTYPES:
        L.append(f"  {d.name}: {obj({'code': d.code, 'size': d.size, 'kind': repr(d.kind), 'array': d.js_array})},")
    L += ["});", "", "export const STATUS = " + obj({s.name: s.code for s in STATUSES}) + ";",
          "export const STATUS_MEANING = " + obj({s.code: repr(s.meaning) for s in STATUSES}) + ";", "",
          "/** Every export the loader may call (besides `memory`). */",
          "export const EXPORTS = Object.freeze([" + ", ".join(f"'{e.name}'" for e in EXPORTS) + "]);", "",
          "/** Exports added after 3.0, with the format version that added them (older modules lack them). */",
          "export const EXPORTS_SINCE = Object.freeze({ "
          + ", ".join(f"{e.name}: [{e.since[0]}, {e.since[1]}]" for e in EXPORTS if e.since != (3, 0)) + " });", "",
          "/** Each export's wasm32 signature: [parameter types, result types]. */",
          "export const SIGNATURES = Object.freeze({"]
    for e in EXPORTS:
        params = ", ".join(f"'{_wasm_type(t)}'" for t, _ in e.params)
        result = "" if e.ret == "void" else f"'{_wasm_type(e.ret)}'"
        L.append(f"  {e.name}: [[{params}], [{result}]],")
    L += ["});", "",
          "/** Byte offsets of sw_tensor's fields on wasm32 (4-byte pointers). */",
          "export const TENSOR_LAYOUT = " + obj(layout("sw_tensor", 4)) + ";", ""]
    return "\n".join(L)


def markdown_tables() -> str:
    """The ABI's tables for docs/ABI.md."""
    L = [f"Format version {FORMAT_VERSION[0]}.{FORMAT_VERSION[1]}; at most {MAX_RANK} dims.", "",
         "| dtype | code | bytes | kind | C | JS |", "| --- | ---: | ---: | --- | --- | --- |"]
    kinds = {"f": "float", "i": "signed integer", "u": "unsigned integer", "b": "bool (0 or 1)", "s": "string (UTF-8)"}
    L += [f"| `{d.name}` | {d.code} | {d.size} | {kinds[d.kind]} | `{d.c_type}` | `{d.js_array}` |" for d in DTYPES]
    L += ["", "| status | name | meaning |", "| ---: | --- | --- |"]
    L += [f"| {s.code} | `SW_{s.name}` | {s.detail} |" for s in STATUSES]
    L += ["", "| export | meaning |", "| --- | --- |"]
    for e in EXPORTS:
        params = ", ".join(f"{TYPES[t][0]} {n}" for t, n in e.params) or "void"
        since = f" (format {e.since[0]}.{e.since[1]} and later)" if e.since != (3, 0) else ""
        L.append(f"| `{TYPES[e.ret][0]} {e.name}({params})` | {e.doc.replace('|', chr(92) + '|')}{since} |")
    for name in STRUCTS:
        L += ["", f"`{name}` (byte offsets on wasm32 / native):", "", "| field | type | wasm32 | native |",
              "| --- | --- | ---: | ---: |"]
        w, n = layout(name, 4), layout(name, 8)
        for f in STRUCTS[name]:
            arr = f"[{f.count}]" if f.count > 1 else ""
            L.append(f"| `{f.name}` | `{f.c_type}{arr}` | {w[f.name]} | {n[f.name]} |")
        L.append(f"| (size) | | {w['size']} | {n['size']} |")
    return "\n".join(L)


if __name__ == "__main__":
    from .generate import main

    sys.exit(main(sys.argv[1:]))
