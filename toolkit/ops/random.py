"""Random core ops: RandomUniform, RandomNormal (each also the ``*Like`` form, whose shape is
its input's) and Multinomial.

The generator is counter-based, so a draw depends only on the op's 64-bit *stream key* and
the draw's number, never on the target (wasm32 and native give the same bits) or on the
order in which elements are computed. Draw ``n`` of a stream is splitmix64's output at
position ``n``: ``mix64(key + (n + 1) * 0x9E3779B97F4A7C15)`` (mod 2**64), where ``mix64``
is splitmix64's finalizer (:func:`mix64`); its top 53 bits make a uniform double in [0, 1).
Element ``i`` of a RandomUniform takes draw ``i``; of a RandomNormal draws ``2i`` and
``2i + 1`` (Box-Muller, :mod:`toolkit.codegen.random`); sample ``j`` of a Multinomial's row
``r`` takes draw ``r * sample_size + j``.

The key (:func:`stream_key`) comes from the ``seed`` attribute when there is one, so every
run of the module gives the same output, as ONNX asks of a seed. Without a seed it comes
from the node's name: two unseeded nodes draw different numbers, but **each run repeats
the previous run's numbers**. The VM keeps no state from one run to the next (its shape
heap is reset at every run) and takes no entropy from the host, so there is nothing a
fresh draw could come from. Other numbers need another seed attribute, so another
compilation (ONNX has no seed input). For the same reason a node in a Loop or Scan body
draws the same numbers at every iteration.

Values are computed in float64 and rounded once to the output dtype (float16, bfloat16,
float32 or float64). A uniform value that rounding would put outside [low, high) is
clamped to the nearest value of the dtype inside it (:func:`representable_range`).
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np

from ..codegen import random as K
from ..ir import dims as D
from ..ir.dtypes import ALL, FLOAT64, FLOATS, INDEX, DType
from .base import CoreOp, InferContext

_MASK = (1 << 64) - 1
# an unseeded key hashes the node's name behind this prefix (unrelated to any seed's key)
_UNSEEDED = b"symwasm-unseeded:"


def mix64(z: int) -> int:
    """splitmix64's finalizer (Stafford's variant 13) on a 64-bit unsigned integer."""
    z = ((z ^ (z >> 30)) * K.MIX[0]) & _MASK
    z = ((z ^ (z >> 27)) * K.MIX[1]) & _MASK
    return z ^ (z >> 31)


def stream_key(seed: float | None, node_name: str) -> int:
    """The stream key (as a signed int64, how the VM's shape heap holds it): ``mix64`` of the
    float64 bits of ``seed``, or without a seed of the 64-bit FNV-1a hash of the node's name."""
    if seed is not None:
        basis = struct.unpack("<Q", struct.pack("<d", float(seed)))[0]
    else:
        basis = 0xCBF29CE484222325
        for byte in _UNSEEDED + node_name.encode():
            basis = ((basis ^ byte) * 0x100000001B3) & _MASK
    key = mix64(basis)
    return key - (1 << 64) if key >= 1 << 63 else key


def representable_range(dtype: DType, low: float, high: float) -> tuple[float, float] | None:
    """(the smallest ``dtype`` value >= low, the largest < high): where a uniform draw is
    clamped after rounding. ``low == high`` gives ``low`` rounded, twice (numpy's ``low +
    (high - low) * u``); None when no value of the dtype lies in [low, high)."""
    t = dtype.np
    if low == high:
        return float(t(low)), float(t(low))
    bottom, top = t(low), t(high)
    if float(bottom) < low:
        bottom = np.nextafter(bottom, t(math.inf))
    if float(top) >= high:
        top = np.nextafter(top, t(-math.inf))
    if float(bottom) > float(top):
        return None
    return float(bottom), float(top)


def _output_shape(ctx: InferContext, shape: tuple[int, ...] | None, dtype: DType) -> tuple[D.Dim, ...]:
    """The output's shape (input 0's for the Like forms), after checking the dtype."""
    if dtype not in FLOATS:
        ctx.fail(f"dtype {dtype} is not a float type; {ctx.node.source} produces "
                 f"{', '.join(d.name for d in FLOATS)}")
    if shape is not None:
        if ctx.n_inputs:
            ctx.fail(f"takes no inputs when given a shape, got {ctx.n_inputs}")
        if any(d < 0 for d in shape):
            ctx.fail(f"shape {list(shape)} has a negative dim")
        return shape
    x = ctx.input(0)
    ctx.check_dtype(x, ALL)
    return tuple(x.shape)


@dataclass(frozen=True)
class RandomUniform(CoreOp):
    """Uniform values in [low, high). ``shape`` None: input 0's shape (RandomUniformLike;
    only its shape is read). ``key``: the stream key (:func:`stream_key`)."""

    dtype: DType
    low: float
    high: float
    key: int
    shape: tuple[int, ...] | None = None

    def infer(self, ctx: InferContext) -> None:
        shape = _output_shape(ctx, self.shape, self.dtype)
        if not (math.isfinite(self.low) and math.isfinite(self.high) and math.isfinite(self.high - self.low)):
            ctx.fail(f"low {self.low} and high {self.high} must be finite and their difference too")
        if self.low > self.high:
            ctx.fail(f"low {self.low} is greater than high {self.high}")
        bounds = representable_range(self.dtype, self.low, self.high)
        if bounds is None:
            ctx.fail(f"no {self.dtype} value lies in [low, high) = [{self.low}, {self.high})")
        ctx.info = bounds
        ctx.set_output(0, self.dtype, shape)

    def lower(self, lw, node) -> None:
        bottom, top = node.info
        lw.call(K.build_uniform, (self.low, self.high - self.low, bottom, top), [lw.alloc(node.outputs[0])],
                [lw.const_slot(self.key)])


@dataclass(frozen=True)
class RandomNormal(CoreOp):
    """Normal values of mean ``mean`` and standard deviation ``scale``. ``shape`` None:
    input 0's shape (RandomNormalLike). ``key``: the stream key."""

    dtype: DType
    mean: float
    scale: float
    key: int
    shape: tuple[int, ...] | None = None

    def infer(self, ctx: InferContext) -> None:
        ctx.set_output(0, self.dtype, _output_shape(ctx, self.shape, self.dtype))

    def lower(self, lw, node) -> None:
        lw.call(K.build_normal, (self.mean, self.scale), [lw.alloc(node.outputs[0])], [lw.const_slot(self.key)])


@dataclass(frozen=True)
class Multinomial(CoreOp):
    """``sample_size`` class indices per row of input 0 (batch, classes), drawn with the
    probabilities softmax(row): the input holds unnormalized log-probabilities. A class of
    probability 0 (a logit of -inf) is never drawn. ``key``: the stream key."""

    dtype: DType
    sample_size: int
    key: int

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, FLOATS)
        if self.dtype not in INDEX:
            ctx.fail(f"dtype {self.dtype} is not one of int32, int64")
        if self.sample_size < 0:
            ctx.fail(f"sample_size {self.sample_size} is negative")
        if x.rank != 2:
            ctx.fail(f"input '{x.name}' has shape {D.fmt_shape(x.shape)}; Multinomial takes (batch, classes)")
        if self.sample_size > 0:
            ctx.require_le(1, x.shape[1], f"the number of classes (dim 1 of input '{x.name}')")
        ctx.set_output(0, self.dtype, (x.shape[0], self.sample_size))

    def lower(self, lw, node) -> None:
        x = lw.value(node.inputs[0])
        cdf = lw.scratch("cumulative probabilities", FLOAT64, (x.shape[1],))
        lw.call(K.build_multinomial, None, [lw.tensor(x.name), cdf, lw.alloc(node.outputs[0])],
                [lw.const_slot(self.key)], outputs=2)


__all__ = ["RandomUniform", "RandomNormal", "Multinomial", "stream_key", "mix64", "representable_range"]
