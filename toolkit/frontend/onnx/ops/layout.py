"""Layout ONNX ops -> Tile, Pad, Split (toolkit.ops.layout) and Resize (toolkit.ops.resize).

Pad-2 takes its pads and value as attributes, from 11 as inputs (axes from 18, wrap mode
from 19; 21 and later change only the types). Axes known only at run time make pads for
every axis (PerAxis), so the Pad itself needs no axes. Split-2 and -11 take their sizes as an
attribute, from 13 as an input; 18 adds num_outputs, whose parts are ceil(dim / n) with a
smaller last one (before 18 the parts must be equal). Resize-10 is Upsample's meaning
(asymmetric coordinates; nearest rounds down when upsampling and up when downsampling);
11 adds roi, sizes and the coordinate, nearest and cubic attributes (and
tf_half_pixel_for_nn, gone at 13); 18 adds axes, keep_aspect_ratio_policy and antialias
(which only linear and cubic use: nearest ignores it); 19 half_pixel_symmetric.

Parameters that are tensors may be run-time values. One whose length is symbolic is viewed
with the length the op needs, so a wrong length fails at run time naming the node.
"""
from __future__ import annotations

import numpy as np

from ....ops.layout import Pad, Split, Tile
from ....ops.resize import COORD_MODES, Resize
from ....ops.shape import PerAxis, ViewAs
from ..translate import TranslateContext
from .shape import known_axes


def _with_length(ctx: TranslateContext, i: int, n: int, what: str) -> str:
    """Input ``i``, viewed as ``n`` elements if its length is symbolic."""
    v = ctx.value(i)
    if v.rank == 1 and not isinstance(v.shape[0], int):
        out = ctx.tmp(what)
        ctx.emit(ViewAs((n,)), [v.name], [out])
        return out
    return v.name


def tile(ctx: TranslateContext) -> None:
    ctx.emit(Tile(), [ctx.inputs[0], _with_length(ctx, 1, ctx.value(0).rank, "repeats")])


def pad(ctx: TranslateContext) -> None:
    mode = ctx.attr("mode", "constant")
    if mode == "wrap" and ctx.version < 19:
        ctx.fail(f"mode 'wrap' exists from Pad-19; this is Pad-{ctx.version}")
    x = ctx.value(0)
    if ctx.version < 11:
        pads = ctx.ints("pads")
        if pads is None:
            ctx.fail("attribute 'pads' is required")
        inputs = [x.name, ctx.constant("pads", np.array(pads, np.int64))]
        if mode == "constant":
            inputs.append(ctx.constant("value", np.array(float(ctx.attr("value", 0.0)), x.dtype.np)))
        ctx.emit(Pad(mode), inputs)
        return
    axes = known_axes(ctx, 3) if ctx.version >= 18 and ctx.has(3) else None
    axes_at_run_time = axes is None and ctx.version >= 18 and ctx.has(3)
    k = len(axes) if axes is not None else ctx.value(3).shape[0] if axes_at_run_time else x.rank
    if not isinstance(k, int):
        ctx.fail(f"axes '{ctx.inputs[3]}' has {k} entries; their number must be static")
    inputs = [x.name, _with_length(ctx, 1, 2 * k, "pads")]
    if mode == "constant" and ctx.has(2):
        inputs.append(ctx.inputs[2])
    if axes_at_run_time:
        # the axes are known only at run time: pads for every axis (0 on those not named)
        full = ctx.tmp("pads")
        ctx.emit(PerAxis(x.rank, ((2, 0),)), [ctx.inputs[3], inputs[1]], [full])
        inputs[1] = full
    ctx.emit(Pad(mode, axes), inputs)


def split(ctx: TranslateContext) -> None:
    axis = int(ctx.attr("axis", 0))
    outs = ctx.outputs
    if ctx.version < 13:
        sizes = ctx.ints("split")
        inputs = [ctx.inputs[0]] + ([ctx.constant("split", np.array(sizes, np.int64))] if sizes else [])
        ctx.emit(Split(axis), inputs, outs)
        return
    given = ctx.has(1) and ctx.value(1).shape != (0,)  # an empty split is no split
    num = ctx.attr("num_outputs") if ctx.version >= 18 else None
    if given:
        if num is not None:
            ctx.fail("give either the input 'split' or the attribute 'num_outputs', not both")
        ctx.emit(Split(axis), [ctx.inputs[0], _with_length(ctx, 1, len(outs), "split")], outs)
        return
    if num is not None and int(num) != len(outs):
        ctx.fail(f"num_outputs is {num}, but the node has {len(outs)} outputs")
    # from 18 the parts are ceil(dim / n) with a smaller last one (without num_outputs too,
    # as in onnx.reference); before, they must be equal
    ctx.emit(Split(axis, even=ctx.version < 18), [ctx.inputs[0]], outs)


def _float_input(ctx: TranslateContext, i: int) -> str:
    """Input ``i`` if it is given and not empty (Resize's way of leaving out scales)."""
    if not ctx.has(i):
        return ""
    v = ctx.value(i)
    return "" if v.shape == (0,) else v.name


def resize(ctx: TranslateContext) -> None:
    x = ctx.value(0)
    if ctx.version < 11:
        mode = ctx.attr("mode", "nearest")
        if mode not in ("nearest", "linear"):
            ctx.fail(f"mode '{mode}' is not one of nearest, linear")
        ctx.emit(Resize(mode, "asymmetric", "simple"), [x.name, "", _with_length(ctx, 1, x.rank, "scales"), ""])
        return
    mode = ctx.attr("mode", "nearest")
    coord = ctx.attr("coordinate_transformation_mode", "half_pixel")
    if coord not in COORD_MODES or (coord == "tf_half_pixel_for_nn" and ctx.version >= 13) or \
            (coord == "half_pixel_symmetric" and ctx.version < 19):
        ctx.fail(f"coordinate_transformation_mode '{coord}' does not exist in Resize-{ctx.version}")
    antialias = ctx.version >= 18 and bool(ctx.attr("antialias", 0)) and mode != "nearest"
    axes = ctx.ints("axes") if ctx.version >= 18 else None
    k = len(axes) if axes is not None else x.rank
    scales, sizes = _float_input(ctx, 2), _float_input(ctx, 3)
    if scales and sizes:
        ctx.fail("give either scales or sizes, not both (leave the other out or empty)")
    if not scales and not sizes:
        ctx.fail("one of scales and sizes is required")
    if scales:
        scales = _with_length(ctx, 2, k, "scales")
    else:
        sizes = _with_length(ctx, 3, k, "sizes")
    roi = ""
    if coord == "tf_crop_and_resize":
        if not ctx.has(1):
            ctx.fail("tf_crop_and_resize needs the input roi")
        roi = _with_length(ctx, 1, 2 * k, "roi")
    ctx.emit(Resize(mode, coord, ctx.attr("nearest_mode", "round_prefer_floor"),
                    float(ctx.attr("cubic_coeff_a", -0.75)), bool(ctx.attr("exclude_outside", 0)),
                    float(ctx.attr("extrapolation_value", 0.0)), ctx.attr("keep_aspect_ratio_policy", "stretch"),
                    axes, antialias), [x.name, roi, scales, sizes])


def register(r) -> None:
    r.add("Tile", (6, 13), tile)
    r.add("Pad", (2, 11, 13, 18, 19, 21, 23, 24, 25), pad)
    r.add("Split", (2, 11, 13, 18), split)
    r.add("Resize", (10, 11, 13, 18, 19), resize)

