"""Miscellaneous ONNX ops -> Einsum, EyeLike, ReverseSequence, Det, BitCast, GridSample
(toolkit.ops.misc); DepthToSpace and SpaceToDepth as views around a Transpose; Scatter (the
name ScatterElements had before 11) as ScatterElements; Upsample as Resize.

Versions: Einsum-28, ReverseSequence-28, EyeLike-22, Det-22 and GridSample-22 add only
bfloat16 (which symwasm does not carry). DepthToSpace-11 adds ``mode`` (DCR, CRD) and
SpaceToDepth-28 does too (before it, DCR); 13 and 28 add types. GridSample-20 renames the
modes bilinear and bicubic to linear and cubic and allows any number of spatial axes
(16: two). Upsample-7 takes its scales as an attribute, 9 as an input; its meaning is
Resize-10's (asymmetric coordinates). BitCast is new in 26.
"""
from __future__ import annotations

import numpy as np

from ....ir import dims as D
from ....ops.indexing import ScatterElements
from ....ops.misc import BitCast, Det, Einsum, EyeLike, GridSample, ReverseSequence
from ....ops.movement import Transpose
from ....ops.resize import Resize
from ....ops.shape import ViewAs
from ..translate import TranslateContext


# ----------------------------------------------------------------------------- Einsum


def _term_labels(ctx: TranslateContext, term: str, rank: int | None, ellipsis_rank: int | None) -> list[int]:
    """A term's labels: letters as their codes, the ellipsis's dims as -e .. -1 (right-aligned
    across operands). ``rank``: the operand's rank (None for the output, whose ellipsis has
    ``ellipsis_rank`` dims)."""
    head, dots, tail = term.partition("...")
    if "." in head or "." in tail:
        ctx.fail(f"term '{term}' has a '.' that is not part of an ellipsis")
    for c in head + tail:
        if not c.isascii() or not c.isalpha():
            ctx.fail(f"term '{term}' has the label '{c}'; labels are letters")
    if not dots:
        if rank is not None and rank != len(term):
            ctx.fail(f"term '{term}' has {len(term)} labels for an input of rank {rank}")
        return [ord(c) for c in term]
    e = ellipsis_rank if rank is None else rank - len(head) - len(tail)
    if e < 0:
        ctx.fail(f"term '{term}' has more labels than its input's {rank} dims")
    return [ord(c) for c in head] + list(range(-e, 0)) + [ord(c) for c in tail]


def einsum(ctx: TranslateContext) -> None:
    eq = str(ctx.attr("equation", "")).replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    parts = lhs.split(",")
    ins = [ctx.value(i) for i in range(len(ctx.inputs))]
    if len(parts) != len(ins) or any(v is None for v in ins):
        ctx.fail(f"equation '{eq}' has {len(parts)} operands, the node {len(ctx.inputs)} inputs")
    terms = [_term_labels(ctx, t, v.rank, None) for t, v in zip(parts, ins)]
    widest = max((-min(t) for t in terms if t and min(t) < 0), default=0)
    if arrow:
        output = _term_labels(ctx, rhs, None, widest)
        if len(set(output)) != len(output):
            ctx.fail(f"the output term '{rhs}' repeats a label")
    else:
        counts: dict[int, int] = {}
        for t in terms:
            for lab in t:
                counts[lab] = counts.get(lab, 0) + 1
        output = list(range(-widest, 0)) + sorted(lab for lab, n in counts.items() if lab > 0 and n == 1)
    ctx.emit(Einsum(tuple(tuple(t) for t in terms), tuple(output)))


# ----------------------------------------------------------------------------- simple ones


def eye_like(ctx: TranslateContext) -> None:
    code = ctx.attr("dtype")
    ctx.emit(EyeLike(ctx.dtype(int(code), "dtype") if code is not None else None, int(ctx.attr("k", 0))))


def reverse_sequence(ctx: TranslateContext) -> None:
    ctx.emit(ReverseSequence(int(ctx.attr("time_axis", 0)), int(ctx.attr("batch_axis", 1))))


def det(ctx: TranslateContext) -> None:
    ctx.emit(Det())


def bitcast(ctx: TranslateContext) -> None:
    if ctx.attr("to") is None:
        ctx.fail("attribute 'to' is required")
    ctx.emit(BitCast(ctx.dtype(int(ctx.attr("to")), "to")))


def scatter(ctx: TranslateContext) -> None:
    ctx.emit(ScatterElements(int(ctx.attr("axis", 0)), "none"))


