"""onnxruntime's transformer-fusion contrib ops (domain com.microsoft) -> core ops.

onnxruntime's transformer optimizer fuses subgraphs of BERT-, GPT- and LLaMA-like models
into these ops. Each translation here undoes the fusion: it emits the core ops that compute
what onnxruntime's CPU kernel computes (LayerNorm, MatMul, Softmax, Gather, elementwise
ops), so the passes fuse and plan them like any other graph. onnx has no schema for these
ops: attributes arrive as written and each translation gives onnxruntime's defaults.
What a translation does not implement (shared past/present buffers, packed batching,
other activations...) fails at compile time naming the node, op and reason; what only the
data can show (GroupQueryAttention's padded batches, an id out of an embedding table)
fails the run naming the node. docs/CONTRIB_OPS.md lists what each op supports.

SimplifiedLayerNormalization (RMS norm) is written by onnxruntime into the default domain,
where onnx has no schema for it; the importer reads it as the contrib op of that name.
"""
from __future__ import annotations

import numpy as np

from ....ir.dtypes import FLOAT32, INT32, INT64
from ....ops.conv import Conv
from ....ops.datadep import Assert, Range
from ....ops.elementwise import Cast, Elementwise
from ....ops.linalg import MatMul
from ....ops.movement import BIG, Concat, Gather, Slice, Transpose
from ....ops.reduce import LayerNorm, Reduce, Softmax
from ....ops.shape import Fill, Identity, ShapeOf, Unsqueeze, ViewAs
from ..translate import CONTRIB, Registry, TranslateContext
from .conv import conv_window

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


