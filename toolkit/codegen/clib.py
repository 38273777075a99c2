"""Kernels written in C (wasm_runtime/clib/sw_lib.h): strings, regular expressions, images.

The C libraries are one unit (wasm_runtime/clib, toolkit/link.py's ``CLIB`` source group)
whose whole interface is sw_lib.h; a :class:`CCall` is the only way compiled code reaches
them, and it names an sw_lib.h function. Each call site gets an LLVM kernel with the VM's
signature that calls the C function with the op's constant parameters (``params``, int64
words) and bytes (``blob``), both emitted as read-only globals of the kernel object; the
link resolves the C function from the C libraries' objects, and keeps none of them for a
model that makes no such call. The C side reads the tensors' descriptors itself (shapes, broadcasting), so the
wrapper only forwards.

A refusal comes back as SW_INVALID_INPUT with a reason code in detail 0:
:func:`reason_message` turns :data:`toolkit.abi.LIB_REASONS` into the message's choice
placeholder, which the VM fills in.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from llvmlite import ir

from .. import abi
from .kernel import I8, I32, I64, KERNEL_FN, PTR, KernelBuilder, constant_global, writes_scalars

# the kernel's first four parameters (not its part: a C function does all of its work), then its constants
LIB_FN = ir.FunctionType(I32, list(KERNEL_FN.args[:4]) + [PTR, PTR])


@dataclass(frozen=True)
class CCall:
    """Call C function ``fn`` (an sw_lib.h name) with these constants."""

    fn: str
    params: tuple[int, ...] = ()
    blob: bytes = b""


@writes_scalars
def build_ccall(kb: KernelBuilder, p: CCall, types: Sequence) -> None:
    """The wrapper: forward the VM's four arguments and the constants; return a failure's
    status (the C function wrote the details)."""
    module, b = kb.module, kb.b
    fn = module.globals.get(p.fn)
    if fn is None:
        fn = ir.Function(module, LIB_FN, name=p.fn)
    params = constant_global(module, f"{kb.fn.name}.params",
                             ir.Constant(ir.ArrayType(I64, max(len(p.params), 1)), list(p.params) or [0]), align=8)
    blob = constant_global(module, f"{kb.fn.name}.blob",
                           ir.Constant(ir.ArrayType(I8, max(len(p.blob), 1)), bytearray(p.blob or b"\0")), align=8)
    status = b.call(fn, list(kb.fn.args[:4]) + [params, blob])
    bad = kb.fn.append_basic_block("fail")
    ok = kb.fn.append_basic_block("ok")
    b.cbranch(b.icmp_signed("!=", status, ir.Constant(I32, 0)), bad, ok)
    b.position_at_end(bad)
    b.ret(status)
    b.position_at_end(ok)


def pack_strings(arr) -> np.ndarray:
    """A string constant as the weights hold it: the elements {offset, length} with offsets
    from the start of these bytes, then the UTF-8 bytes (the layout of an input buffer,
    wasm_runtime.string_buffer, at address 0); sw_text_unpack makes them addresses."""
    from wasm_runtime import string_buffer, utf8_parts

    return np.frombuffer(string_buffer(utf8_parts(np.asarray(arr, dtype=object), "a string constant"), 0),
                         np.uint8).copy()


def reason_message(family: str) -> str:
    """``{0?first|second|...}``: the reason a C kernel of ``family`` gave, by its code."""
    return "{0?" + "|".join(text for _, text in abi.LIB_REASONS[family]) + "}"
