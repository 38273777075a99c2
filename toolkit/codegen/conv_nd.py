"""Direct convolution and transposed convolution over any number of spatial dims (NC...),
any float dtype or int32: every Conv the register-tiled 2-D kernel of :mod:`.conv` does
not take (3-D, float64, float16, bfloat16, the int32 products of ConvInteger and
QLinearConv) and every ConvTranspose. int32 sums wrap as numpy's do, so they are exact
whenever the result fits. float16 and bfloat16 sum in a float32 scratch buffer shaped like
the output, rounded into the output once at the end: summing in the output itself would
round every partial sum to the narrow format.

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
from ..ir.dtypes import FLOAT32, DType
from .conv import Window, dims_in, inside, udiv
from .kernel import I64, KernelBuilder, compute_type, fptosi_sat, i64, intrinsic, unswitched
from .simd import mac

TensorType = tuple[DType, Sequence[Dim]]


@unswitched
def build_conv_nd(kb: KernelBuilder, params: tuple[Window, int, bool, bool], types: Sequence[TensorType]) -> None:
    """y = conv(x, w) (+ bias), or its transpose, for ``params`` (window, group,
    transposed, bias). Tensors: x (N, C, ...), w ((M, C/group, k...), transposed (C,
    M/group, k...)), [bias (M,)], [the float32 sums, y's shape: for a narrow float dtype,
    see :func:`sums_dtype`], y (N, M, ...). Scalars: the symbolic pads."""
    win, group, transposed, bias = params
    dt = types[0][0]
    b = kb.b
    x = kb.tensor(0, dt, types[0][1])
    w = kb.tensor(1, dt, types[1][1])
    bt = kb.tensor(2, dt, types[2][1]) if bias else None
    out = kb.tensor(len(types) - 1, dt, types[-1][1])
    y = kb.tensor(len(types) - 2, FLOAT32, types[-2][1]) if sums_dtype(dt) is not None else out
    pads = dims_in(kb, win.pads)
    r = win.rank
    a_t, b_t = (x, y) if transposed else (y, x)  # a: where the loops run; b: where the taps land
    if transposed:
        cg, mg = udiv(kb, x.dim(1), group), w.dim(1)
    else:
        cg, mg = w.dim(1), udiv(kb, y.dim(1), group)
    x_plane, y_plane = x.numel(2), y.numel(2)
    ct = compute_type(dt)
    integer = isinstance(ct, ir.IntType)
    zero = ir.Constant(ct, 0 if integer else 0.0)

    def multiply_add(acc: ir.Value, wv: ir.Value, xv: ir.Value) -> ir.Value:
        return b.add(acc, b.mul(wv, xv)) if integer else mac(b, acc, wv, xv)

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
                y.store(y_at, multiply_add(y.load(y_at), wv, x.load(x_at)))

    with kb.loop(y.dim(0), name="n") as n, kb.loop(i64(group), name="g") as g:
        with kb.loop(mg, name="m") as m, kb.loop(cg, name="c") as c:
            oc, ic = kb.add(kb.mul(g, mg), m), kb.add(kb.mul(g, cg), c)
            y_base = kb.mul(kb.add(kb.mul(n, y.dim(1)), oc), y_plane)
            x_base = kb.mul(kb.add(kb.mul(n, x.dim(1)), ic), x_plane)
            w_pair = kb.add(kb.mul(ic, mg), m) if transposed else kb.add(kb.mul(oc, cg), c)
            w_plane = kb.mul(w_pair, i64(win.taps))
            a_base, b_base = (x_base, y_base) if transposed else (y_base, x_base)
            spatial(0, i64(0), i64(0), i64(0), (a_base, b_base, w_plane))

    if y is not out:
        with kb.loop(out.numel(), name="round") as i:
            out.store(i, y.load(i))


def sums_dtype(dt: DType) -> DType | None:
    """The dtype of the scratch buffer a conv of ``dt`` sums in, or None when it sums in its
    output: float32 for the narrow floats."""
    return FLOAT32 if dt.is_narrow_float else None


def build_col2im(kb: KernelBuilder, params: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]],
                 types: Sequence[TensorType]) -> None:
    """ONNX Col2Im: the sum of the blocks (columns of x) back into an image, ``params``
    (strides, dilations, pads: the N begins then the N ends). Tensors: x (N, C * K, L), y
    (N, C, image...). Scalars: the N block sizes (K is their product), then the N counts
    of blocks per axis (L is their product). Block ``l`` holds, at kernel offset ``k``, the
    image element ``l * stride - pad_begin + k * dilation`` per axis (when inside)."""
    strides, dilations, pads = params
    r = len(strides)
    b = kb.b
    dt = types[0][0]
    x = kb.tensor(0, dt, types[0][1])
    y = kb.tensor(1, dt, types[1][1])
    block = [kb.scalar(a) for a in range(r)]
    counts = [kb.scalar(r + a) for a in range(r)]
    ct = compute_type(dt)
    zero = ir.Constant(ct, 0 if isinstance(ct, ir.IntType) else 0.0)
    cols, plane = x.dim(2), y.numel(2)
    k_total = i64(1)
    for v in block:
        k_total = kb.mul(k_total, v)
    add = b.add if isinstance(ct, ir.IntType) else b.fadd

    def blocks(axis: int, ks: list[ir.Value], l_row: ir.Value, y_row: ir.Value, x_base: ir.Value,
               y_base: ir.Value) -> None:
        if axis == r:
            at = kb.add(y_base, y_row)
            y.store(at, add(y.load(at), x.load(kb.add(x_base, l_row))))
            return
        s, size = strides[axis], y.dim(2 + axis)
        shift = b.sub(kb.mul(ks[axis], i64(dilations[axis])), i64(pads[axis]))  # position = l * s + shift
        lo, hi = inside(kb, shift, s, counts[axis], size)
        with kb.loop(b.sub(hi, lo), name=f"l{axis}") as t:
            pos_l = kb.add(lo, t)
            pos_y = kb.add(kb.mul(pos_l, i64(s)), shift)
            blocks(axis + 1, ks, kb.add(kb.mul(l_row, counts[axis]), pos_l),
                   kb.add(kb.mul(y_row, size), pos_y), x_base, y_base)

    def kernel(axis: int, ks: list[ir.Value], kk: ir.Value, nc: ir.Value, y_base: ir.Value) -> None:
        if axis == r:
            # x[n, c * K + kk] starts at (nc * K + kk) * L
            blocks(0, ks, i64(0), i64(0), kb.mul(kb.add(kb.mul(nc, k_total), kk), cols), y_base)
            return
        with kb.loop(block[axis], name=f"k{axis}") as k:
            kernel(axis + 1, ks + [k], kb.add(kb.mul(kk, block[axis]), k), nc, y_base)

    with kb.loop(kb.mul(y.dim(0), y.dim(1)), name="nc") as nc:
        y_base = kb.mul(nc, plane)
        with kb.loop(plane, name="init") as i:
            y.store(kb.add(y_base, i), zero)
        kernel(0, [], i64(0), nc, y_base)


def _sample_at(kb: KernelBuilder, x, plane: ir.Value, h: ir.Value, w: ir.Value, i: ir.Value, j: ir.Value,
               zero: ir.Value) -> ir.Value:
    """x[plane + i * w + j] when (i, j) is inside the h x w image, else 0 (nothing loaded)."""
    b = kb.b
    inb = b.and_(b.icmp_unsigned("<", i, h), b.icmp_unsigned("<", j, w))
    with b.if_else(inb) as (then, otherwise):
        with then:
            v = x.load(kb.add(plane, kb.add(kb.mul(i, w), j)))
            loaded = b.block
        with otherwise:
            skipped = b.block
    out = b.phi(zero.type)
    out.add_incoming(v, loaded)
    out.add_incoming(zero, skipped)
    return out


@unswitched
def build_deform_conv(kb: KernelBuilder, params: tuple[Window, int, int, bool, bool],
                      types: Sequence[TensorType]) -> None:
    """ONNX DeformConv (2-D): each tap of each output position samples x at its regular
    place (``o * stride - pad_begin + k * dilation``) moved by its offset, bilinearly,
    zero outside the image, times its mask. ``params``: window, group, offset_group,
    bias, mask. Tensors: x (N, C, H, W), w (M, C/group, kH, kW), offset (N, offset_group *
    kH * kW * 2, oH, oW: per tap its (h, w) shift), [bias (M,)], [mask (N, offset_group *
    kH * kW, oH, oW)], y (N, M, oH, oW). Each sample is taken once and feeds the output
    channels of its group."""
    win, group, offset_group, bias, masked = params
    dt = types[0][0]
    b = kb.b
    ct = compute_type(dt)
    x = kb.tensor(0, dt, types[0][1])
    w = kb.tensor(1, dt, types[1][1])
    off = kb.tensor(2, dt, types[2][1])
    k = 3
    bt = mt = None
    if bias:
        bt, k = kb.tensor(k, dt, types[k][1]), k + 1
    if masked:
        mt = kb.tensor(k, dt, types[k][1])
    y = kb.tensor(len(types) - 1, dt, types[-1][1])
    zero, one = ir.Constant(ct, 0.0), ir.Constant(ct, 1.0)
    (kh_n, kw_n), taps = win.kernel, win.taps
    c_n, h_n, w_n = x.dim(1), x.dim(2), x.dim(3)
    m_n, oh_n, ow_n = y.dim(1), y.dim(2), y.dim(3)
    out_plane = kb.mul(oh_n, ow_n)
    cg, mg = w.dim(1), udiv(kb, m_n, group)
    c_per_og = udiv(kb, c_n, offset_group)

    with kb.loop(kb.mul(y.dim(0), m_n), name="nm") as nm:
        start = bt.load(b.urem(nm, m_n)) if bt is not None else zero
        base = kb.mul(nm, out_plane)
        with kb.loop(out_plane, name="init") as i:
            y.store(kb.add(base, i), start)

    def position(o: ir.Value, axis: int, kk: int, shift: ir.Value) -> ir.Value:
        """Where tap ``kk`` of output ``o`` samples along ``axis``: a float."""
        regular = b.sub(kb.add(kb.mul(o, i64(win.strides[axis])), i64(kk * win.dilations[axis])),
                        i64(win.pads[axis]))
        return b.fadd(b.sitofp(regular, ct), shift)

    with kb.loop(y.dim(0), name="n") as n, kb.loop(c_n, name="ic") as ic:
        g = b.udiv(ic, cg)
        c = b.urem(ic, cg)
        og = b.udiv(ic, c_per_og)
        x_plane = kb.mul(kb.add(kb.mul(n, c_n), ic), kb.mul(h_n, w_n))
        for kh in range(kh_n):
            for kw in range(kw_n):
                tap = kb.add(kb.mul(og, i64(taps)), i64(kh * kw_n + kw))  # (offset group, tap)
                off_h = kb.mul(kb.add(kb.mul(n, off.dim(1)), kb.mul(tap, i64(2))), out_plane)
                off_w = kb.add(off_h, out_plane)
                mask_at = kb.mul(kb.add(kb.mul(n, mt.dim(1)), tap), out_plane) if mt is not None else None
                with kb.loop(oh_n, name="oh") as oh, kb.loop(ow_n, name="ow") as ow:
                    at = kb.add(kb.mul(oh, ow_n), ow)
                    ph = position(oh, 0, kh, off.load(kb.add(off_h, at)))
                    pw = position(ow, 1, kw, off.load(kb.add(off_w, at)))
                    fh, fw = intrinsic(b, "llvm.floor", ph), intrinsic(b, "llvm.floor", pw)
                    lh, lw = b.fsub(ph, fh), b.fsub(pw, fw)
                    h0, w0 = fptosi_sat(b, fh, I64), fptosi_sat(b, fw, I64)
                    h1, w1 = kb.add(h0, i64(1)), kb.add(w0, i64(1))
                    top = b.fadd(b.fmul(b.fsub(one, lw), _sample_at(kb, x, x_plane, h_n, w_n, h0, w0, zero)),
                                 b.fmul(lw, _sample_at(kb, x, x_plane, h_n, w_n, h0, w1, zero)))
                    bottom = b.fadd(b.fmul(b.fsub(one, lw), _sample_at(kb, x, x_plane, h_n, w_n, h1, w0, zero)),
                                    b.fmul(lw, _sample_at(kb, x, x_plane, h_n, w_n, h1, w1, zero)))
                    v = b.fadd(b.fmul(b.fsub(one, lh), top), b.fmul(lh, bottom))
                    if mt is not None:
                        v = b.fmul(v, mt.load(kb.add(mask_at, at)))
                    with kb.loop(mg, name="m") as m:
                        oc = kb.add(kb.mul(g, mg), m)
                        wv = w.load(kb.add(kb.mul(kb.add(kb.mul(oc, cg), c), i64(taps)), i64(kh * kw_n + kw)))
                        y_at = kb.add(kb.mul(kb.add(kb.mul(n, m_n), oc), out_plane), at)
                        y.store(y_at, mac(b, y.load(y_at), wv, v))
