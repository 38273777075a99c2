"""Kernels of the random ops: RandomUniform, RandomNormal and Multinomial.

Each kernel takes the stream key as its one scalar and computes draw ``n`` as
``mix64(key + (n + 1) * GAMMA)``: splitmix64 made counter-based (see
:mod:`toolkit.ops.random`). Only integer arithmetic (which wraps the same everywhere) and
IEEE float64 operations from :mod:`.mathlib` (no fma contraction, no libm) touch a draw, so
both targets give identical bits, and every element is computed on its own, so no result
depends on evaluation order or vectorization.

- uniform: ``u = (draw >> 11) * 2**-53`` in [0, 1), then ``low + (high - low) * u``,
  rounded to the dtype and clamped into [low, high) (rounding may reach ``high``);
- normal: Box-Muller's cosine branch on draws ``2i`` and ``2i + 1``:
  ``mean + scale * sqrt(-2 log u1) * cos(2 pi u2)`` with u1 in (0, 1];
- multinomial: per row, the running sums of ``exp(x - max(x))`` (a scratch vector), then per
  sample ``t = u * total`` and the class is how many running sums are ``<= t`` (the first
  whose sum exceeds t), never past the last class of non-zero probability. A row whose
  largest logit is NaN or infinite has no probabilities (they are NaN) and draws class 0.
"""
from __future__ import annotations

import math
from typing import Sequence

from llvmlite import ir

from ..ir.dims import Dim
from ..ir.dtypes import FLOAT64, DType
from . import mathlib
from .kernel import F64, I64, KernelBuilder, from_compute, i64, intrinsic, stored_constant, to_compute
from .scalar import convert

TensorType = tuple[DType, Sequence[Dim]]

GAMMA = 0x9E3779B97F4A7C15  # splitmix64's increment: 2**64 / the golden ratio, odd
MIX = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB)  # its finalizer's multipliers (Stafford's variant 13)


def _u64(v: int) -> ir.Constant:
    """A 64-bit pattern as an i64 constant (llvmlite takes it signed)."""
    return i64(v - (1 << 64) if v >= 1 << 63 else v)


def _f64(v: float) -> ir.Constant:
    return ir.Constant(F64, v)


def draw(b: ir.IRBuilder, key: ir.Value, n: ir.Value) -> ir.Value:
    """Draw ``n`` (i64) of the stream ``key``: 64 random bits."""
    z = b.add(key, b.mul(b.add(n, i64(1)), _u64(GAMMA)))
    z = b.mul(b.xor(z, b.lshr(z, i64(30))), _u64(MIX[0]))
    z = b.mul(b.xor(z, b.lshr(z, i64(27))), _u64(MIX[1]))
    return b.xor(z, b.lshr(z, i64(31)))


def unit(b: ir.IRBuilder, bits: ir.Value, open_zero: bool = False) -> ir.Value:
    """The top 53 bits of a draw as a double in [0, 1), or in (0, 1] with ``open_zero``
    (a logarithm's argument). Exact: a 53-bit integer times a power of two."""
    k = b.lshr(bits, i64(11))
    if open_zero:
        k = b.add(k, i64(1))
    return b.fmul(b.sitofp(k, F64), _f64(2.0 ** -53))


def build_uniform(kb: KernelBuilder, params: tuple[float, float, float, float], types: Sequence[TensorType]) -> None:
    """``params``: (low, high - low, bottom, top), bottom and top the dtype's smallest value
    >= low and largest < high. Tensors: out. Scalars: the stream key."""
    low, span, bottom, top = params
    b = kb.b
    y = kb.tensor(0, *types[0])
    key = kb.scalar(0)
    ct = y.ctype
    with kb.loop(y.numel(), name="el") as i:
        v = b.fadd(_f64(low), b.fmul(_f64(span), unit(b, draw(b, key, i))))
        raw = from_compute(b, y.dtype, convert(b, v, FLOAT64, y.dtype))
        back = to_compute(b, y.dtype, raw)  # the stored value, to compare with the bounds
        raw = b.select(b.fcmp_ordered(">", back, ir.Constant(ct, top)), stored_constant(y.dtype, top), raw)
        raw = b.select(b.fcmp_ordered("<", back, ir.Constant(ct, bottom)), stored_constant(y.dtype, bottom), raw)
        y.store_raw(i, raw)


def build_normal(kb: KernelBuilder, params: tuple[float, float], types: Sequence[TensorType]) -> None:
    """``params``: (mean, scale). Tensors: out. Scalars: the stream key."""
    mean, scale = params
    b = kb.b
    y = kb.tensor(0, *types[0])
    key = kb.scalar(0)
    with kb.loop(y.numel(), name="el") as i:
        first = b.mul(i, i64(2))
        u1 = unit(b, draw(b, key, first), open_zero=True)
        u2 = unit(b, draw(b, key, b.add(first, i64(1))))
        radius = intrinsic(b, "llvm.sqrt", b.fmul(_f64(-2.0), mathlib.log(b, u1)))
        z = b.fmul(radius, mathlib.cos(b, b.fmul(_f64(math.tau), u2)))
        y.store(i, convert(b, b.fadd(_f64(mean), b.fmul(_f64(scale), z)), FLOAT64, y.dtype))


def build_multinomial(kb: KernelBuilder, params: None, types: Sequence[TensorType]) -> None:
    """Tensors: x (batch, classes) of logits, cdf (classes,) float64 scratch, out (batch,
    samples) int32 or int64. Scalars: the stream key."""
    b = kb.b
    x = kb.tensor(0, *types[0])
    cdf = kb.tensor(1, *types[1])
    y = kb.tensor(2, *types[2])
    key = kb.scalar(0)
    classes, samples = x.dim(1), y.dim(1)

    def logit(row: ir.Value, k: ir.Value) -> ir.Value:
        return convert(b, x.load(kb.add(kb.mul(row, classes), k)), x.dtype, FLOAT64)

    with kb.loop(x.dim(0), name="row") as r:
        top = kb.accumulate(classes, _f64(-math.inf), lambda acc, k: intrinsic(b, "llvm.maximum", acc, logit(r, k)),
                            name="max")

        def running(k: ir.Value, vals: list[ir.Value]) -> list[ir.Value]:
            p = mathlib.exp(b, b.fsub(logit(r, k), top))
            total = b.fadd(vals[0], p)
            cdf.store(k, total)
            return [total, b.select(b.fcmp_ordered(">", p, _f64(0.0)), k, vals[1])]

        total, last = kb.carry(i64(0), classes, [_f64(0.0), i64(0)], running, name="cdf")
        with kb.loop(samples, name="sample") as j:
            at = kb.add(kb.mul(r, samples), j)
            t = b.fmul(unit(b, draw(b, key, at)), total)
            below = kb.accumulate(classes, i64(0),
                                  lambda n, k: b.add(n, b.zext(b.fcmp_ordered("<=", cdf.load(k), t), I64)),
                                  name="find")
            pick = b.select(b.icmp_signed(">", below, last), last, below)
            y.store(at, pick if y.elem == I64 else b.trunc(pick, y.elem))
