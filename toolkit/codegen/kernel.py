"""Kernel building blocks over llvmlite: the tensor descriptor type, loops, element access.

Every kernel has the VM's one signature
``i32 kernel(ptr tensors, ptr scalars, ptr detail)``: ``tensors`` is an array of pointers to
``sw_tensor`` descriptors (inputs, then outputs), ``scalars`` int64 values the VM passes in
(and reads back), ``detail`` three int64 for an error message. Extents come from the
descriptors at run time, except dims the compiler knows, which are emitted as constants so
LLVM can specialise the loops.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Sequence

from llvmlite import ir

from ..ir.dims import Dim
from ..ir.graph import BOOL, FLOAT32, INT32, INT64, DType

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
PTR = ir.PointerType()
MAX_RANK = 8
# mirrors sw_tensor in wasm_runtime/vm/sw_vm.h
TENSOR = ir.LiteralStructType([PTR, I32, I32, ir.ArrayType(I64, MAX_RANK)])
KERNEL_FN = ir.FunctionType(I32, [PTR, PTR, PTR])

STATUS_OUT_OF_RANGE = 2
STATUS_INVALID_INPUT = 1

# fast-math flags for reductions: let LLVM reassociate sums so they vectorize
REDUCE_FLAGS = ("reassoc", "nsz", "contract")


def llvm_type(dt: DType) -> ir.Type:
    return {FLOAT32.name: F32, INT32.name: I32, INT64.name: I64, BOOL.name: I8}[dt.name]


def i64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


class Tensor:
    """Access to one tensor argument: data pointer, dims (constant when known), elements."""

    def __init__(self, kb: "KernelBuilder", index: int, dtype: DType, shape: Sequence[Dim]):
        self.kb, self.dtype, self.shape = kb, dtype, tuple(shape)
        b = kb.b
        slot = b.gep(kb.fn.args[0], [i64(index)], source_etype=PTR)
        self.desc = b.load(slot, typ=PTR, name=f"t{index}")
        self.data = b.load(b.gep(self.desc, [ir.Constant(I32, 0), ir.Constant(I32, 0)],
                                 source_etype=TENSOR), typ=PTR, name=f"t{index}.data")
        self.elem = llvm_type(dtype)
        self._dims: dict[int, ir.Value] = {}
        # load symbolic dims here, at the kernel's entry: a load first emitted inside a loop
        # or branch would not dominate later uses outside it
        for axis in range(len(self.shape)):
            self.dim(axis)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def dim(self, axis: int) -> ir.Value:
        if axis not in self._dims:
            d = self.shape[axis]
            if isinstance(d, int):
                self._dims[axis] = i64(d)
            else:
                b = self.kb.b
                p = b.gep(self.desc, [ir.Constant(I32, 0), ir.Constant(I32, 3), ir.Constant(I32, axis)],
                          source_etype=TENSOR)
                self._dims[axis] = b.load(p, typ=I64, name=f"dim{axis}")
        return self._dims[axis]

    def numel(self, start: int = 0, stop: int | None = None) -> ir.Value:
        """Product of dims[start:stop]."""
        stop = self.rank if stop is None else stop
        n: ir.Value = i64(1)
        for a in range(start, stop):
            n = self.kb.mul(n, self.dim(a))
        return n

    def strides(self) -> list[ir.Value]:
        """Row-major element strides."""
        out: list[ir.Value] = [i64(1)] * self.rank
        for a in range(self.rank - 2, -1, -1):
            out[a] = self.kb.mul(out[a + 1], self.dim(a + 1))
        return out

    def ptr(self, index: ir.Value) -> ir.Value:
        return self.kb.b.gep(self.data, [index], source_etype=self.elem)

    def load(self, index: ir.Value) -> ir.Value:
        return self.kb.b.load(self.ptr(index), typ=self.elem)

    def store(self, index: ir.Value, value: ir.Value) -> None:
        self.kb.b.store(value, self.ptr(index))


class KernelBuilder:
    """Builds one kernel function. Use :meth:`tensor` for arguments, :meth:`loop` for
    counted loops, :meth:`fail_if` for a checked error exit, then :meth:`finish`."""

    def __init__(self, module: ir.Module, name: str):
        self.module = module
        self.fn = ir.Function(module, KERNEL_FN, name=name)
        self.fn.linkage = "internal"
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))

    def tensor(self, index: int, dtype: DType, shape: Sequence[Dim]) -> Tensor:
        return Tensor(self, index, dtype, shape)

    def scalar_ptr(self, index: int) -> ir.Value:
        return self.b.gep(self.fn.args[1], [i64(index)], source_etype=I64)

    def scalar(self, index: int) -> ir.Value:
        return self.b.load(self.scalar_ptr(index), typ=I64, name=f"s{index}")

    def set_scalar(self, index: int, value: ir.Value) -> None:
        self.b.store(value, self.scalar_ptr(index))

    def mul(self, a: ir.Value, b: ir.Value) -> ir.Value:
        if isinstance(a, ir.Constant) and a.constant == 1:
            return b
        if isinstance(b, ir.Constant) and b.constant == 1:
            return a
        if isinstance(a, ir.Constant) and isinstance(b, ir.Constant):
            return i64(a.constant * b.constant)
        return self.b.mul(a, b)

    def add(self, a: ir.Value, b: ir.Value) -> ir.Value:
        if isinstance(a, ir.Constant) and a.constant == 0:
            return b
        if isinstance(b, ir.Constant) and b.constant == 0:
            return a
        return self.b.add(a, b)

    @contextmanager
    def _counted(self, n: ir.Value, name: str, inits: Sequence[ir.Value], start: ir.Value | None = None):
        """``for i in range(start, n)`` carrying values: yields ``(i, phis, updates)``. The ``with``
        body emits the loop body and appends to ``updates`` one next value per phi; after the
        loop the phis hold the final values."""
        b = self.b
        pre = b.block
        header = self.fn.append_basic_block(f"{name}.head")
        body = self.fn.append_basic_block(f"{name}.body")
        done = self.fn.append_basic_block(f"{name}.done")
        b.branch(header)
        b.position_at_end(header)
        i = b.phi(I64, name=name)
        i.add_incoming(i64(0) if start is None else start, pre)
        phis = []
        for k, init in enumerate(inits):
            phi = b.phi(init.type, name=f"{name}.acc{k}")
            phi.add_incoming(init, pre)
            phis.append(phi)
        b.cbranch(b.icmp_signed("<", i, n), body, done)
        b.position_at_end(body)
        updates: list[ir.Value] = []
        yield i, phis, updates
        nxt = b.add(i, i64(1), name=f"{name}.next")
        nxt.flags.append("nsw")
        i.add_incoming(nxt, b.block)
        for phi, new in zip(phis, updates):
            phi.add_incoming(new, b.block)
        b.branch(header)
        b.position_at_end(done)

    @contextmanager
    def loop(self, n: ir.Value, name: str = "i"):
        """``for i in range(n)``; yields ``i`` (i64). The body is what the ``with`` emits."""
        with self._counted(n, name, ()) as (i, _, _updates):
            yield i

    def accumulate(self, n: ir.Value, init: ir.Value, step: Callable[[ir.Value, ir.Value], ir.Value],
                   name: str = "r") -> ir.Value:
        """A reduction loop: ``acc = init; for i in range(n): acc = step(acc, i)``."""
        return self.carry(i64(0), n, [init], lambda i, vals: [step(vals[0], i)], name)[0]

    def carry(self, start: ir.Value, stop: ir.Value, inits: Sequence[ir.Value],
              step: Callable[[ir.Value, list[ir.Value]], list[ir.Value]], name: str = "c") -> list[ir.Value]:
        """``for i in range(start, stop): vals = step(i, vals)`` with ``vals`` kept in
        registers; returns the final ``vals``."""
        with self._counted(stop, name, inits, start) as (i, phis, updates):
            updates.extend(step(i, list(phis)))
        return phis

    def fail_if(self, cond: ir.Value, status: int, details: Sequence[ir.Value] = ()) -> None:
        """If ``cond``: write ``details`` for the message and return ``status``."""
        b = self.b
        bad = self.fn.append_basic_block("fail")
        ok = self.fn.append_basic_block("ok")
        b.cbranch(cond, bad, ok)
        b.position_at_end(bad)
        for k, d in enumerate(details[:3]):
            b.store(d, b.gep(self.fn.args[2], [i64(k)], source_etype=I64))
        b.ret(ir.Constant(I32, status))
        b.position_at_end(ok)

    def finish(self) -> ir.Function:
        self.b.ret(ir.Constant(I32, 0))
        return self.fn


def intrinsic(b: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
    """Call the LLVM intrinsic ``name`` overloaded on its first argument's scalar type
    (llvm.maximum, llvm.smax, llvm.sqrt, ...): these lower to instructions, never libcalls."""
    t = args[0].type
    return b.call(b.module.declare_intrinsic(name, [t], ir.FunctionType(t, [a.type for a in args])), list(args))


def fptosi_sat(b: ir.IRBuilder, x: ir.Value, to: ir.IntType) -> ir.Value:
    """float32 -> int that saturates (NaN gives 0) where a plain conversion would trap on wasm."""
    fn = b.module.declare_intrinsic(f"llvm.fptosi.sat.i{to.width}.f32", (), ir.FunctionType(to, [F32]))
    return b.call(fn, [x])


def fast(instr: ir.Instruction) -> ir.Instruction:
    """Mark a float op reassociable (reductions vectorize only with this)."""
    instr.flags.extend(REDUCE_FLAGS)
    return instr
