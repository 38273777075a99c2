"""Direct convolution and transposed convolution over any number of spatial dims (NC...),
float32 or float64: every Conv the register-tiled 2-D kernel of :mod:`.conv` does not take
(3-D, float64) and every ConvTranspose.

Both relate two position spaces by ``b = a * stride - pad_begin + k * dilation`` per
spatial axis: a Conv computes output ``a`` from input ``b``, a ConvTranspose spreads input
``a`` onto output ``b``. So one loop nest does both: over the ``a`` positions of every axis
but the last, the taps clamped so ``b`` stays inside its tensor (:func:`.conv.inside`),
then per tap of the last axis the run of ``a`` positions it reaches, a contiguous loop with
no bounds tests that LLVM vectorizes. The output starts as the bias (or zeros) and each
(output channel, input channel) pair adds into it.
"""
from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir

from ..ir.dims import Dim
from ..ir.dtypes import DType
from .conv import Window, dims_in, inside, mac, udiv
from .kernel import KernelBuilder, compute_type, i64

TensorType = tuple[DType, Sequence[Dim]]


def build_conv_nd(kb: KernelBuilder, params: tuple[Window, int, bool, bool], types: Sequence[TensorType]) -> None:
    """y = conv(x, w) (+ bias), or its transpose, for ``params`` (window, group,
    transposed, bias). Tensors: x (N, C, ...), w ((M, C/group, k...), transposed (C,
    M/group, k...)), [bias (M,)], y (N, M, ...). Scalars: the symbolic pads."""
    win, group, transposed, bias = params
    dt = types[0][0]
    b = kb.b
    x = kb.tensor(0, dt, types[0][1])
    w = kb.tensor(1, dt, types[1][1])
    bt = kb.tensor(2, dt, types[2][1]) if bias else None
    y = kb.tensor(len(types) - 1, dt, types[-1][1])
    pads = dims_in(kb, win.pads)
    r = win.rank
    a_t, b_t = (x, y) if transposed else (y, x)  # a: where the loops run; b: where the taps land
    if transposed:
        cg, mg = udiv(kb, x.dim(1), group), w.dim(1)
    else:
        cg, mg = w.dim(1), udiv(kb, y.dim(1), group)
    x_plane, y_plane = x.numel(2), y.numel(2)
    zero = ir.Constant(compute_type(dt), 0.0)

    with kb.loop(kb.mul(y.dim(0), y.dim(1)), name="nm") as nm:
        start = bt.load(b.urem(nm, y.dim(1))) if bt is not None else zero
        base = kb.mul(nm, y_plane)
        with kb.loop(y_plane, name="init") as i:
            y.store(kb.add(base, i), start)

    def spatial(axis: int, a_row: ir.Value, b_row: ir.Value, w_row: ir.Value, planes) -> None:
        """The loops of spatial ``axis``: a_row, b_row, w_row are the flat positions so far
        (in units of the dims up to ``axis``) in the a tensor, the b tensor and the kernel."""
        s, d, k_n = win.strides[axis], win.dilations[axis], win.kernel[axis]
        p = pads[axis]
        a_n, b_n = a_t.dim(2 + axis), b_t.dim(2 + axis)
        if axis < r - 1:
            with kb.loop(a_n, name=f"a{axis}") as a:
                first = b.sub(kb.mul(a, i64(s)), p)  # where tap 0 lands
                lo, hi = inside(kb, first, d, i64(k_n), b_n)
                with kb.loop(b.sub(hi, lo), name=f"k{axis}") as t:
                    k = kb.add(lo, t)
                    spatial(axis + 1, kb.add(kb.mul(a_row, a_n), a), kb.add(kb.mul(b_row, b_n),
                            kb.add(first, kb.mul(k, i64(d)))), kb.add(kb.mul(w_row, i64(k_n)), k), planes)
            return
        a_base, b_base, w_plane = planes
        a_row, b_row = kb.add(a_base, kb.mul(a_row, a_n)), kb.add(b_base, kb.mul(b_row, b_n))
        for k in range(k_n):
            shift = b.sub(i64(k * d), p)  # b = a * s + shift
            lo, hi = inside(kb, shift, s, a_n, b_n)
            wv = w.load(kb.add(w_plane, kb.add(kb.mul(w_row, i64(k_n)), i64(k))))
            with kb.loop(b.sub(hi, lo), name="run") as t:
                a = kb.add(lo, t)
                a_at = kb.add(a_row, a)
                b_at = kb.add(b_row, kb.add(kb.mul(a, i64(s)), shift))
                y_at, x_at = (b_at, a_at) if transposed else (a_at, b_at)
                y.store(y_at, mac(b, y.load(y_at), wv, x.load(x_at)))

    with kb.loop(y.dim(0), name="n") as n, kb.loop(i64(group), name="g") as g:
        with kb.loop(mg, name="m") as m, kb.loop(cg, name="c") as c:
            oc, ic = kb.add(kb.mul(g, mg), m), kb.add(kb.mul(g, cg), c)
            y_base = kb.mul(kb.add(kb.mul(n, y.dim(1)), oc), y_plane)
            x_base = kb.mul(kb.add(kb.mul(n, x.dim(1)), ic), x_plane)
            w_pair = kb.add(kb.mul(ic, mg), m) if transposed else kb.add(kb.mul(oc, cg), c)
            w_plane = kb.mul(w_pair, i64(win.taps))
            a_base, b_base = (x_base, y_base) if transposed else (y_base, x_base)
            spatial(0, i64(0), i64(0), i64(0), (a_base, b_base, w_plane))
