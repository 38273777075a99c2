"""Quantization core ops: Quantize (linear quantization, and the requantization of int32
accumulators by a multiplier), Dequantize and DynamicQuantize (uint8, range from the data).

A scale's shape decides its granularity (:func:`quant_plan`): one element applies to the
whole tensor; a 1-D scale applies per slice along ``axis``; with ``block`` > 0 the scale
has the input's rank and ``ceil(n / block)`` elements along ``axis``, each covering
``block`` consecutive elements there. A zero point has the scale's shape, or one element.
Quantized dtypes are the 8- and 16-bit integers (and int32 to dequantize); float8, int4,
int2 and float4 have no dtype here, so they are refused where the frontend reads them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..codegen import quant as K
from ..codegen.quant import QuantPlan
from ..ir import dims as D
from ..ir.dtypes import (FLOAT4, FLOAT8, FLOAT16, FLOAT32, FLOAT64, INT8, INT16, INT32, SMALL_INTS, UINT8, UINT16, DType,
                         dtype_of_numpy)
from ..ir.graph import FOLD_LIMIT, WEIGHT_INPUTS, Value
from .base import CoreOp, InferContext

# float8/float4 quantize by a saturating cast; int4/int2 by rounding and clamping to their range
QUANTIZED = (UINT8, INT8, UINT16, INT16) + SMALL_INTS + FLOAT8 + (FLOAT4,)
DEQUANTIZABLE = QUANTIZED + (INT32,)
QUANTIZE_INPUTS = (FLOAT16, FLOAT32, INT32)
SCALES = (FLOAT16, FLOAT32)


def quant_plan(ctx: InferContext, x: Value, scale: Value, zp: Value | None, axis: int, block: int) -> QuantPlan:
    """How ``scale`` (and ``zp``) apply to ``x``, with the shape checks of its granularity."""
    if block < 0:
        ctx.fail(f"block_size {block} must not be negative")
    if scale.numel == 1:
        plan = QuantPlan("tensor", 0)
    elif block > 0:
        if scale.rank != x.rank:
            ctx.fail(f"blocked scale '{scale.name}' {D.fmt_shape(scale.shape)} must have the rank of "
                     f"'{x.name}' {D.fmt_shape(x.shape)}")
        a = ctx.axis(axis, x.rank)
        for k, (s, d) in enumerate(zip(scale.shape, x.shape)):
            want = D.ceildiv(d, block) if k == a else d
            ctx.require_eq(s, want, f"dim {k} of scale '{scale.name}' (blocks of {block} along axis {a} of "
                                    f"'{x.name}')")
        plan = QuantPlan("block", a, block)
    elif scale.rank == 1:
        a = ctx.axis(axis, x.rank)
        ctx.require_eq(scale.shape[0], x.shape[a], f"length of scale '{scale.name}' and dim {a} of '{x.name}'")
        plan = QuantPlan("axis", a)
    else:
        ctx.fail(f"scale '{scale.name}' {D.fmt_shape(scale.shape)} must have one element, be 1-D (per axis), "
                 f"or be blocked (with block_size)")
    if zp is not None and plan.mode == "tensor":
        ctx.require_eq(zp.numel, 1, f"elements of zero point '{zp.name}' (its scale has one)")
    if zp is None or plan.mode == "tensor" or zp.numel == 1:
        return QuantPlan(plan.mode, plan.axis, max(block, 1), zp is not None and zp.numel == 1)
    if zp.rank != scale.rank:
        ctx.fail(f"zero point '{zp.name}' {D.fmt_shape(zp.shape)} and scale '{scale.name}' "
                 f"{D.fmt_shape(scale.shape)} differ in shape")
    for k, (z, s) in enumerate(zip(zp.shape, scale.shape)):
        ctx.require_eq(z, s, f"dim {k} of zero point '{zp.name}' and of scale '{scale.name}'")
    return QuantPlan(plan.mode, plan.axis, max(block, 1))


def _inputs(node) -> list[str]:
    return [i for i in node.inputs[:3] if i]


@dataclass(frozen=True)
class Quantize(CoreOp):
    """y = saturate(rint(x / scale) + zero point) in dtype ``out``; with ``multiply``,
    ``x * scale`` (requantizing an int32 accumulator by a multiplier). Inputs: x, scale,
    [zero point] (of dtype ``out``). ``precision``: the dtype x and scale are converted to
    before dividing (ONNX's precision attribute); None: divide as numpy would."""

    out: DType
    axis: int = 1
    block: int = 0
    precision: DType | None = None
    multiply: bool = False
    saturate: bool = True  # float8 outputs: out of range saturates (else infinity or NaN)

    def infer(self, ctx: InferContext) -> None:
        x, scale, zp = ctx.input(0), ctx.input(1), ctx.optional(2)
        ctx.check_dtype(x, QUANTIZE_INPUTS)
        ctx.check_dtype(scale, QUANTIZE_INPUTS)
        if self.out not in QUANTIZED:
            ctx.fail(f"output dtype {self.out} is not one of {', '.join(d.name for d in QUANTIZED)}")
        if zp is not None and zp.dtype != self.out:
            ctx.fail(f"zero point '{zp.name}' has dtype {zp.dtype}; the output's is {self.out}")
        plan = quant_plan(ctx, x, scale, zp, self.axis, self.block)
        if self.precision is None:
            pre = dtype_of_numpy(np.result_type(x.dtype.np, scale.dtype.np, np.float16))
        else:
            pre = self.precision
        # true division: integers divide in float64
        compute = dtype_of_numpy(np.result_type(pre.np, np.float16))
        ctx.info = (plan, pre, compute, self.multiply, self.saturate)
        ctx.set_output(0, self.out, x.shape)

    def lower(self, lw, node) -> None:
        lw.run_kernel(K.build_quantize, node.info, _inputs(node), node.outputs[:1])


@dataclass(frozen=True)
class Dequantize(CoreOp):
    """y = (x - zero point) * scale, in dtype ``out`` (None: the scale's). Inputs: x,
    scale, [zero point] (of x's dtype). Computed in float32, or float64 for int32 x."""

    out: DType | None = None
    axis: int = 1
    block: int = 0

    def infer(self, ctx: InferContext) -> None:
        x, scale, zp = ctx.input(0), ctx.input(1), ctx.optional(2)
        ctx.check_dtype(x, DEQUANTIZABLE)
        ctx.check_dtype(scale, SCALES)
        out = self.out or scale.dtype
        if out not in SCALES:
            ctx.fail(f"output dtype {out} is not one of float32, float16")
        if zp is not None and zp.dtype != x.dtype:
            ctx.fail(f"zero point '{zp.name}' has dtype {zp.dtype}; x '{x.name}' has {x.dtype}")
        plan = quant_plan(ctx, x, scale, zp, self.axis, self.block)
        ctx.info = (plan, FLOAT64 if x.dtype == INT32 else FLOAT32)
        ctx.set_output(0, out, x.shape)

    def simplify(self, node, graph) -> list | None:
        """Constant 8- and 16-bit integers dequantized to float32 become a float32 constant,
        computed as the kernel computes it (the difference from the zero point, exact in
        float32, times the scale, one rounding; per tensor, axis or block): a QDQ model's
        weights, or onnxruntime's 4-bit MatMulNBits weights unpacked, which then reach
        Conv, MatMul and Gemm as constants their kernels pack at compile time. Natively only:
        a wasm32 module keeps them quantized (``Graph.keep_quantized_weights``), 4x fewer
        bytes to download (resnet18_int8_static 0.66 MB, 2.4 MB folded). (The importer
        folds all-constant nodes with onnx.reference, which has no DequantizeLinear before
        opset 19: before this, resnet18_int8_static dequantized every weight on every run,
        and its convolutions ran the slower kernels of run-time weights.)"""
        ins = [graph.values[i] for i in _inputs(node)]
        x, scale = ins[0], ins[1]
        zp = ins[2] if len(ins) > 2 else None
        plan, compute = node.info
        y = graph.values[node.outputs[0]]
        if (graph.keep_quantized_weights or any(v.const is None for v in ins)
                or x.dtype not in (INT8, UINT8, INT16, UINT16) or compute != FLOAT32
                or scale.dtype != FLOAT32 or y.dtype != FLOAT32 or y.const is not None):
            return None
        if x.const.size > FOLD_LIMIT and not _only_weights(graph, y.name):
            return None
        q = x.const.astype(np.float32)

        def spread(a: np.ndarray) -> np.ndarray:
            """A scale-shaped array (or one element) broadcast to x's elements, per the plan."""
            a = a.astype(np.float32)
            if a.size == 1 or plan.mode == "tensor":
                return a.reshape(())
            if plan.mode == "block":  # each block's value repeated over its elements
                return np.repeat(a, plan.block, axis=plan.axis).take(range(q.shape[plan.axis]), axis=plan.axis)
            return a.reshape([-1 if k == plan.axis else 1 for k in range(q.ndim)])
        if zp is not None:
            q = q - (zp.const.reshape(()).astype(np.float32) if plan.zp_scalar else spread(zp.const))
        y.const = np.asarray(q * spread(scale.const), dtype=np.float32)
        y.producer = None
        return []

    def lower(self, lw, node) -> None:
        lw.run_kernel(K.build_dequantize, node.info, _inputs(node), node.outputs[:1])


def _only_weights(graph, name: str) -> bool:
    """Whether every node that reads value ``name`` reads it only as weights (WEIGHT_INPUTS,
    which their kernels pack at compile time), as the importer folds weights of any size."""
    readers = [n for n in graph.all_nodes() if name in n.inputs]
    return all(n.inputs.count(name) == 1 and n.inputs.index(name) in WEIGHT_INPUTS.get(type(n.op).__name__, ())
               for n in readers) and name not in graph.outputs


@dataclass(frozen=True)
class DynamicQuantize(CoreOp):
    """uint8 quantization of float32 x over its own range (including 0). Outputs: y, scale
    (a float32 scalar), zero point (a uint8 scalar)."""

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, (FLOAT32,))
        ctx.set_output(0, UINT8, x.shape)
        ctx.set_output(1, FLOAT32, ())
        ctx.set_output(2, UINT8, ())

    def lower(self, lw, node) -> None:
        x = lw.value(node.inputs[0])
        names = list(node.outputs[:3]) + [""] * (3 - len(node.outputs[:3]))
        kinds = ((UINT8, x.shape), (FLOAT32, ()), (UINT8, ()))
        outs = [lw.alloc(name) if name else lw.scratch(f"unused output {k}", *kinds[k])
                for k, name in enumerate(names)]
        lw.call(K.build_dynamic_quantize, None, [lw.tensor(x.name)] + outs, outputs=3)


__all__ = ["Quantize", "Dequantize", "DynamicQuantize", "quant_plan", "QUANTIZED", "DEQUANTIZABLE"]
