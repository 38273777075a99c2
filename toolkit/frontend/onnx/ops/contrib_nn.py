"""onnxruntime's transformer-fusion contrib ops (domain com.microsoft) -> core ops.

onnxruntime's transformer optimizer fuses subgraphs of BERT-, GPT- and LLaMA-like models
into these ops. Each translation here undoes the fusion: it emits the core ops that compute
what onnxruntime's CPU kernel computes (LayerNorm, MatMul, Softmax, Gather, elementwise
ops), so the passes fuse and plan them like any other graph. onnx has no schema for these
ops: attributes arrive as written and each translation gives onnxruntime's defaults.
What a translation does not implement (past/present state, packed batching, other
activations) fails at compile time naming the node, op and reason.

SimplifiedLayerNormalization (RMS norm) is written by onnxruntime into the default domain,
where onnx has no schema for it; the importer reads it as the contrib op of that name.
"""
from __future__ import annotations

import numpy as np

from ....ir.dtypes import FLOAT32, INT32
from ....ops.datadep import Range
from ....ops.elementwise import Cast, Elementwise
from ....ops.linalg import MatMul
from ....ops.movement import Gather, Transpose
from ....ops.reduce import LayerNorm, Reduce
from ....ops.shape import Fill, ShapeOf
from ..translate import CONTRIB, Registry, TranslateContext

# onnxruntime's attribute defaults (contrib_defs.cc)
SKIP_LAYER_NORM_EPSILON = 1e-12  # SkipLayerNormalization, SkipSimplifiedLayerNormalization
EMBED_LAYER_NORM_EPSILON = 1e-12
LAYER_NORM_EPSILON = 1e-5  # SimplifiedLayerNormalization, like ONNX's LayerNormalization
QUICK_GELU_ALPHA = 1.702


def _ew(ctx: TranslateContext, fn: str, inputs: list[str], out: str | None = None, params: tuple = ()) -> str:
    """One elementwise core op; returns its output (``out``, or a fresh name)."""
    out = out or ctx.tmp(fn)
    ctx.emit(Elementwise(fn, params), inputs, [out])
    return out


def _scalar(ctx: TranslateContext, what: str, value: float, like: str) -> str:
    """A constant scalar of the dtype of value ``like``."""
    return ctx.constant(what, np.array(value, ctx.graph.values[like].dtype.np))


def _require_float32(ctx: TranslateContext, i: int) -> None:
    v = ctx.value(i)
    if v.dtype != FLOAT32:
        ctx.fail(f"input '{v.name}' has dtype {v.dtype}; symwasm implements this op for float32 only")


def _output(ctx: TranslateContext, i: int) -> str:
    """Output ``i``'s name, or "" when the node does not ask for it."""
    return ctx.outputs[i] if i < len(ctx.outputs) else ""


# ----------------------------------------------------------------------------- Gelu family, BiasAdd


def gelu(ctx: TranslateContext) -> None:
    ctx.emit(Elementwise("gelu", (False,)), ctx.inputs[:1])


def bias_gelu(ctx: TranslateContext) -> None:
    """Gelu (erf) of input + bias."""
    ctx.emit(Elementwise("gelu", (False,)), [_ew(ctx, "add", ctx.inputs[:2])])


def fast_gelu(ctx: TranslateContext) -> None:
    """Gelu's tanh approximation of input (+ bias, when given)."""
    x = _ew(ctx, "add", ctx.inputs[:2]) if ctx.has(1) else ctx.inputs[0]
    ctx.emit(Elementwise("gelu", (True,)), [x])


def quick_gelu(ctx: TranslateContext) -> None:
    """x * sigmoid(alpha x): Swish with its alpha."""
    ctx.emit(Elementwise("swish", (float(ctx.attr("alpha", QUICK_GELU_ALPHA)),)), ctx.inputs[:1])


def bias_add(ctx: TranslateContext) -> None:
    """X + bias + skip."""
    ctx.emit(Elementwise("add"), ctx.inputs[:3])


# ----------------------------------------------------------------------------- FusedMatMul


def _moved_operand(ctx: TranslateContext, i: int, trans: bool, trans_batch: bool, side: str) -> str:
    """Input ``i`` with its batch axis 0 moved before the matrix's last axis (transBatch:
    dims (d0, d1, .., dn-2, dn-1) read as (d1, .., dn-2, d0, dn-1)) and then its last two
    axes swapped (trans), as onnxruntime's MatMulComputeHelper reads them."""
    v = ctx.value(i)
    perm = list(range(v.rank))
    if trans_batch:
        if v.rank < 3:
            ctx.fail(f"transBatch{side} needs an input of rank 3 or more; '{v.name}' is {v.describe()}")
        perm = perm[1:-1] + [0, perm[-1]]
    if trans:
        if v.rank < 2:
            ctx.fail(f"trans{side} needs an input of rank 2 or more; '{v.name}' is {v.describe()}")
        perm[-2], perm[-1] = perm[-1], perm[-2]
    if perm == list(range(v.rank)):
        return v.name
    moved = ctx.tmp(f"{side}_moved")
    ctx.emit(Transpose(tuple(perm)), [v.name], [moved])
    return moved