def _refuse_negative(ctx: TranslateContext, i: int, what: str) -> None:
    """A run-time check that input ``i`` holds no id below 0: Gather would read it from the
    end of the table, where onnxruntime's kernel fails the run."""
    negative = _ew(ctx, "less", [ctx.inputs[i], ctx.constant("zero", np.array(0, np.int32))])
    anywhere = ctx.tmp(f"{what}_negative")
    ctx.emit(Reduce("max", None, keepdims=False), [negative], [anywhere])
    ctx.emit(Assert(f"{what} '{ctx.inputs[i]}' has an id below 0"), [anywhere], [])


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
    each row's mask entries equal to 1 (zeros without a mask), as onnxruntime's CPU kernel.
    A word or segment id out of its table fails the run, as in onnxruntime."""
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
    _refuse_negative(ctx, 0, "input_ids")
    if ctx.has(1):
        _refuse_negative(ctx, 1, "segment_ids")
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


# ----------------------------------------------------------------------------- RotaryEmbedding


def _slice_last(ctx: TranslateContext, x: str, start: int, end: int, what: str) -> str:
    """x[..., start:end]."""
    out = ctx.tmp(what)
    ctx.emit(Slice((-1,)), [x, ctx.constant("start", np.array([start], np.int64)),
                            ctx.constant("end", np.array([end], np.int64))], [out])
    return out


def _static(ctx: TranslateContext, d, what: str) -> int:
    if not isinstance(d, int):
        ctx.fail(f"{what} is {d}; it must be known at compile time")
    return d


def _rotary_rows(ctx: TranslateContext, x4: str, head_axis: int, pos: int | None, caches: tuple[int, int],
                 offset: str | None = None) -> tuple[str, str]:
    """cos and sin rows (inputs ``caches``) for each token of ``x4`` (batch, seq, heads,
    head) or (batch, heads, seq, head), shaped to broadcast over it (a heads axis of 1 at
    ``head_axis``). Input ``pos`` holds position ids (batch, seq), a row per token, or one
    offset for the whole batch (shape (1)); without it, token s takes row ``offset`` + s."""
    seq_axis = 1 if head_axis == 2 else 2
    ids = None
    if pos is not None:
        v = ctx.value(pos)
        if v.dtype != INT64:
            ctx.fail(f"position_ids '{v.name}' has dtype {v.dtype}; it must be int64")
        if v.rank == 2:
            ids = v.name
        elif v.rank == 1 and v.shape[0] == 1:
            offset = v.name
        else:
            ctx.fail(f"position_ids '{v.name}' is {v.describe()}; it must be (batch, seq) or (1) (an offset)")
    if ids is not None:
        def shaped(rows: str) -> str:
            return _unsqueezed(ctx, rows, head_axis)
    else:
        ids = _positions(ctx, x4, seq_axis, offset)

        def shaped(rows: str) -> str:
            # rows (seq, half) broadcast over (batch, heads, seq, half) as they are
            return _unsqueezed(ctx, rows, 1) if head_axis == 2 else rows
    return shaped(_lookup(ctx, caches[0], ids, "cos")), shaped(_lookup(ctx, caches[1], ids, "sin"))


def _unsqueezed(ctx: TranslateContext, x: str, axis: int) -> str:
    out = ctx.tmp("unsqueezed")
    ctx.emit(Unsqueeze((axis,)), [x], [out])
    return out


def _rotated(ctx: TranslateContext, x1: str, x2: str, cos: str, sin: str) -> tuple[str, str]:
    """(x1 cos - x2 sin, x2 cos + x1 sin)."""
    first = _ew(ctx, "sub", [_ew(ctx, "mul", [x1, cos]), _ew(ctx, "mul", [x2, sin])])
    second = _ew(ctx, "add", [_ew(ctx, "mul", [x2, cos]), _ew(ctx, "mul", [x1, sin])])
    return first, second


def _rotate(ctx: TranslateContext, x4: str, rot: int, interleaved: bool, cos_rows: str, sin_rows: str,
            out: str | None = None) -> str:
    """``x4`` (4-D, heads of ``head`` elements last) with the first ``rot`` elements of each
    head rotated by pairs: halves (x[i], x[i + rot/2]) or, ``interleaved``, neighbours
    (x[2i], x[2i + 1]); the rest of each head passes. Returns the output's name."""
    shape4 = ctx.graph.values[x4].shape
    head, half = shape4[3], rot // 2
    if not interleaved:
        rotated = list(_rotated(ctx, _slice_last(ctx, x4, 0, half, "x1"), _slice_last(ctx, x4, half, rot, "x2"),
                                cos_rows, sin_rows))
    else:
        # neighbours as (.., half, 2): x1 = [.., 0], x2 = [.., 1]
        pairs = ctx.tmp("pairs")
        ctx.emit(ViewAs(tuple(shape4[:3]) + (half, 2)), [_slice_last(ctx, x4, 0, rot, "x_rot") if rot < head else x4],
                 [pairs])
        first, second = _rotated(ctx, _slice_last(ctx, pairs, 0, 1, "x1"), _slice_last(ctx, pairs, 1, 2, "x2"),
                                 _unsqueezed(ctx, cos_rows, -1), _unsqueezed(ctx, sin_rows, -1))
        joined = ctx.tmp("joined")
        ctx.emit(Concat(-1), [first, second], [joined])
        flat = ctx.tmp("rotated")
        ctx.emit(ViewAs(tuple(shape4[:3]) + (rot,)), [joined], [flat])
        rotated = [flat]
    if rot < head:
        rotated.append(_slice_last(ctx, x4, rot, BIG, "passed"))
    out = out or ctx.tmp("rotary")
    ctx.emit(Concat(-1), rotated, [out])
    return out


def rotary_embedding(ctx: TranslateContext) -> None:
    """Inputs: input (batch, seq, hidden) or (batch, heads, seq, head), position_ids,
    cos_cache and sin_cache (positions, rotary_embedding_dim / 2); the first
    rotary_embedding_dim elements of each head rotated by pairs: halves (x[i], x[i + dim/2])
    or, with interleaved, neighbours (x[2i], x[2i + 1]); the rest of the head passes."""
    _require_float32(ctx, 0)
    if int(ctx.attr("is_packed_batching", 0)) != 0:
        ctx.fail("is_packed_batching=1 (packed sequences without padding) is not supported")
    if float(ctx.attr("scale", 1.0)) != 1.0:
        ctx.fail(f"scale {ctx.attr('scale')} is not supported (only 1.0)")
    x, cos = ctx.value(0), ctx.value(2)
    num_heads, rot = int(ctx.attr("num_heads", 0)), int(ctx.attr("rotary_embedding_dim", 0))
    half = _static(ctx, cos.shape[1], f"cos_cache '{cos.name}' dim 1")
    if rot == 0:
        rot = 2 * half
    elif rot != 2 * half:
        ctx.fail(f"rotary_embedding_dim {rot} is not twice cos_cache '{cos.name}' dim 1 ({half})")
    elif num_heads <= 0:
        ctx.fail("num_heads is required with rotary_embedding_dim (as onnxruntime requires)")
    if x.rank == 3:
        hidden = _static(ctx, x.shape[2], f"input '{x.name}' dim 2")
        heads = num_heads if num_heads > 0 else hidden // rot
        if heads <= 0 or hidden % heads:
            ctx.fail(f"input '{x.name}' hidden size {hidden} is not a multiple of {heads} heads")
        head = hidden // heads
        x4, head_axis = ctx.tmp("heads"), 2
        ctx.emit(ViewAs((x.shape[0], x.shape[1], heads, head)), [x.name], [x4])
    elif x.rank == 4:
        head = _static(ctx, x.shape[3], f"input '{x.name}' dim 3")
        x4, head_axis = x.name, 1
    else:
        ctx.fail(f"input '{x.name}' is {x.describe()}; it must be (batch, seq, hidden) or (batch, heads, seq, head)")
    if rot > head or rot % 2:
        ctx.fail(f"rotary_embedding_dim {rot} must be even and at most the head size {head}")
    cos_rows, sin_rows = _rotary_rows(ctx, x4, head_axis, 1, (2, 3))
    whole = _rotate(ctx, x4, rot, bool(ctx.attr("interleaved", 0)), cos_rows, sin_rows)
    ctx.emit(ViewAs(x.shape), [whole], ctx.outputs[:1])


