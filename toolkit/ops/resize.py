"""Resize: nearest, (N-)linear and (N-)cubic resampling, every coordinate transformation
mode of ONNX, with scales or sizes known at compile time or only at run time.

Output dims: scales known at compile time give ``floor(dim * scale)`` exactly, as a dim
expression over the float32 scale's exact fraction (``0.5`` gives ``n // 2``); sizes give
themselves (or, keeping the aspect ratio, are computed now when the dims are static). Scales
known only at run time, and aspect-ratio sizes over symbolic dims, give fresh data-dependent
symbols that a kernel computes in float64 before the output is allocated; run-time sizes
are loaded as they are. Which axes actually resample is decided now where possible: an
axis with scale 1 and an unchanged dim is copied through, as onnx.reference does.

Antialiasing (linear and cubic) gives each resized axis a weights table of (output dim,
taps), where the taps grow as the scale shrinks: a number now when the scale is known now
(or is the ratio of static sizes), else a fresh symbol a kernel computes from the run-time
scale before the tables are allocated.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction

import numpy as np

from ..codegen import plan as P
from ..codegen import resize as R
from ..ir import dims as D
from ..ir.dims import Dim
from ..ir.dtypes import FLOAT64, FLOATS, NUMERIC
from ..ir.graph import CompileError, Graph, Node
from .base import CoreOp, InferContext, planned, replace_node, scratch_of
from .shape import Identity, normalize_axes

MODES = ("nearest", "linear", "cubic")
COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
               "tf_crop_and_resize", "tf_half_pixel_for_nn")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")
POLICIES = ("stretch", "not_larger", "not_smaller")
# the code of one output element reads at most this many inputs: cubic over up to 5 axes,
# linear over up to 7
MAX_LEAVES = 5000


@dataclass(frozen=True)
class AxisPlan:
    """One axis that scales or sizes are given for: ``i`` indexes them (and the roi);
    ``out`` is its output dim; ``how`` says where its scale comes from: "scale" (``scale``,
    known now), "ratio" (output dim / input dim, at run time), "kernel" (the dims kernel);
    ``resized`` is False for an axis known to be copied through; ``taps``: antialias only,
    the taps of each output (see codegen.resize.antialias_taps)."""

    axis: int
    i: int
    out: Dim
    how: str
    scale: float | None = None
    resized: bool = True
    taps: Dim | None = None


@dataclass(frozen=True)
class ResizeInfo:
    axes: tuple[AxisPlan, ...]
    dims_kernel: bool  # output dims computed by build_resize_dims from scales or sizes
    load_sizes: bool  # sizes (stretch) loaded at run time


def scaled_dim(d: Dim, scale: float) -> Dim:
    """floor(d * scale) for a positive float32 scale (held in a float64), exactly as
    numpy computes it in float64 (for dims below 2**29 the product is exact)."""
    if isinstance(d, int):
        return int(np.floor(np.float64(d) * scale))
    f = Fraction(scale)
    return D.floordiv(D.mul(d, f.numerator), f.denominator)


@dataclass(frozen=True)
class Resize(CoreOp):
    """Inputs: X, roi (tf_crop_and_resize only, else ""), scales or "", sizes or "".
    ``axes``: the axes roi, scales and sizes are for (None: all)."""

    mode: str = "nearest"
    coord: str = "half_pixel"
    nearest_mode: str = "round_prefer_floor"
    cubic_a: float = -0.75
    exclude_outside: bool = False
    extrapolation: float = 0.0
    policy: str = "stretch"
    axes: tuple[int, ...] | None = None
    antialias: bool = False  # linear and cubic only: stretch the kernel when downsampling
    plan: P.Plan | None = field(default=None, repr=False)  # its kernel (toolkit.passes.kernels)

    def _check_params(self, ctx: InferContext) -> None:
        for what, v, allowed in (("mode", self.mode, MODES), ("coordinate_transformation_mode", self.coord, COORD_MODES),
                                 ("nearest_mode", self.nearest_mode, NEAREST_MODES),
                                 ("keep_aspect_ratio_policy", self.policy, POLICIES)):
            if v not in allowed:
                ctx.fail(f"{what} '{v}' is not one of {', '.join(allowed)}")

    def infer(self, ctx: InferContext) -> None:
        self._check_params(ctx)
        x = ctx.input(0)
        ctx.check_dtype(x, NUMERIC)
        if x.rank == 0:
            ctx.fail(f"cannot resize the scalar '{x.name}'")
        axes = list(range(x.rank)) if self.axes is None else normalize_axes(ctx, self.axes, x.rank)
        k = len(axes)
        roi, scales, sizes = ctx.optional(1), ctx.optional(2), ctx.optional(3)
        if (scales is None) == (sizes is None):
            ctx.fail("exactly one of scales and sizes must be given")
        if scales is not None:
            self._float_vector(ctx, scales, "scales", k)
        elif ctx.shape_length(sizes, "sizes") != k:
            ctx.fail(f"sizes '{sizes.name}' has {sizes.shape[0]} elements; resizing {k} axes takes {k}")
        roi_known = None
        if self.coord == "tf_crop_and_resize":
            if roi is None:
                ctx.fail("tf_crop_and_resize needs the input roi")
            self._float_vector(ctx, roi, "roi", 2 * k)
            roi_known = None if roi.const is None else roi.const.reshape(-1)
        plans: list[AxisPlan] = []
        dims_kernel = load_sizes = False
        if scales is not None:
            known = None if scales.const is None else scales.const.reshape(-1)
            for i, a in enumerate(axes):
                if known is None:
                    plans.append(AxisPlan(a, i, ctx.fresh("resize"), "kernel"))
                    dims_kernel = True
                    continue
                s = float(known[i])
                if not s > 0:
                    ctx.fail(f"scales[{i}] is {s}; scales must be positive")
                plans.append(AxisPlan(a, i, scaled_dim(x.shape[a], s), "scale", s))
        else:
            vals = sizes.int_contents()
            for i, s in enumerate(vals or ()):
                if isinstance(s, int) and s < 0:
                    ctx.fail(f"sizes[{i}] is {s}; sizes must not be negative")
            static = vals is not None and all(isinstance(v, int) for v in vals) and \
                all(isinstance(x.shape[a], int) and x.shape[a] > 0 for a in axes)
            if self.policy == "stretch":
                for i, a in enumerate(axes):
                    plans.append(AxisPlan(a, i, vals[i] if vals is not None else ctx.fresh("resize"), "ratio"))
                load_sizes = vals is None
            elif static:
                ratios = [vals[i] / x.shape[a] for i, a in enumerate(axes)]
                s = min(ratios) if self.policy == "not_larger" else max(ratios)
                plans += [AxisPlan(a, i, int(s * x.shape[a] + 0.5), "scale", s) for i, a in enumerate(axes)]
            else:
                plans += [AxisPlan(a, i, ctx.fresh("resize"), "kernel") for i, a in enumerate(axes)]
                dims_kernel = True
        shape = list(x.shape)
        for j, p in enumerate(plans):
            shape[p.axis] = p.out
            same = p.out == x.shape[p.axis]
            copied = same and (p.how == "ratio" or p.how == "scale" and p.scale == 1.0)
            if copied and self.coord == "tf_crop_and_resize":
                copied = roi_known is not None and roi_known[p.i] == 0 and roi_known[k + p.i] == 1
            if copied:
                plans[j] = AxisPlan(p.axis, p.i, p.out, p.how, p.scale, resized=False)
            elif self.antialias:
                plans[j] = replace(p, taps=self._taps(ctx, p, x.shape[p.axis]))
        ctx.info = ResizeInfo(tuple(plans), dims_kernel, load_sizes)
        ctx.set_output(0, x.dtype, shape)

    def _taps(self, ctx: InferContext, p: AxisPlan, d: Dim) -> Dim:
        """The taps of each output of an antialiased axis: known now when its scale is."""
        scale = p.scale if p.how == "scale" else None
        if p.how == "ratio" and isinstance(p.out, int) and isinstance(d, int):
            scale = p.out / d if d else math.inf
        return ctx.fresh("resize_taps") if scale is None else R.antialias_taps(self.mode, scale)

    @staticmethod
    def _float_vector(ctx: InferContext, v, what: str, n: int) -> None:
        if v.dtype not in FLOATS:
            ctx.fail(f"{what} '{v.name}' has dtype {v.dtype}; it must be a float tensor")
        if v.rank != 1 or v.shape[0] != n:
            ctx.fail(f"{what} '{v.name}' has shape {D.fmt_shape(v.shape)}; expected ({n},)")

    def simplify(self, node: Node, graph: Graph) -> list[Node] | None:
        info: ResizeInfo = node.info
        if not info.dims_kernel and not info.load_sizes and not any(p.resized for p in info.axes):
            return replace_node(graph, node, Identity(), [node.inputs[0]])
        return None

    def select(self, graph: Graph, node: Node, tuning: P.Tuning, route: str | None = None) -> P.Plan:
        """The kernel plan (:func:`toolkit.codegen.plan.plan_resize`): by rows or by elements."""
        axes = [(p.axis, p.scale if p.how == "scale" else None) for p in node.info.axes if p.resized]
        plan = P.plan_resize(self.mode, self.coord, self.antialias, axes, graph.values[node.inputs[0]].shape)
        P.check_route(route, [plan.route])
        return plan

    def lower(self, lw, node) -> None:
        info: ResizeInfo = node.info
        x, out = lw.value(node.inputs[0]), lw.value(node.outputs[0])
        zero = lw.const_slot(0)
        bits = {}
        if info.dims_kernel:
            scales = bool(node.inputs[2])
            slots = []
            for p in info.axes:
                slots += [lw.result_slot(str(p.out)), lw.result_slot(f"{out.name}.scale{p.axis}")]
            error = ("scales[{0}] is not a positive number" if scales else
                     "sizes[{0}] is {1}; sizes must not be negative")
            plan = R.DimsPlan("scales" if scales else "sizes", self.policy, tuple(p.axis for p in info.axes))
            lw.call(R.build_resize_dims, plan, [lw.tensor(x.name), lw.tensor(node.inputs[2] or node.inputs[3])],
                    slots, error=error, outputs=0)
            for j, p in enumerate(info.axes):
                lw.define(p.out, slots[2 * j])
                bits[p.axis] = slots[2 * j + 1]
        elif info.load_sizes:
            vals = lw.values_of(node.inputs[3])
            for p in info.axes:
                lw.check_le(zero, vals[p.i], f"{lw.context()}: sizes[{p.i}] is {{1}}; sizes must not be negative")
                lw.define(p.out, vals[p.i])
        elif not node.inputs[2]:
            for p in info.axes:
                lw.check_nonnegative(p.out, f"{lw.context()}: sizes[{p.i}] ({p.out}) is {{1}}; "
                                            f"sizes must not be negative")
        if self.antialias:
            self._count_taps(lw, node, bits)
        scalars = []
        resized = []
        tables = []
        tf_crop = self.coord == "tf_crop_and_resize"
        for p in info.axes:
            if not p.resized:
                continue
            if self.antialias:
                tables.append(lw.scratch(f"antialias weights of axis {p.axis}", FLOAT64, (p.out, p.taps)))
            slot = None
            if p.axis in bits:
                slot = len(scalars)
                scalars.append(bits[p.axis])
            resized.append(R.ResizedAxis(p.axis, p.scale if p.how == "scale" else None, slot,
                                         p.i if tf_crop else None))
        if R.leaves(self.mode, resized, self.antialias) > MAX_LEAVES:
            raise CompileError(f"{lw.context()}: {self.mode} resampling of {len(resized)} axes at once is not "
                               f"supported (at most {MAX_LEAVES} reads per output element)")
        kernel = planned(self, node)
        plan = R.ResizePlan(self.mode, self.coord, self.nearest_mode, self.cubic_a, self.exclude_outside,
                            self.extrapolation, tuple(resized), len(info.axes), self.antialias,
                            kernel.route == "rows")
        row = scratch_of(lw, kernel)
        tensors = [lw.tensor(x.name)] + ([lw.tensor(node.inputs[1])] if tf_crop else []) + tables + row + \
            [lw.alloc(out.name)]
        lw.call(R.build_resize, plan, tensors, scalars, error="cannot resize axis {0} of size 0 to size {1}")

    def _count_taps(self, lw, node, bits: dict) -> None:
        """Define the taps of the antialiased axes whose scale is known only at run time:
        from the scale's bits (``bits``: axis -> slot), else from output dim / input dim."""
        todo = [p for p in node.info.axes if p.resized and not isinstance(p.taps, int)]
        if not todo:
            return
        slots = []
        for p in todo:
            slots += [lw.slot(p.out), lw.result_slot(str(p.taps))]
        slots += [bits[p.axis] for p in todo if p.axis in bits]
        plan = R.TapsPlan(self.mode, tuple(p.axis for p in todo), tuple(p.axis in bits for p in todo))
        lw.call(R.build_resize_taps, plan, [lw.tensor(node.inputs[0])], slots, outputs=0)
        for j, p in enumerate(todo):
            lw.define(p.taps, slots[2 * j + 1])
