"""Neural-network ops: MatMul, Gemm, Softmax, LayerNormalization.

MatMul follows numpy (1-D operands, broadcast batch dims); the shared inner dim is proved
equal at compile time or checked at run time, naming both dims. Gemm with transB runs over
B transposed (at compile time when B is a constant). LayerNormalization applies Scale and B
in its own kernel when they index like one normalized row, and otherwise with the
elementwise kernels' broadcasting.
"""
from __future__ import annotations

from typing import Sequence

from llvmlite import ir

from ....codegen import elementwise as E
from ....codegen import linalg as L
from ....codegen import reduce as R
from ....ir import dims as D
from ....ir.dims import Dim
from ....ir.graph import FLOAT32, Value
from ..infer import NUMERIC, InferContext, check_dtype


def _unidirectional(ctx: InferContext, v: Value, shape: Sequence[Dim], what: str) -> None:
    """``v`` broadcasts to ``shape`` without changing it."""
    if v.rank > len(shape):
        ctx.fail(f"{what} '{v.name}' {D.fmt_shape(v.shape)} has more dims than {D.fmt_shape(shape)}")
    for axis, d in enumerate(v.shape):
        out = shape[len(shape) - v.rank + axis]
        ctx.require_bcast(d, out, f"{what} '{v.name}' dim {axis}")


# ----------------------------------------------------------------------------- MatMul


def infer_matmul(ctx: InferContext) -> None:
    a, b = ctx.input(0), ctx.input(1)
    for v in (a, b):
        check_dtype(ctx, v, NUMERIC)
        if v.rank == 0:
            ctx.fail(f"input '{v.name}' is a scalar; MatMul needs at least one dim")
    if a.dtype != b.dtype:
        ctx.fail(f"inputs '{a.name}' ({a.dtype}) and '{b.name}' ({b.dtype}) differ in dtype")
    kb_axis = max(b.rank - 2, 0)
    ctx.require_eq(a.shape[-1], b.shape[kb_axis],
                   f"inner dims ('{a.name}' dim {a.rank - 1} vs '{b.name}' dim {kb_axis})")
    # batch dims of 1-D and 2-D operands are empty; naming them after the operands keeps
    # broadcast messages pointing at the right input and dim
    batch = ctx.broadcast([Value(a.name, a.dtype, a.shape[:-2]), Value(b.name, b.dtype, b.shape[:-2])])
    rows = a.shape[-2:-1]
    cols = b.shape[-1:] if b.rank >= 2 else ()
    ctx.set_output(0, a.dtype, batch + rows + cols)


def lower_matmul(lw, node) -> None:
    a, b, out = (lw.value(n) for n in (node.inputs[0], node.inputs[1], node.outputs[0]))
    lw.run_kernel(("matmul", a.dtype.name, a.shape, b.shape, out.shape),
               lambda kb: L.build_matmul(kb, a.dtype, a.shape, b.shape, out.shape),
               [a.name, b.name], [out.name])


# ----------------------------------------------------------------------------- Gemm


def infer_gemm(ctx: InferContext) -> None:
    a, b = ctx.input(0), ctx.input(1)
    for v in (a, b):
        check_dtype(ctx, v, (FLOAT32,))
        if v.rank != 2:
            ctx.fail(f"input '{v.name}' has rank {v.rank}; Gemm takes matrices")
    ta, tb = bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0))
    m, k = a.shape[::-1] if ta else a.shape
    k2, n = b.shape[::-1] if tb else b.shape
    ctx.require_eq(k, k2, f"inner dims ('{a.name}' dim {0 if ta else 1} vs '{b.name}' dim {1 if tb else 0})")
    c = ctx.optional(2)
    if c is not None:
        check_dtype(ctx, c, (FLOAT32,))
        _unidirectional(ctx, c, (m, n), "C")
    ctx.set_output(0, FLOAT32, (m, n))


def lower_gemm(lw, node) -> None:
    a, b, out = (lw.value(n) for n in (node.inputs[0], node.inputs[1], node.outputs[0]))
    alpha, beta = float(node.attrs.get("alpha", 1.0)), float(node.attrs.get("beta", 1.0))
    ta, tb = bool(node.attrs.get("transA", 0)), bool(node.attrs.get("transB", 0))
    # like onnx.reference, beta == 0 ignores C entirely (NaN or inf in C included)
    c = lw.value(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] and beta != 0 else None
    # with transB the kernel wants B's rows contiguous along N (see toolkit.codegen.linalg):
    # a constant B (weights) is transposed now, any other is staged in a scratch buffer
    if tb and b.const is not None:
        b, tb = lw.value(lw.constant(f"{b.name}^T", b.const.T)), False
    ins = [a.name, b.name] + ([c.name] if c is not None else [])
    c_shape = None if c is None else c.shape
    key = ("gemm", "f32", a.shape, b.shape, c_shape, out.shape, ta, tb, alpha, beta)
    k = lw.kernel(key, lambda kb: L.build_gemm(kb, a.shape, b.shape, c_shape, out.shape, ta, tb, alpha, beta))
    regs = [lw.tensor(i) for i in ins]
    scratch = [lw.scratch("transposed B", FLOAT32, b.shape[::-1])] if tb else []
    lw.call(k, regs + scratch + [lw.alloc(out.name)])
    for reg in scratch:
        lw.free(reg)