# ----------------------------------------------------------------------------- FusedConv

# FusedConv's activations: the elementwise function and how many activation_params it reads
CONV_ACTIVATIONS = {"Relu": ("relu", 0), "Tanh": ("tanh", 0), "Sigmoid": ("sigmoid", 0),
                    "LeakyRelu": ("leaky_relu", 1), "Clip": ("clip", 2), "HardSigmoid": ("hard_sigmoid", 2)}


def fused_conv(ctx: TranslateContext) -> None:
    """Inputs: X, W, [B], [Z]: activation(Conv(X, W, B) + Z)."""
    activation = ctx.attr("activation")
    if activation not in CONV_ACTIVATIONS:
        ctx.fail(f"activation {activation!r} is not supported (supported: {', '.join(CONV_ACTIVATIONS)})")
    fn, n_params = CONV_ACTIVATIONS[activation]
    params = tuple(float(p) for p in ctx.attr("activation_params", ()))
    if len(params) != n_params:
        ctx.fail(f"activation {activation} takes {n_params} activation_params, got {len(params)}")
    conv = ctx.tmp("conv")
    ctx.emit(Conv(conv_window(ctx), int(ctx.attr("group", 1))), ctx.inputs[:3] if ctx.has(2) else ctx.inputs[:2],
             [conv])
    if ctx.has(3):
        conv = _ew(ctx, "add", [conv, ctx.inputs[3]])
    if fn == "clip":
        bounds = [_scalar(ctx, what, p, conv) for what, p in zip(("min", "max"), params)]
        _ew(ctx, "clip", [conv] + bounds, ctx.outputs[0], (True, True))
    else:
        _ew(ctx, fn, [conv], ctx.outputs[0], params)


# ----------------------------------------------------------------------------- attention

MASK_FILTER_VALUE = -10000.0  # onnxruntime's default mask_filter_value