def fused_matmul(ctx: TranslateContext) -> None:
    """alpha * A' @ B', A' and B' read through transA/transBatchA (B likewise)."""
    a = _moved_operand(ctx, 0, bool(ctx.attr("transA", 0)), bool(ctx.attr("transBatchA", 0)), "A")
    b = _moved_operand(ctx, 1, bool(ctx.attr("transB", 0)), bool(ctx.attr("transBatchB", 0)), "B")
    alpha = float(ctx.attr("alpha", 1.0))
    if alpha == 1.0:
        ctx.emit(MatMul(), [a, b])
        return
    product = ctx.tmp("product")
    ctx.emit(MatMul(), [a, b], [product])
    _ew(ctx, "mul", [product, _scalar(ctx, "alpha", alpha, product)], ctx.outputs[0])


# ----------------------------------------------------------------------------- layer norms


def _rms_norm(ctx: TranslateContext, x: str, scale: str, axes: tuple[int, ...], epsilon: float, y: str,
              inv_std: str) -> str:
    """y = x / sqrt(mean(x^2 over ``axes``) + epsilon) * scale, as onnxruntime computes it;
    ``inv_std`` (when named) gets 1 / that root. Returns the root (``axes`` kept as 1)."""
    square = _ew(ctx, "mul", [x, x])
    mean_square = ctx.tmp("mean_square")
    ctx.emit(Reduce("mean", axes, keepdims=True), [square], [mean_square])
    root = _ew(ctx, "sqrt", [_ew(ctx, "add", [mean_square, _scalar(ctx, "epsilon", epsilon, x)])])
    _ew(ctx, "mul", [_ew(ctx, "div", [x, root]), scale], y)
    if inv_std:
        _ew(ctx, "reciprocal", [root], inv_std)
    return root


def _skip_sum(ctx: TranslateContext, bias: int) -> str:
    """input + skip (+ bias, input ``bias``), into output 3 when the node asks for it."""
    _require_float32(ctx, 0)
    return _ew(ctx, "add", ctx.inputs[:2] + ([ctx.inputs[bias]] if ctx.has(bias) else []), _output(ctx, 3) or None)


def _epsilon(ctx: TranslateContext, default: float) -> float:
    eps = float(ctx.attr("epsilon", default))
    if not eps >= 0:
        ctx.fail(f"epsilon {eps} must not be negative")
    return eps


def skip_layer_norm(ctx: TranslateContext) -> None:
    """Inputs: input, skip, gamma, [beta], [bias]; outputs: output, [mean], [inv_std_var],
    [input_skip_bias_sum]: LayerNormalization over the last axis of input + skip + bias."""
    eps = _epsilon(ctx, SKIP_LAYER_NORM_EPSILON)
    total = _skip_sum(ctx, 4)
    beta = ctx.inputs[3] if ctx.has(3) else ""
    ctx.emit(LayerNorm(-1, eps), [total, ctx.inputs[2], beta], [ctx.outputs[0], _output(ctx, 1), _output(ctx, 2)])


def skip_simplified_layer_norm(ctx: TranslateContext) -> None:
    """Inputs: input, skip, gamma, [bias]; outputs as SkipLayerNormalization's, the RMS norm
    over the last axis, whose mean output onnxruntime fills with zeros (it has no mean)."""
    eps = _epsilon(ctx, SKIP_LAYER_NORM_EPSILON)
    total = _skip_sum(ctx, 3)
    rank = ctx.graph.values[total].rank
    root = _rms_norm(ctx, total, ctx.inputs[2], (rank - 1,), eps, ctx.outputs[0], _output(ctx, 2))
    if _output(ctx, 1):
        shape = ctx.tmp("stat_shape")
        ctx.emit(ShapeOf(), [root], [shape])
        ctx.emit(Fill(0.0, FLOAT32), [shape], [ctx.outputs[1]])


