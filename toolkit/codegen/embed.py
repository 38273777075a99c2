"""Embeds the VM program into the kernels' LLVM module as the global ``sw_model`` (the
``sw_program`` struct of the ABI), and lays out the constant tensors' bytes as one blob.

The blob does not go through the LLVM module: its bytes become their own object
(``toolkit.link``), which defines the symbol ``sw_weights``; the constant descriptors here
point into it. So compile time and memory do not grow with the text form of the weights.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from .. import abi
from ..ir.dtypes import dtype_of_numpy
from .kernel import I8, I32, I64, MAX_RANK, PTR, TENSOR, constant_global, struct_type

PROGRAM = struct_type("sw_program")
WEIGHTS_SYMBOL = "sw_weights"
CONST_ALIGN = 64


@dataclass
class Encoded:
    """A program as the module embeds it."""

    words: list[int]
    strings: list[str]
    heap_init: list[int]
    arena_size: int
    kernels: list[str]
    kernel_info: list[int]  # per kernel: abi.KERNEL_INFO
    kernel_sigs: list[int]  # the kernels' signatures, one after another
    inputs: list[int]  # per input: dtype, rank, name string
    outputs: list[int]  # per output: name string
    consts: list[tuple[str, np.ndarray]]
    reg_names: list[str]
    slot_names: dict[int, str]
    blocks: dict[int, str]  # pc -> label


_FNV_OFFSET, _FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3


def checksum(enc: Encoded) -> int:
    """FNV-1a (64-bit) of the program tables, as the VM recomputes it before running: the
    counts, words, heap, strings, kernel tables, inputs, outputs, constant descriptors (not
    their data) and the arena size. It catches a corrupt file, not a deliberate forger."""
    out = bytearray()

    def i32(values) -> None:
        out.extend(np.asarray(list(values), dtype="<i4").tobytes())

    def i64(values) -> None:
        out.extend(np.asarray(list(values), dtype="<i8").tobytes())

    i32([len(enc.words), len(enc.reg_names), len(enc.heap_init), len(enc.strings), len(enc.kernels),
         len(enc.kernel_sigs), len(enc.inputs) // 3, len(enc.outputs), len(enc.consts)])
    i32(enc.words)
    i64(enc.heap_init)
    for s in enc.strings:
        out.extend(s.encode() + b"\0")
    i32(enc.kernel_info)
    i32(enc.kernel_sigs)
    i32(enc.inputs)
    i32(enc.outputs)
    for _, arr in enc.consts:
        i32([dtype_of_numpy(arr.dtype).code, arr.ndim])
        i64(list(arr.shape) + [0] * (MAX_RANK - arr.ndim))
    i64([enc.arena_size])
    h = _FNV_OFFSET
    for b in out:
        h = ((h ^ b) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h - (1 << 64) if h >= 1 << 63 else h  # as the int64 the struct holds


def _array(t: ir.Type, values) -> ir.Constant:
    values = list(values)
    return ir.Constant(ir.ArrayType(t, len(values)), [ir.Constant(t, int(v)) for v in values])


def _bytes(data: bytes) -> ir.Constant:
    return ir.Constant(ir.ArrayType(I8, len(data)), bytearray(data))


def weights_blob(consts) -> tuple[bytes, list[int]]:
    """The constants' bytes, each at a CONST_ALIGN-aligned offset, and those offsets."""
    blob = bytearray()
    offsets = []
    for _, arr in consts:
        blob += b"\0" * (-len(blob) % CONST_ALIGN)
        offsets.append(len(blob))
        blob += np.ascontiguousarray(arr).tobytes()
    return bytes(blob), offsets


def embed_program(module: ir.Module, prog: Encoded, metadata: bytes) -> bytes:
    """Add ``sw_model`` to ``module``. Returns the weights blob that must be linked beside it
    as ``sw_weights`` (see :func:`toolkit.link.weights_object`)."""
    words = constant_global(module, "sw_words", _array(I32, prog.words))
    heap = constant_global(module, "sw_heap_init", _array(I64, prog.heap_init or [0]), align=8)
    blob = bytearray()
    offsets = []
    for s in prog.strings:
        offsets.append(len(blob))
        blob += s.encode() + b"\0"
    strings = constant_global(module, "sw_strings", _bytes(bytes(blob) or b"\0"))
    string_offsets = constant_global(module, "sw_string_offsets", _array(I32, offsets or [0]))

    weights, at = weights_blob(prog.consts)
    base = ir.GlobalVariable(module, ir.ArrayType(I8, 0), WEIGHTS_SYMBOL)
    base.global_constant = True
    descs = []
    for (name, arr), offset in zip(prog.consts, at):
        dt = dtype_of_numpy(arr.dtype)
        data = base.gep([ir.Constant(I32, 0), ir.Constant(I64, offset)])
        shape = list(arr.shape) + [0] * (MAX_RANK - arr.ndim)
        descs.append(ir.Constant(TENSOR, [data, ir.Constant(I32, dt.code), ir.Constant(I32, arr.ndim),
                                          _array(I64, shape)]))
    consts = constant_global(module, "sw_consts", ir.Constant(ir.ArrayType(TENSOR, len(descs)), descs), align=8)

    fns = [module.get_global(k) for k in prog.kernels]
    kernels = constant_global(module, "sw_kernels", ir.Constant(ir.ArrayType(PTR, len(fns)), fns))
    info = constant_global(module, "sw_kernel_info", _array(I32, prog.kernel_info or [0]))
    sigs = constant_global(module, "sw_kernel_sigs", _array(I32, prog.kernel_sigs or [0]))
    inputs = constant_global(module, "sw_inputs", _array(I32, prog.inputs or [0]))
    outputs = constant_global(module, "sw_outputs", _array(I32, prog.outputs or [0]))
    meta = constant_global(module, "sw_metadata_json", _bytes(metadata + b"\0"))

    fields = {
        "words": words, "nwords": len(prog.words), "nregs": len(prog.reg_names),
        "heap_init": heap, "nheap": len(prog.heap_init),
        "strings": strings, "string_offsets": string_offsets, "nstrings": len(prog.strings),
        "consts": consts, "nconsts": len(descs),
        "kernels": kernels, "kernel_info": info, "nkernels": len(fns),
        "inputs": inputs, "ninputs": len(prog.inputs) // 3,
        "outputs": outputs, "noutputs": len(prog.outputs),
        "metadata": meta, "metadata_len": len(metadata),
        "arena_size": prog.arena_size,
        "kernel_sigs": sigs, "nkernel_sigs": len(prog.kernel_sigs), "checksum": checksum(prog),
    }
    values = []
    for f, t in zip(abi.STRUCTS["sw_program"], PROGRAM.elements):
        v = fields[f.name]
        values.append(v if isinstance(v, ir.GlobalVariable) else ir.Constant(t, v))
    g = ir.GlobalVariable(module, PROGRAM, name="sw_model")
    g.global_constant = True
    g.initializer = ir.Constant(PROGRAM, values)
    return weights