def _heads(ctx: TranslateContext, x: str, heads: int, perm: tuple[int, ...], what: str) -> str:
    """``x`` (batch, seq, heads * head) viewed as (batch, seq, heads, head) and transposed by
    ``perm``."""
    v = ctx.graph.values[x]
    hidden = _static(ctx, v.shape[2], f"'{v.name}' dim 2")
    if hidden % heads:
        ctx.fail(f"hidden size {hidden} of '{v.name}' is not a multiple of num_heads {heads}")
    viewed, moved = ctx.tmp(f"{what}_heads"), ctx.tmp(what)
    ctx.emit(ViewAs((v.shape[0], v.shape[1], heads, hidden // heads)), [x], [viewed])
    ctx.emit(Transpose(perm), [viewed], [moved])
    return moved


def _padding_mask(ctx: TranslateContext, i: int, what: str, q: str, k: str, forms: tuple[int, ...]) -> str:
    """Input ``i``, an int32 mask of a rank in ``forms``, as bool, true where a key is masked,
    broadcasting to the scores (batch, heads, q_seq, kv_seq): a (batch, kv_seq) or (batch,
    q_seq, kv_seq) mask masks entries of 0 or less; (batch) lengths (right-side padding)
    mask the keys from each length on. ``q`` and ``k``: (batch, heads, seq, head)."""
    m = ctx.value(i)
    if m.dtype != INT32:
        ctx.fail(f"{what} '{m.name}' has dtype {m.dtype}; it must be int32")
    batch = ctx.graph.values[q].shape[0]
    if m.rank not in forms or (m.rank == 1 and m.shape[0] != batch):
        named = {1: "(batch) lengths", 2: "(batch, kv_sequence)", 3: "(batch, sequence, kv_sequence)"}
        ctx.fail(f"{what} '{m.name}' is {m.describe()}; the forms supported are "
                 f"{', '.join(named[r] for r in forms)} (start/end indices and 4-D masks are not)")
    out = ctx.tmp("masked")
    if m.rank == 1:
        lengths = ctx.tmp("lengths")
        ctx.emit(Cast(INT64), [m.name], [lengths])
        inside = _ew(ctx, "less", [_positions(ctx, k, 2), _unsqueezed(ctx, lengths, 1)])
        ctx.emit(Unsqueeze((1, 2)), [_ew(ctx, "not", [inside])], [out])
        return out
    masked = _ew(ctx, "not", [_ew(ctx, "greater", [m.name, ctx.constant("zero", np.array(0, np.int32))])])
    ctx.emit(Unsqueeze((1, 2) if m.rank == 2 else (1,)), [masked], [out])
    return out


def _causal_mask(ctx: TranslateContext, q: str, k: str) -> str:
    """Bool (q_seq, kv_seq): true where key j is after query i (j > i + kv_seq - q_seq, the
    keys before the queries being past ones). ``q`` and ``k``: (batch, heads, seq, ..)."""
    rows = _unsqueezed(ctx, _positions(ctx, q, 2), -1)
    cols = _positions(ctx, k, 2)
    q_len, k_len = ctx.tmp("q_len"), ctx.tmp("k_len")
    ctx.emit(ShapeOf(2, 3), [q], [q_len])
    ctx.emit(ShapeOf(2, 3), [k], [k_len])
    last = _ew(ctx, "add", [rows, _ew(ctx, "sub", [k_len, q_len])])
    return _ew(ctx, "greater", [cols, last])


def _attend(ctx: TranslateContext, q: str, k: str, v: str, scale: float | None, padding: str | None,
            causal: str | None, bias: str | None, out: str) -> None:
    """softmax(scale Q K^T + bias + masks) V for Q (batch, heads, q_seq, head), K and V
    (batch, kv_heads, kv_seq, head), into ``out`` (batch, q_seq, heads * v_head). ``padding``
    and ``causal``: bool masks broadcasting to the scores, true where a key is masked. As in
    onnxruntime, a padded key's score gets mask_filter_value added (so a row whose keys are
    all padded still has weights), and a future key's score is float32's lowest (no weight).
    With fewer kv_heads than heads (grouped-query attention), each group of heads / kv_heads
    consecutive query heads shares one K and V head: Q is read as (batch, kv_heads, group *
    q_seq, head), and the scores as (batch, kv_heads, group, q_seq, kv_seq) while masked."""
    qv, kv, vv = ctx.graph.values[q], ctx.graph.values[k], ctx.graph.values[v]
    batch, heads, q_seq, head = qv.shape
    kv_heads = kv.shape[1]
    group = heads // kv_heads
    scale = 1 / np.sqrt(_static(ctx, head, "the head size")) if scale is None else scale
    if group > 1:
        grouped = ctx.tmp("q_grouped")
        ctx.emit(ViewAs((batch, kv_heads, group * q_seq, head)), [q], [grouped])
        q = grouped
    kt = ctx.tmp("k_t")
    ctx.emit(Transpose((0, 1, 3, 2)), [k], [kt])
    scores = ctx.tmp("scores")
    ctx.emit(MatMul(), [q, kt], [scores])
    scores = _ew(ctx, "mul", [scores, _scalar(ctx, "scale", scale, scores)])
    rows_shape = ctx.graph.values[scores].shape
    if group > 1:
        split = ctx.tmp("scores_by_group")
        ctx.emit(ViewAs((batch, kv_heads, group, q_seq, rows_shape[-1])), [scores], [split])
        scores = split
    if causal:
        scores = _ew(ctx, "where", [causal, _scalar(ctx, "lowest", np.finfo(np.float32).min, scores), scores])
    if bias:
        scores = _ew(ctx, "add", [scores, bias])
    if padding:
        # last, as onnxruntime adds it: a fully padded row's scores lose bits beside -10000
        # and only the same order rounds them the same
        fill = _scalar(ctx, "mask_filter_value", float(ctx.attr("mask_filter_value", MASK_FILTER_VALUE)), scores)
        scores = _ew(ctx, "add", [scores, _ew(ctx, "where", [padding, fill, _scalar(ctx, "zero", 0.0, scores)])])
    probs, context, moved = ctx.tmp("probs"), ctx.tmp("context"), ctx.tmp("context_moved")
    ctx.emit(Softmax(-1), [scores], [probs])
    if group > 1:
        joined = ctx.tmp("probs_joined")
        ctx.emit(ViewAs(rows_shape), [probs], [joined])
        probs = joined
    ctx.emit(MatMul(), [probs, v], [context])
    v_head = _static(ctx, vv.shape[3], "the value head size")
    if group > 1:
        by_head = ctx.tmp("context_by_head")
        ctx.emit(ViewAs((batch, heads, q_seq, v_head)), [context], [by_head])
        context = by_head
    ctx.emit(Transpose((0, 2, 1, 3)), [context], [moved])
    ctx.emit(ViewAs((batch, q_seq, heads * v_head)), [moved], [out])


def _num_heads(ctx: TranslateContext, name: str = "num_heads") -> int:
    heads = int(ctx.attr(name, 0))
    if heads <= 0:
        ctx.fail(f"attribute {name} is required (a positive count)")
    return heads


def _scale(ctx: TranslateContext) -> float | None:
    """The scale attribute; None (1 / sqrt(head size)) when absent or 0, as onnxruntime reads it."""
    scale = float(ctx.attr("scale", 0.0))
    return scale or None


def _after_past(ctx: TranslateContext, past: str | None, new: str, what: str) -> str:
    """``new`` keys or values (batch, heads, seq, head) after ``past`` ones (batch, heads,
    past, head) along the sequence, or ``new`` alone without past."""
    if past is None:
        return new
    joined = ctx.tmp(f"{what}_all")
    ctx.emit(Concat(2), [past, new], [joined])
    return joined


def _past_part(ctx: TranslateContext, past: str, index: int, what: str) -> str:
    """Attention's past (2, batch, heads, past, head): its keys (index 0) or values (1)."""
    part = ctx.tmp(f"past_{what}")
    ctx.emit(Gather(0), [past, ctx.constant("index", np.array(index, np.int64))], [part])
    return part


def attention(ctx: TranslateContext) -> None:
    """Inputs: input (batch, seq, in_hidden), weights (in_hidden, q + k + v hidden), [bias],
    [mask_index (batch, past + seq) int32], [past (2, batch, heads, past, head)],
    [attention_bias], [past_sequence_length]; outputs: output, [present (2, batch, heads,
    past + seq, head)]. Q, K and V by one MatMul, split, each head attending over the past
    and new keys."""
    _require_float32(ctx, 0)
    heads = _num_heads(ctx)
    if ctx.has(6) or int(ctx.attr("past_present_share_buffer", 0)):
        ctx.fail("Attention with a shared past/present buffer (past_sequence_length) is not supported")
    if int(ctx.attr("do_rotary", 0)):
        ctx.fail("Attention with do_rotary=1 is not supported")
    w = ctx.value(1)
    if w.rank != 2:
        ctx.fail(f"weights '{w.name}' is {w.describe()}; it must be (input_hidden, q + k + v hidden)")
    total = _static(ctx, w.shape[1], f"weights '{w.name}' dim 1")
    sizes = ctx.ints("qkv_hidden_sizes") or (total // 3,) * 3
    if len(sizes) != 3 or sum(sizes) != total or sizes[0] != sizes[1] or min(sizes) <= 0:
        ctx.fail(f"qkv_hidden_sizes {list(sizes)} must be three positive sizes, Q's equal to K's, summing to "
                 f"weights '{w.name}' dim 1 ({total})")
    projected = ctx.tmp("qkv")
    ctx.emit(MatMul(), ctx.inputs[:2], [projected])
    if ctx.has(2):
        projected = _ew(ctx, "add", [projected, ctx.inputs[2]])
    starts = (0, sizes[0], sizes[0] + sizes[1])
    q, k, v = (_heads(ctx, _slice_last(ctx, projected, a, a + n, what), heads, (0, 2, 1, 3), what)
               for a, n, what in zip(starts, sizes, "qkv"))
    if (ctx.has(4) or _output(ctx, 1)) and sizes[1] != sizes[2]:
        ctx.fail(f"past and present need K and V of one hidden size; qkv_hidden_sizes is {list(sizes)}")
    if ctx.has(4):
        k = _after_past(ctx, _past_part(ctx, ctx.inputs[4], 0, "k"), k, "k")
        v = _after_past(ctx, _past_part(ctx, ctx.inputs[4], 1, "v"), v, "v")
    _attend(ctx, q, k, v, _scale(ctx),
            _padding_mask(ctx, 3, "mask_index", q, k, (1, 2, 3)) if ctx.has(3) else None,
            _causal_mask(ctx, q, k) if int(ctx.attr("unidirectional", 0)) else None,
            ctx.inputs[5] if ctx.has(5) else None, ctx.outputs[0])
    if _output(ctx, 1):
        ctx.emit(Concat(0), [_unsqueezed(ctx, k, 0), _unsqueezed(ctx, v, 0)], [ctx.outputs[1]])


def multi_head_attention(ctx: TranslateContext) -> None:
    """Inputs: query (batch, seq, hidden), key (batch, kv_seq, hidden), value (batch, kv_seq,
    v_hidden), [bias (hidden + hidden + v_hidden)], [key_padding_mask (batch, kv_seq)],
    [attention_bias], [past_key], [past_value] (batch, heads, past, head), ...; outputs:
    output, [present_key], [present_value] (batch, heads, past + kv_seq, head): the past
    and new K and V by heads."""
    _require_float32(ctx, 0)
    heads = _num_heads(ctx)
    if ctx.has(6) != ctx.has(7):
        ctx.fail("past_key and past_value must be given together")
    if len(ctx.inputs) > 8 and any(ctx.inputs[8:]):
        ctx.fail("MultiHeadAttention's past_sequence_length and cache_indirection inputs (beam search) are "
                 "not supported")
    if not ctx.has(1) or not ctx.has(2):
        ctx.fail("packed QKV or KV (key or value absent) is not supported; give query, key and value")
    for i, what in ((0, "query"), (1, "key"), (2, "value")):
        v = ctx.value(i)
        if v.rank != 3:
            ctx.fail(f"{what} '{v.name}' is {v.describe()}; only (batch, sequence, hidden) is supported "
                     f"(packed or per-head layouts are not)")
    names = list(ctx.inputs[:3])
    if ctx.has(3):
        q_hidden = _static(ctx, ctx.value(0).shape[2], f"query '{ctx.inputs[0]}' dim 2")
        v_hidden = _static(ctx, ctx.value(2).shape[2], f"value '{ctx.inputs[2]}' dim 2")
        starts = (0, q_hidden, 2 * q_hidden)
        sizes = (q_hidden, q_hidden, v_hidden)
        names = [_ew(ctx, "add", [x, _slice_last(ctx, ctx.inputs[3], a, a + n, f"{what}_bias")])
                 for x, a, n, what in zip(names, starts, sizes, "qkv")]
    q, k, v = (_heads(ctx, x, heads, (0, 2, 1, 3), what) for x, what in zip(names, "qkv"))
    k = _after_past(ctx, ctx.inputs[6] if ctx.has(6) else None, k, "k")
    v = _after_past(ctx, ctx.inputs[7] if ctx.has(7) else None, v, "v")
    _attend(ctx, q, k, v, _scale(ctx),
            _padding_mask(ctx, 4, "key_padding_mask", q, k, (1, 2)) if ctx.has(4) else None,
            _causal_mask(ctx, q, k) if int(ctx.attr("unidirectional", 0)) else None,
            ctx.inputs[5] if ctx.has(5) else None, ctx.outputs[0])
    for i, x in ((1, k), (2, v)):
        if _output(ctx, i):
            ctx.emit(Identity(), [x], [ctx.outputs[i]])


def _lengths_check(ctx: TranslateContext, i: int, what: str, expected: str, plus_one: bool, why: str,
                   short_if: str | None = None) -> None:
    """A run-time check that every element of int32 input ``i`` (+ 1 with ``plus_one``)
    equals ``expected`` (an int64 tensor of one element), or, where the bool ``short_if`` is
    true, lies in [1, expected]."""
    v = ctx.value(i)
    if v.dtype != INT32:
        ctx.fail(f"{what} '{v.name}' has dtype {v.dtype}; it must be int32")
    wide = ctx.tmp(f"{what}_wide")
    ctx.emit(Cast(INT64), [v.name], [wide])
    if plus_one:
        wide = _ew(ctx, "add", [wide, ctx.constant("one", np.array(1, np.int64))])
    differs = _ew(ctx, "not", [_ew(ctx, "equal", [wide, expected])])
    if short_if:
        short = _ew(ctx, "and", [_ew(ctx, "less", [wide, expected]),
                                 _ew(ctx, "greater", [wide, ctx.constant("zero", np.array(0, np.int64))])])
        differs = _ew(ctx, "and", [differs, _ew(ctx, "not", [_ew(ctx, "and", [short, short_if])])])
    anywhere = ctx.tmp(f"{what}_differs")
    ctx.emit(Reduce("max", None, keepdims=False), [differs], [anywhere])
    ctx.emit(Assert(f"{what} '{v.name}' {why}"), [anywhere], [])


def _gqa_rotary(ctx: TranslateContext, q: str, k: str, head: int) -> tuple[str, str]:
    """GroupQueryAttention's do_rotary: Q and the new K (batch, heads, seq, head) rotated at
    the new tokens' positions, position_ids (input 9) or past + s (past_key's length)."""
    cos = ctx.value(7)
    half = _static(ctx, cos.shape[1], f"cos_cache '{cos.name}' dim 1")
    if 2 * half > head:
        ctx.fail(f"cos_cache '{cos.name}' dim 1 ({half}) is more than half the head size {head}")
    offset = None
    if ctx.has(3):
        offset = ctx.tmp("past_length")
        ctx.emit(ShapeOf(2, 3), [ctx.inputs[3]], [offset])
    cos_rows, sin_rows = _rotary_rows(ctx, q, 1, 9 if ctx.has(9) else None, (7, 8), offset)
    interleaved = bool(ctx.attr("rotary_interleaved", 0))
    return (_rotate(ctx, q, 2 * half, interleaved, cos_rows, sin_rows),
            _rotate(ctx, k, 2 * half, interleaved, cos_rows, sin_rows))


def group_query_attention(ctx: TranslateContext) -> None:
    """Inputs: query (batch, seq, heads * head) or Q, K and V packed in it, [key], [value]
    (batch, seq, kv_heads * head), [past_key], [past_value] (batch, kv_heads, past, head),
    seqlens_k (batch) int32, total_sequence_length (int32 scalar), [cos_cache], [sin_cache],
    [position_ids]; outputs: output, present_key, present_value (batch, kv_heads, past + seq,
    head). Causal attention of the new tokens over past and new keys, query heads grouped on
    kv_heads; with do_rotary, Q and the new K rotated first (RotaryEmbedding's rotation).

    onnxruntime reads each batch entry's length from seqlens_k (length - 1), so a batch may
    mix lengths inside a past buffer longer than its own past (shared buffers). symwasm
    implements the case without padding: every seqlens_k + 1 and total_sequence_length equal
    past + seq, which is checked at run time; only a first prompt (no past) may be
    right-padded (seqlens_k + 1 from 1 to seq)."""
    _require_float32(ctx, 0)
    heads, kv_heads = _num_heads(ctx), _num_heads(ctx, "kv_num_heads")
    if heads % kv_heads:
        ctx.fail(f"num_heads {heads} is not a multiple of kv_num_heads {kv_heads}")
    for attr in ("smooth_softmax", "qk_output"):
        if int(ctx.attr(attr, 0)):
            ctx.fail(f"{attr}={ctx.attr(attr)} is not supported")
    rotary = bool(ctx.attr("do_rotary", 0))
    if float(ctx.attr("softcap", 0.0)) != 0.0:
        ctx.fail(f"softcap {ctx.attr('softcap')} is not supported (only 0)")
    if int(ctx.attr("local_window_size", -1)) != -1:
        ctx.fail(f"local_window_size {ctx.attr('local_window_size')} (sliding-window attention) is not supported")
    for i, what in ((10, "attention_bias"), (11, "head_sink")):
        if ctx.has(i):
            ctx.fail(f"input {what} '{ctx.inputs[i]}' is not supported")
    if rotary and not (ctx.has(7) and ctx.has(8)):
        ctx.fail("do_rotary=1 needs cos_cache and sin_cache")
    if ctx.has(3) != ctx.has(4):
        ctx.fail("past_key and past_value must be given together")
    if not ctx.has(5) or not ctx.has(6):
        ctx.fail("seqlens_k and total_sequence_length are required")
    query = ctx.value(0)
    if query.rank != 3:
        ctx.fail(f"query '{query.name}' is {query.describe()}; it must be (batch, sequence, hidden)")
    if ctx.has(1) != ctx.has(2):
        ctx.fail("key and value must be given together (or both left out, Q, K and V packed in query)")
    if ctx.has(1):
        names = ctx.inputs[:3]
        head = _static(ctx, query.shape[2], f"query '{query.name}' dim 2") // heads
    else:
        packed = _static(ctx, query.shape[2], f"query '{query.name}' dim 2")
        head = packed // (heads + 2 * kv_heads)
        if head * (heads + 2 * kv_heads) != packed:
            ctx.fail(f"packed query '{query.name}' dim 2 ({packed}) is not (num_heads + 2 kv_num_heads) * head")
        starts = (0, heads * head, (heads + kv_heads) * head, (heads + 2 * kv_heads) * head)
        names = [_slice_last(ctx, query.name, a, b, what) for a, b, what in zip(starts, starts[1:], "qkv")]
    q = _heads(ctx, names[0], heads, (0, 2, 1, 3), "q")
    k, v = (_heads(ctx, x, kv_heads, (0, 2, 1, 3), what) for x, what in zip(names[1:], "kv"))
    if ctx.graph.values[k].shape[3] != head:
        ctx.fail(f"key's head size {ctx.graph.values[k].shape[3]} differs from query's {head}")
    if rotary:
        q, k = _gqa_rotary(ctx, q, k, head)
    if ctx.has(3):
        k_all, v_all = ctx.tmp("present_k"), ctx.tmp("present_v")
        ctx.emit(Concat(2), [ctx.inputs[3], k], [k_all])
        ctx.emit(Concat(2), [ctx.inputs[4], v], [v_all])
    else:
        k_all, v_all = k, v
    total = ctx.tmp("total")
    ctx.emit(ShapeOf(2, 3), [k_all], [total])
    # a first prompt (no past) may be right-padded: its rows past seqlens_k are padding,
    # which onnxruntime leaves unspecified and symwasm computes as if real
    if ctx.has(3):
        past_length = ctx.tmp("past_length")
        ctx.emit(ShapeOf(2, 3), [ctx.inputs[3]], [past_length])
        first = _ew(ctx, "equal", [past_length, ctx.constant("zero", np.array(0, np.int64))])
    else:
        first = ctx.constant("first_prompt", np.array(True))
    why = "differs from past + new sequence length; padded batches (lengths below the past buffer) are not supported"
    _lengths_check(ctx, 5, "seqlens_k", total, True, f"+ 1 {why} after the first prompt", first)
    _lengths_check(ctx, 6, "total_sequence_length", total, False, why)
    _attend(ctx, q, k_all, v_all, _scale(ctx), None, _causal_mask(ctx, q, k_all), None, ctx.outputs[0])
    for i, x in ((1, k_all), (2, v_all)):
        if _output(ctx, i):
            ctx.emit(Identity(), [x], [ctx.outputs[i]])


def register(r: Registry) -> None:
    for op, fn in (("Gelu", gelu), ("BiasGelu", bias_gelu), ("FastGelu", fast_gelu), ("QuickGelu", quick_gelu),
                   ("BiasAdd", bias_add), ("FusedMatMul", fused_matmul),
                   ("SkipLayerNormalization", skip_layer_norm),
                   ("SkipSimplifiedLayerNormalization", skip_simplified_layer_norm),
                   ("SimplifiedLayerNormalization", simplified_layer_norm),
                   ("EmbedLayerNormalization", embed_layer_norm), ("RotaryEmbedding", rotary_embedding),
                   ("FusedConv", fused_conv), ("Attention", attention),
                   ("MultiHeadAttention", multi_head_attention), ("GroupQueryAttention", group_query_attention)):
        r.add(op, (1,), fn, foldable=False, domain=CONTRIB)