def simplified_layer_norm(ctx: TranslateContext) -> None:
    """Inputs: X, scale; outputs: Y, [inv_std_var]: the RMS norm over axes axis.. of X."""
    _require_float32(ctx, 0)
    if int(ctx.attr("stash_type", 1)) != 1:
        ctx.fail(f"stash_type {ctx.attr('stash_type')} is not supported (only 1, float32)")
    x = ctx.value(0)
    axis = int(ctx.attr("axis", -1))
    if not -x.rank <= axis < x.rank:
        ctx.fail(f"axis {axis} is out of range for input '{x.name}' of rank {x.rank}")
    axis %= x.rank
    _rms_norm(ctx, x.name, ctx.inputs[1], tuple(range(axis, x.rank)), _epsilon(ctx, LAYER_NORM_EPSILON),
              ctx.outputs[0], _output(ctx, 1))


# ----------------------------------------------------------------------------- EmbedLayerNormalization


def _lookup(ctx: TranslateContext, table: int, ids: str, what: str) -> str:
    rows = ctx.tmp(what)
    ctx.emit(Gather(0), [ctx.inputs[table], ids], [rows])
    return rows


def _positions(ctx: TranslateContext, like: str, axis: int, offset: str | None = None) -> str:
    """0, 1, .. up to dim ``axis`` of ``like`` (int64), plus ``offset`` when given."""
    length = ctx.tmp("length")
    ctx.emit(ShapeOf(axis, axis + 1), [like], [length])
    positions = ctx.tmp("positions")
    ctx.emit(Range(), [ctx.constant("zero", np.array(0, np.int64)), length,
                       ctx.constant("one", np.array(1, np.int64))], [positions])
    return _ew(ctx, "add", [positions, offset]) if offset else positions


def embed_layer_norm(ctx: TranslateContext) -> None:
    """Inputs: input_ids, [segment_ids], word_embedding, position_embedding,
    [segment_embedding], gamma, beta, [mask], [position_ids]; outputs: output, [mask_index],
    [embedding_sum]. The embeddings' rows summed, then LayerNormalization; mask_index counts
    each row's mask entries equal to 1 (zeros without a mask), as onnxruntime's CPU kernel."""
    for i, what in ((0, "input_ids"), (1, "segment_ids"), (7, "mask"), (8, "position_ids")):
        v = ctx.value(i)
        if v is not None and v.dtype != INT32:
            ctx.fail(f"{what} '{v.name}' has dtype {v.dtype}; it must be int32")
    _require_float32(ctx, 2)
    if ctx.has(1) != ctx.has(4):
        ctx.fail("segment_ids and segment_embedding must be given together")
    if int(ctx.attr("mask_index_type", 1)) not in (0, 1):
        ctx.fail(f"mask_index_type {ctx.attr('mask_index_type')} is not supported (0 or 1)")
    eps = _epsilon(ctx, EMBED_LAYER_NORM_EPSILON)
    ids = ctx.inputs[0]
    if ctx.has(8):
        # (batch, seq), or (1, seq) shared by the batch
        positions = ctx.inputs[8]
    else:
        positions = _positions(ctx, ids, 1)
    parts = [_lookup(ctx, 2, ids, "words"), _lookup(ctx, 3, positions, "positions")]
    if ctx.has(1):
        parts.append(_lookup(ctx, 4, ctx.inputs[1], "segments"))
    total = _ew(ctx, "add", parts, _output(ctx, 2) or None)
    ctx.emit(LayerNorm(-1, eps), [total, ctx.inputs[5], ctx.inputs[6]], ctx.outputs[:1])
    mask_index = _output(ctx, 1)
    if not mask_index:
        return
    if ctx.has(7):
        ones = _ew(ctx, "equal", [ctx.inputs[7], ctx.constant("one", np.array(1, np.int32))])
        counted = ctx.tmp("counted")
        ctx.emit(Cast(INT32), [ones], [counted])
        ctx.emit(Reduce("sum", (1,), keepdims=False), [counted], [mask_index])
    else:
        batch = ctx.tmp("batch")
        ctx.emit(ShapeOf(0, 1), [ids], [batch])
        ctx.emit(Fill(0, INT32), [batch], [mask_index])


def register(r: Registry) -> None:
    for op, fn in (("Gelu", gelu), ("BiasGelu", bias_gelu), ("FastGelu", fast_gelu), ("QuickGelu", quick_gelu),
                   ("BiasAdd", bias_add), ("FusedMatMul", fused_matmul),
                   ("SkipLayerNormalization", skip_layer_norm),
                   ("SkipSimplifiedLayerNormalization", skip_simplified_layer_norm),
                   ("SimplifiedLayerNormalization", simplified_layer_norm),
                   ("EmbedLayerNormalization", embed_layer_norm)):
        r.add(op, (1,), fn, foldable=False, domain=CONTRIB)
