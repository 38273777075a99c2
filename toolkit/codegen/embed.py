"""Embeds the VM program, constants and metadata into the kernels' LLVM module as the
global ``sw_model`` (the ``sw_program`` struct of wasm_runtime/vm/sw_vm.h)."""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from .kernel import I8, I32, I64, MAX_RANK, PTR, TENSOR
from ..ir.graph import dtype_of_numpy

# sw_program's fields, in order
PROGRAM = ir.LiteralStructType([
    PTR, I32, I32,  # words, nwords, nregs
    PTR, I32,  # heap_init, nheap
    PTR, PTR, I32,  # strings, string_offsets, nstrings
    PTR, I32,  # consts, nconsts
    PTR, I32,  # kernels, nkernels
    PTR, I32,  # inputs, ninputs
    PTR, I32,  # outputs, noutputs
    PTR, I32,  # metadata, metadata_len
    I64,  # arena_size
])

CONST_ALIGN = 64


def _global(module: ir.Module, name: str, value: ir.Constant, align: int | None = None) -> ir.GlobalVariable:
    g = ir.GlobalVariable(module, value.type, name=name)
    g.initializer = value
    g.global_constant = True
    g.linkage = "internal"
    if align:
        g.align = align
    return g


def _array(t: ir.Type, values) -> ir.Constant:
    values = list(values)
    return ir.Constant(ir.ArrayType(t, len(values)), [ir.Constant(t, int(v)) for v in values])


def _bytes(data: bytes) -> ir.Constant:
    return ir.Constant(ir.ArrayType(I8, len(data)), bytearray(data))


def embed_program(module: ir.Module, prog, metadata: bytes) -> int:
    """Add ``sw_model`` to ``module``. Returns the bytes of constant tensor data embedded."""
    words = _global(module, "sw_words", _array(I32, prog.words))
    heap = _global(module, "sw_heap_init", _array(I64, prog.heap_init or [0]), align=8)
    blob = bytearray()
    offsets = []
    for s in prog.strings:
        offsets.append(len(blob))
        blob += s.encode() + b"\0"
    strings = _global(module, "sw_strings", _bytes(bytes(blob) or b"\0"))
    string_offsets = _global(module, "sw_string_offsets", _array(I32, offsets or [0]))

    descs = []
    weight_bytes = 0
    for i, (name, arr) in enumerate(prog.consts):
        dt = dtype_of_numpy(arr.dtype)
        raw = np.ascontiguousarray(arr).tobytes() or b"\0"
        weight_bytes += len(raw)
        data = _global(module, f"sw_const{i}", _bytes(raw), align=CONST_ALIGN)
        shape = list(arr.shape) + [0] * (MAX_RANK - arr.ndim)
        descs.append(ir.Constant(TENSOR, [data, ir.Constant(I32, dt.code), ir.Constant(I32, arr.ndim),
                                          _array(I64, shape)]))
    consts = _global(module, "sw_consts", ir.Constant(ir.ArrayType(TENSOR, len(descs)), descs), align=8)

    fns = [module.get_global(k) for k in prog.kernels]
    kernels = _global(module, "sw_kernels", ir.Constant(ir.ArrayType(PTR, len(fns)), fns))
    inputs = _global(module, "sw_inputs", _array(I32, [x for t in prog.inputs for x in t] or [0]))
    outputs = _global(module, "sw_outputs", _array(I32, prog.outputs or [0]))
    meta = _global(module, "sw_metadata_json", _bytes(metadata + b"\0"))

    g = ir.GlobalVariable(module, PROGRAM, name="sw_model")
    g.global_constant = True
    g.initializer = ir.Constant(PROGRAM, [
        words, ir.Constant(I32, len(prog.words)), ir.Constant(I32, len(prog.reg_names)),
        heap, ir.Constant(I32, len(prog.heap_init)),
        strings, string_offsets, ir.Constant(I32, len(prog.strings)),
        consts, ir.Constant(I32, len(descs)),
        kernels, ir.Constant(I32, len(fns)),
        inputs, ir.Constant(I32, len(prog.inputs)),
        outputs, ir.Constant(I32, len(prog.outputs)),
        meta, ir.Constant(I32, len(metadata)),
        ir.Constant(I64, prog.arena_size),
    ])
    return weight_bytes