def upsample(ctx: TranslateContext) -> None:
    mode = ctx.attr("mode", "nearest")
    if mode not in ("nearest", "linear"):
        ctx.fail(f"mode '{mode}' is not one of nearest, linear")
    if ctx.version < 9:
        scales = ctx.attr("scales")
        if scales is None:
            ctx.fail("attribute 'scales' is required")
        name = ctx.constant("scales", np.array(scales, np.float32))
    else:
        name = ctx.inputs[1]
    ctx.emit(Resize(mode, "asymmetric", "simple"), [ctx.inputs[0], "", name, ""])


def grid_sample(ctx: TranslateContext) -> None:
    mode = ctx.attr("mode", "linear" if ctx.version >= 20 else "bilinear")
    if ctx.version < 20:
        renamed = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}
        if mode not in renamed:
            ctx.fail(f"mode '{mode}' is not one of {', '.join(renamed)}")
        mode = renamed[mode]
        x = ctx.value(0)
        if x.rank != 4:
            ctx.fail(f"input '{x.name}' has shape {x.describe()}; GridSample-{ctx.version} takes (N, C, H, W)")
    ctx.emit(GridSample(mode, ctx.attr("padding_mode", "zeros"), bool(ctx.attr("align_corners", 0))))


# ----------------------------------------------------------------------------- DepthToSpace, SpaceToDepth


def _block_mode(ctx: TranslateContext) -> tuple[int, str]:
    x = ctx.value(0)
    if x.rank != 4:
        ctx.fail(f"input '{x.name}' has shape {x.describe()}; {ctx.op_type} takes (N, C, H, W)")
    bs = ctx.attr("blocksize")
    if bs is None or int(bs) < 1:
        ctx.fail(f"blocksize {bs} must be a positive integer")
    has_mode = ctx.op_type == "DepthToSpace" and ctx.version >= 11 or ctx.version >= 28
    mode = ctx.attr("mode", "DCR") if has_mode else "DCR"
    if mode not in ("DCR", "CRD"):
        ctx.fail(f"mode '{mode}' is not one of DCR, CRD")
    return int(bs), mode


def _divided(ctx: TranslateContext, d, k: int, what: str):
    if isinstance(d, int):
        if d % k:
            ctx.fail(f"{what} {d} is not a multiple of {k}")
        return d // k
    return D.div_exact(d, k)


def _rearrange(ctx: TranslateContext, split: tuple, perm: tuple[int, ...], final: tuple) -> None:
    """x viewed as ``split``, transposed by ``perm``, viewed as ``final``."""
    viewed, moved = ctx.tmp("blocks"), ctx.tmp("moved")
    ctx.emit(ViewAs(split), ctx.inputs[:1], [viewed])
    ctx.emit(Transpose(perm), [viewed], [moved])
    ctx.emit(ViewAs(final), [moved], ctx.outputs[:1])


def depth_to_space(ctx: TranslateContext) -> None:
    bs, mode = _block_mode(ctx)
    n, c, h, w = ctx.value(0).shape
    depth = _divided(ctx, c, bs * bs, "channels")
    final = (n, depth, D.mul(h, bs), D.mul(w, bs))
    if mode == "DCR":
        _rearrange(ctx, (n, bs, bs, depth, h, w), (0, 3, 4, 1, 5, 2), final)
    else:
        _rearrange(ctx, (n, depth, bs, bs, h, w), (0, 1, 4, 2, 5, 3), final)


def space_to_depth(ctx: TranslateContext) -> None:
    bs, mode = _block_mode(ctx)
    n, c, h, w = ctx.value(0).shape
    hb, wb = _divided(ctx, h, bs, "height"), _divided(ctx, w, bs, "width")
    perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    _rearrange(ctx, (n, c, hb, bs, wb, bs), perm, (n, D.mul(c, bs * bs), hb, wb))


def register(r) -> None:
    r.add("Einsum", (12, 28), einsum)
    r.add("EyeLike", (9, 22), eye_like)
    r.add("ReverseSequence", (10, 28), reverse_sequence)
    r.add("DepthToSpace", (1, 11, 13, 28), depth_to_space)
    r.add("SpaceToDepth", (1, 13, 28), space_to_depth)
    r.add("Scatter", (9, 11), scatter)
    r.add("Upsample", (7, 9), upsample)
    r.add("Det", (11, 22), det)
    r.add("GridSample", (16, 20, 22), grid_sample)
    r.add("BitCast", (26,), bitcast)