# ----------------------------------------------------------------------------- Softmax


def infer_softmax(ctx: InferContext) -> None:
    x = ctx.input(0)
    check_dtype(ctx, x, (FLOAT32,))
    ctx.axis(int(ctx.attr("axis", -1)), x.rank)
    ctx.set_output(0, x.dtype, x.shape)


def lower_softmax(lw, node) -> None:
    x = lw.value(node.inputs[0])
    axis = int(node.attrs.get("axis", -1)) % x.rank
    lw.run_kernel(("softmax", "f32", x.shape, axis), lambda kb: R.build_softmax(kb, x.shape, axis),
               [x.name], [node.outputs[0]])


# ----------------------------------------------------------------------------- LayerNormalization


def _stat_outputs(node) -> list[str]:
    """Mean and InvStdDev, '' where not requested."""
    return [node.outputs[i] if i < len(node.outputs) else "" for i in (1, 2)]


def infer_layer_norm(ctx: InferContext) -> None:
    x = ctx.input(0)
    check_dtype(ctx, x, (FLOAT32,))
    if int(ctx.attr("stash_type", 1)) != 1:
        ctx.fail(f"stash_type {ctx.attr('stash_type')} is not supported (only 1, float32)")
    axis = ctx.axis(int(ctx.attr("axis", -1)), x.rank)
    for what, p in (("Scale", ctx.input(1)), ("B", ctx.optional(2))):
        if p is not None:
            check_dtype(ctx, p, (FLOAT32,))
            _unidirectional(ctx, p, x.shape, what)
    ctx.set_output(0, FLOAT32, x.shape)
    stat = tuple(x.shape[:axis]) + (1,) * (x.rank - axis)
    ctx.set_output(1, FLOAT32, stat)
    ctx.set_output(2, FLOAT32, stat)


def _indexed_like_row(p: Value, shape: Sequence[Dim], axis: int) -> bool:
    """Whether ``p`` broadcast to ``shape`` repeats one normalized row exactly, so element
    ``j`` of a row reads ``p[j]``."""
    full = (1,) * (len(shape) - p.rank) + tuple(p.shape)
    return all(d == 1 for d in full[:axis]) and all(d == s for d, s in zip(full[axis:], shape[axis:]))


def lower_layer_norm(lw, node) -> None:
    x = lw.value(node.inputs[0])
    axis = int(node.attrs.get("axis", -1)) % x.rank
    eps = float(node.attrs.get("epsilon", 1e-5))
    params = [lw.value(i) for i in node.inputs[1:3] if i]
    stats = _stat_outputs(node)
    fused = all(_indexed_like_row(p, x.shape, axis) for p in params)
    fused_params = params if fused else []
    shapes = tuple(p.shape for p in fused_params)
    flags = tuple(bool(s) for s in stats)
    lw.run_kernel(("layernorm", "f32", x.shape, axis, eps, shapes, flags),
               lambda kb: R.build_layer_norm(kb, x.shape, axis, eps, shapes, flags),
               [x.name] + [p.name for p in fused_params], [node.outputs[0]] + [s for s in stats if s])
    if not fused:
        # Scale or B varies along the outer dims or repeats within a row: y = y * scale + b
        # in place, with the elementwise kernels' general broadcasting
        y = lw.value(node.outputs[0])
        ins = [y] + params
        k = lw.kernel(("layernorm_affine", "f32", tuple(v.shape for v in ins)),
                      lambda kb: E.build_elementwise(kb, [(FLOAT32, v.shape) for v in ins], (FLOAT32, y.shape),
                                                     _affine))
        yreg = lw.tensor(y.name)
        lw.call(k, [yreg] + [lw.tensor(p.name) for p in params] + [yreg])


def _affine(b: ir.IRBuilder, v: list[ir.Value]) -> ir.Value:
    """normalized * scale (+ bias)"""
    y = b.fmul(v[0], v[1])
    return b.fadd(y, v[2]) if len(v) > 2 else y


def register(r) -> None:
    r.add("MatMul", 13, infer_matmul, lower_matmul)
    r.add("Gemm", 13, infer_gemm, lower_gemm)
    r.add("Softmax", 13, infer_softmax, lower_softmax)
    r.add("LayerNormalization", 17, infer_layer_norm, lower_layer_norm)
