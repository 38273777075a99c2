"""Layout kernels: Tile and Pad (Split copies with the Slice kernel of :mod:`.movement`).

Both walk the output in row-major order. The axes after the last tiled or padded one are
the same on both sides, so their elements move as one contiguous block; along the last
tiled or padded axis the kept elements are one contiguous run too, so the per-element
work is confined to pad borders.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from llvmlite import ir

from ..ir.dims import Dim
from ..ir.dtypes import DType
from .kernel import STATUS_INVALID_INPUT, KernelBuilder, Tensor, i64, intrinsic

TensorType = tuple[DType, Sequence[Dim]]

PAD_MODES = ("constant", "reflect", "edge", "wrap")


def _copy(kb: KernelBuilder, src: Tensor, src_off: ir.Value, dst: Tensor, dst_off: ir.Value,
          n: ir.Value) -> None:
    """dst[dst_off + i] = src[src_off + i] for i < n (elements as stored)."""
    with kb.loop(n, name="cp") as i:
        dst.store_raw(kb.add(dst_off, i), src.load_raw(kb.add(src_off, i)))


def _fill(kb: KernelBuilder, dst: Tensor, dst_off: ir.Value, n: ir.Value, value: ir.Value) -> None:
    with kb.loop(n, name="fill") as i:
        dst.store_raw(kb.add(dst_off, i), value)


def build_tile(kb: KernelBuilder, tiled: tuple[bool, ...], types: Sequence[TensorType]) -> None:
    """out = tile(x, repeats). ``tiled`` marks the axes whose repeat count may differ from 1;
    scalars: the repeat count of each of them, in axis order. Tensors: x, out."""
    x = kb.tensor(0, *types[0])
    o = kb.tensor(1, *types[1])
    xs, os_ = x.strides(), o.strides()
    axes = [a for a, t in enumerate(tiled) if t]
    reps = {a: kb.scalar(j) for j, a in enumerate(axes)}
    if not axes:
        _copy(kb, x, i64(0), o, i64(0), x.numel())
        return
    last = axes[-1]

    def level(axis: int, x_off: ir.Value, o_off: ir.Value) -> None:
        d = x.dim(axis)
        if axis == last:
            # x's slab under this prefix is contiguous (d rows of the untiled trailing block):
            # it lands ``reps`` times, one slab after another
            slab = kb.mul(d, xs[axis])
            with kb.loop(reps[axis], name="rep") as r:
                _copy(kb, x, x_off, o, kb.add(o_off, kb.mul(r, slab)), slab)
            return
        if axis in reps:
            with kb.loop(reps[axis], name=f"rep{axis}") as r:
                with kb.loop(d, name=f"ax{axis}") as i:
                    level(axis + 1, kb.add(x_off, kb.mul(i, xs[axis])),
                          kb.add(o_off, kb.mul(kb.add(kb.mul(r, d), i), os_[axis])))
            return
        with kb.loop(d, name=f"ax{axis}") as i:
            level(axis + 1, kb.add(x_off, kb.mul(i, xs[axis])), kb.add(o_off, kb.mul(i, os_[axis])))

    level(0, i64(0), i64(0))


@dataclass(frozen=True)
class PadPlan:
    """``padded``: the axes whose pads may be non-zero (the others are copied through);
    ``has_value``: constant mode reads its value from a tensor (else 0)."""

    mode: str
    padded: tuple[int, ...]
    has_value: bool

    @property
    def kernel_name(self) -> str:
        return f"pad_{self.mode}"


def _source(kb: KernelBuilder, mode: str, s: ir.Value, n: ir.Value) -> ir.Value:
    """The position in ``[0, n)`` that numpy.pad reads for position ``s`` outside it (n > 0,
    checked by the caller; the divisors are kept non-zero anyway)."""
    b = kb.b
    if mode == "edge":
        return intrinsic(b, "llvm.smax", i64(0), intrinsic(b, "llvm.smin", s, b.sub(n, i64(1))))

    def floormod(v: ir.Value, m: ir.Value) -> ir.Value:
        r = b.srem(v, m)
        return b.select(b.icmp_signed("<", r, i64(0)), b.add(r, m), r)

    safe_n = intrinsic(b, "llvm.smax", n, i64(1))
    if mode == "wrap":
        return floormod(s, safe_n)
    # reflect: the period is 2 (n - 1), mirrored on the first and last elements; a single
    # element reflects onto itself (as numpy does)
    period = intrinsic(b, "llvm.smax", b.mul(b.sub(safe_n, i64(1)), i64(2)), i64(1))
    m = floormod(s, period)
    return b.select(b.icmp_signed("<", m, safe_n), m, b.sub(period, m))


def build_pad(kb: KernelBuilder, plan: PadPlan, types: Sequence[TensorType]) -> None:
    """out = the data cropped and then padded, per padded axis. Scalars, three per padded
    axis in ``plan.padded`` order: ``pb`` (pad elements before, >= 0), ``cb`` (elements
    cropped before) and ``n`` (elements kept); the pad after is what the output dim leaves.
    Tensors: data, [value (constant mode)], out. A non-constant mode fails with detail 0
    the axis when an axis with pads has no element to read them from."""
    b = kb.b
    x = kb.tensor(0, *types[0])
    o = kb.tensor(len(types) - 1, *types[-1])
    xs, os_ = x.strides(), o.strides()
    scal = {a: tuple(kb.scalar(3 * j + k) for k in range(3)) for j, a in enumerate(plan.padded)}
    if not plan.padded:
        _copy(kb, x, i64(0), o, i64(0), x.numel())
        return
    value = None
    if plan.mode == "constant":
        value = kb.tensor(1, *types[1]).load_raw(i64(0)) if plan.has_value else ir.Constant(x.elem, 0.0 if isinstance(x.elem, (ir.FloatType, ir.DoubleType)) else 0)
    else:
        for a, (pb, _, n) in scal.items():
            kb.fail_if(b.and_(b.icmp_signed("==", n, i64(0)), b.icmp_signed(">", o.dim(a), i64(0))),
                       STATUS_INVALID_INPUT, [i64(a)])
    last = plan.padded[-1]

    def border(axis: int, j: ir.Value, x_off: ir.Value, o_off: ir.Value, inner) -> None:
        """Output position ``j`` of ``axis`` outside the kept run: the value, or the
        mode's source position."""
        pb, cb, n = scal[axis]
        if value is not None:
            _fill(kb, o, kb.add(o_off, kb.mul(j, os_[axis])), os_[axis], value)
            return
        src = b.add(_source(kb, plan.mode, b.sub(j, pb), n), cb)
        inner(kb.add(x_off, kb.mul(src, xs[axis])), kb.add(o_off, kb.mul(j, os_[axis])))

    def level(axis: int, x_off: ir.Value, o_off: ir.Value) -> None:
        if axis not in scal:
            with kb.loop(x.dim(axis), name=f"ax{axis}") as i:
                level(axis + 1, kb.add(x_off, kb.mul(i, xs[axis])), kb.add(o_off, kb.mul(i, os_[axis])))
            return
        pb, cb, n = scal[axis]
        out = o.dim(axis)
        if axis == last:
            # the kept run is one contiguous copy; then the borders, block by block
            block = xs[axis]
            _copy(kb, x, kb.add(x_off, kb.mul(cb, block)), o, kb.add(o_off, kb.mul(pb, block)), kb.mul(n, block))

            def copy_block(src_off: ir.Value, dst_off: ir.Value) -> None:
                _copy(kb, x, src_off, o, dst_off, block)

            with kb.loop(pb, name=f"before{axis}") as j:
                border(axis, j, x_off, o_off, copy_block)
            after = b.add(pb, n)
            with kb.loop(b.sub(out, after), name=f"after{axis}") as t:
                border(axis, b.add(after, t), x_off, o_off, copy_block)
            return

        def deeper(src_off: ir.Value, dst_off: ir.Value) -> None:
            level(axis + 1, src_off, dst_off)

        with kb.loop(out, name=f"ax{axis}") as j:
            s = b.sub(j, pb)
            inside = b.icmp_unsigned("<", s, n)  # 0 <= s < n
            with b.if_else(inside) as (then, otherwise):
                with then:
                    deeper(kb.add(x_off, kb.mul(b.add(s, cb), xs[axis])), kb.add(o_off, kb.mul(j, os_[axis])))
                with otherwise:
                    border(axis, j, x_off, o_off, deeper)

    level(0, i64(0), i64(0))

