"""Vector helpers the float32 kernels share (GEMM, convolution, depthwise, linalg): the fused
multiply-add, lane masks, masked loads and stores, vector copies."""
from __future__ import annotations

from llvmlite import ir

from .kernel import F32, I64, KernelBuilder, Tensor, i64, splat

# multiply-adds may fuse (FMA on hosts that have it); sums keep their order
MAC_FLAGS = ("contract",)


def mac(b: ir.IRBuilder, acc: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
    prod = b.fmul(x, y)
    prod.flags.extend(MAC_FLAGS)
    s = b.fadd(acc, prod)
    s.flags.extend(MAC_FLAGS)
    return s


def f32_vector(lanes: int) -> ir.VectorType:
    return ir.VectorType(F32, lanes)


def copy_vectors(kb: KernelBuilder, lanes: int, t: Tensor, at: ir.Value, dst: ir.Value, count: ir.Value) -> None:
    """``count`` vectors from element ``at`` of ``t`` to the float pointer ``dst``: unrolled for a
    constant count, else a plain loop."""
    b = kb.b
    vt = f32_vector(lanes)

    def copy(v: ir.Value) -> None:
        off = kb.mul(v, i64(lanes))
        x = b.load(t.ptr(kb.add(at, off)), typ=vt, align=4)
        b.store(x, b.bitcast(b.gep(dst, [off], source_etype=F32), vt.as_pointer()), align=4)

    if isinstance(count, ir.Constant):
        for v in range(count.constant):
            copy(i64(v))
        return
    with kb.loop(count, "cv", plain=True) as v:
        copy(v)


def lanes_below(b: ir.IRBuilder, n: ir.Value, lanes: int) -> ir.Value:
    """The mask of a vector's first ``n`` lanes (all of them when n >= lanes), for
    :func:`masked_load` and :func:`masked_store`."""
    return b.icmp_signed("<", ir.Constant(ir.VectorType(I64, lanes), list(range(lanes))), splat(b, n, lanes))


def masked_load(b: ir.IRBuilder, ptr: ir.Value, mask: ir.Value, vt: ir.VectorType) -> ir.Value:
    """The lanes of the vector at ``ptr`` where ``mask`` is set, zero elsewhere; the other lanes'
    memory is not read (one instruction with AVX-512 or AVX; LLVM expands it into a branch per
    lane where the target has none, as wasm32)."""
    name = f"llvm.masked.load.v{vt.count}f32.p0"
    fnty = ir.FunctionType(vt, [ptr.type, ir.IntType(32), mask.type, vt])
    fn = b.module.globals.get(name) or ir.Function(b.module, fnty, name)
    return b.call(fn, [ptr, ir.Constant(ir.IntType(32), 4), mask, ir.Constant(vt, [0.0] * vt.count)])


def vector_load(b: ir.IRBuilder, ptr: ir.Value, vt: ir.VectorType, mask: ir.Value | None = None) -> ir.Value:
    """The vector at ``ptr``; with ``mask``, only its lanes (:func:`masked_load`)."""
    if mask is not None:
        return masked_load(b, ptr, mask, vt)
    return b.load(ptr, typ=vt, align=4)


def vector_store(b: ir.IRBuilder, v: ir.Value, ptr: ir.Value, mask: ir.Value | None = None) -> None:
    """Store ``v`` at ``ptr``; with ``mask``, only its lanes (:func:`masked_store`)."""
    if mask is not None:
        masked_store(b, v, ptr, mask)
    else:
        b.store(v, ptr, align=4)


def masked_store(b: ir.IRBuilder, v: ir.Value, ptr: ir.Value, mask: ir.Value) -> None:
    """Store the lanes of ``v`` where ``mask`` is set; the other lanes' memory is untouched."""
    vt = v.type
    name = f"llvm.masked.store.v{vt.count}f32.p0"
    fnty = ir.FunctionType(ir.VoidType(), [vt, ptr.type, ir.IntType(32), mask.type])
    fn = b.module.globals.get(name) or ir.Function(b.module, fnty, name)
    b.call(fn, [v, ptr, ir.Constant(ir.IntType(32), 4), mask])
