"""Kernel building blocks over llvmlite: the tensor descriptor type, loops, element access.

Every kernel has the VM's one signature
``i32 kernel(ptr tensors, ptr scalars, ptr detail, ptr cancel, i32 part, i32 parts)``: ``tensors`` is an array of
pointers to ``sw_tensor`` descriptors (inputs, then outputs), ``scalars`` int64 values the VM
passes in (and reads back), ``detail`` three int64 for an error message, ``cancel`` the
context's cancel flag: kernels poll it once per iteration of every loop that holds another
loop (a row, a tile), so a cancelled call stops within one row; ``part`` of ``parts`` the share of
the work this call does (:meth:`KernelBuilder.share`: a kernel that asks for it is *parted*,
and the VM calls it once per thread of the context, at once; any other gets 0 of 1). A flat loop runs to its end
(its length is bounded by the memory limit). A kernel whose tensor outputs all have a dim of 0
returns at once (KernelBuilder.return_if_no_outputs): an input of no elements costs no memory
whatever its other dims, so the rows of nothing a loop nest would walk are not bounded by the
memory limit. Extents come from the
descriptors at run time, except dims the compiler knows, which are emitted as constants so
LLVM can specialise the loops.

Elements are loaded and stored in their *compute* type (:func:`compute_type`): the storage
type, except the narrow floats (float16, bfloat16, float8, float4), which are stored as
their bits and computed as float32, and int4/int2, computed as int8. The conversions
(:func:`to_compute`, :func:`from_compute`) are plain integer IR (:mod:`.half`,
:mod:`.minifloat`): wasm32 has no float16 instructions and the module links no compiler
runtime. Bools are i8 holding 0 or 1.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Sequence

import numpy as np
from llvmlite import ir

from .. import abi
from ..ir.dims import Dim
from ..ir.dtypes import SMALL_INTS, DType
from . import half, minifloat
from .expr import Ex, const, ex, raw

I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
F64 = ir.DoubleType()
PTR = ir.PointerType()
MAX_RANK = abi.MAX_RANK
_LOW_BITS = SMALL_INTS  # stored in the low bits of a byte: their constants are raw codes
_KINDS = {"ptr": PTR, "i32": I32, "i64": I64}


def struct_type(name: str) -> ir.LiteralStructType:
    """An ABI struct (toolkit.abi.STRUCTS) as an LLVM type."""
    return ir.LiteralStructType([ir.ArrayType(_KINDS[f.kind], f.count) if f.count > 1 else _KINDS[f.kind]
                                 for f in abi.STRUCTS[name]])


def field_index(struct: str, name: str) -> int:
    return [f.name for f in abi.STRUCTS[struct]].index(name)


TENSOR = struct_type("sw_tensor")
KERNEL_FN = ir.FunctionType(I32, [_KINDS[k] for k in abi.KERNEL_PARAMS])
WHOLE = (ir.Constant(I32, 0), ir.Constant(I32, 1))  # part and parts of a call that does all the work
# the least elements of work a part of a split kernel gets (KernelBuilder.share): waking a
# thread and sharing the cache lines costs about as much as a few thousand elements' work
MIN_PART_WORK = 1 << 14
_DATA, _SHAPE = field_index("sw_tensor", "data"), field_index("sw_tensor", "shape")

STATUS_INVALID_INPUT = next(s.code for s in abi.STATUSES if s.name == "INVALID_INPUT")
STATUS_OUT_OF_RANGE = next(s.code for s in abi.STATUSES if s.name == "OUT_OF_RANGE")
STATUS_CANCELLED = next(s.code for s in abi.STATUSES if s.name == "CANCELLED")

# fast-math flags for reductions: let LLVM reassociate sums so they vectorize
REDUCE_FLAGS = ("reassoc", "nsz", "contract")


def llvm_type(dt: DType) -> ir.Type:
    """How ``dt`` is stored: its bits (float16, bfloat16, float8 and float4 as integers)."""
    if dt.kind == "f":
        return {1: I8, 2: I16, 4: F32, 8: F64}[dt.itemsize]
    return ir.IntType(dt.bits)


def compute_type(dt: DType) -> ir.Type:
    """How kernels compute on ``dt``: the floats narrower than float32 as float32, the
    rest (int4 and int2 as int8) as stored."""
    return F32 if dt.is_narrow_float else llvm_type(dt)


_MINIFLOAT = {"bfloat16", *minifloat.FORMATS, minifloat.E8M0, *minifloat.SMALL_INTS}  # the formats minifloat converts


def stored_constant(dt: DType, value) -> ir.Constant:
    """``value`` as ``dt`` stores it (numpy's ``astype``), as an LLVM constant of
    :func:`llvm_type`: the bits of the narrow floats, the low bits of int4/int2."""
    raw = np.array(value).astype(dt.np).reshape(1)
    t = llvm_type(dt)
    if isinstance(t, ir.IntType):
        return ir.Constant(t, int(raw.view(f"u{dt.itemsize}")[0]) if dt.is_float or dt in _LOW_BITS else int(raw[0]))
    return ir.Constant(t, float(raw[0]))


def to_compute(b: ir.IRBuilder, dt: DType, raw: ir.Value) -> ir.Value:
    """A stored element (or vector of them) of ``dt`` in its compute type. The one place
    that knows how each narrow format decodes."""
    if dt.name == "float16":
        return half.to_f32(b, raw)
    if dt.name in _MINIFLOAT:
        return minifloat.decode(b, dt.name, raw)
    return raw


def from_compute(b: ir.IRBuilder, dt: DType, value: ir.Value, saturate: bool = True,
                 round_mode: str = "up") -> ir.Value:
    """A compute value as ``dt`` stores it: rounded to nearest even (narrow floats; out of
    range saturates to the largest finite value unless ``saturate`` is False, which only
    float8 distinguishes), the low bits kept (int4, int2). float8 e8m0 rounds as Cast's
    ``round_mode`` says (see minifloat); no other format reads it."""
    if dt.name == "float16":
        return half.from_f32(b, value)
    if dt.name in _MINIFLOAT:
        return minifloat.encode(b, dt.name, value, saturate, round_mode)
    return value


def constant_global(module: ir.Module, name: str, value: ir.Constant, align: int | None = None) -> ir.GlobalVariable:
    """A read-only global of the kernel object holding ``value``."""
    g = ir.GlobalVariable(module, value.type, name=name)
    g.initializer = value
    g.global_constant = True
    g.linkage = "internal"
    if align:
        g.align = align
    return g


def i64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


class Tensor:
    """Access to one tensor argument: data pointer, dims (constant when known), elements."""

    def __init__(self, kb: "KernelBuilder", index: int, dtype: DType, shape: Sequence[Dim]):
        self.kb, self.dtype, self.shape = kb, dtype, tuple(shape)
        b = kb.b
        slot = b.gep(kb.fn.args[0], [i64(index)], source_etype=PTR)
        self.desc = b.load(slot, typ=PTR, name=f"t{index}")
        self.data = b.load(b.gep(self.desc, [ir.Constant(I32, 0), ir.Constant(I32, _DATA)],
                                 source_etype=TENSOR), typ=PTR, name=f"t{index}.data")
        self.elem = llvm_type(dtype)
        self.ctype = compute_type(dtype)
        self._dims: dict[int, ir.Value] = {}
        # load symbolic dims here, at the kernel's entry: a load first emitted inside a loop
        # or branch would not dominate later uses outside it
        for axis in range(len(self.shape)):
            self.dim(axis)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def dim(self, axis: int, opaque: bool = False) -> ir.Value:
        """Dim ``axis``: a constant when static, else loaded from the descriptor. ``opaque``
        loads it even when static, so LLVM cannot see it (to keep a loop from being unrolled)."""
        if opaque:
            b = self.kb.b
            p = b.gep(self.desc, [ir.Constant(I32, 0), ir.Constant(I32, _SHAPE), ir.Constant(I32, axis)],
                      source_etype=TENSOR)
            return b.load(p, typ=I64)
        if axis not in self._dims:
            d = self.shape[axis]
            if isinstance(d, int):
                self._dims[axis] = i64(d)
            else:
                b = self.kb.b
                p = b.gep(self.desc, [ir.Constant(I32, 0), ir.Constant(I32, _SHAPE), ir.Constant(I32, axis)],
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
        return self.kb.b.gep(self.data, [raw(index)], source_etype=self.elem)  # an Ex index too

    def load_raw(self, index: ir.Value) -> ir.Value:
        """The element as stored (data movement needs no conversion)."""
        return self.kb.b.load(self.ptr(index), typ=self.elem)

    def store_raw(self, index: ir.Value, value: ir.Value) -> None:
        self.kb.b.store(value, self.ptr(index))

    def load(self, index: ir.Value) -> ir.Value:
        """The element in its compute type."""
        return to_compute(self.kb.b, self.dtype, self.load_raw(index))

    def store(self, index: ir.Value, value: ir.Value, saturate: bool = True, round_mode: str = "up") -> None:
        self.store_raw(index, from_compute(self.kb.b, self.dtype, value, saturate, round_mode))

    # the kernel language (expr.py): multi-dimensional indexing with Ex values
    @property
    def dims(self) -> tuple[Ex, ...]:
        """The dims as :class:`~toolkit.codegen.expr.Ex` (constants when static)."""
        return tuple(ex(self.kb.b, self.dim(a)) for a in range(self.rank))

    def offset(self, *index: Ex | ir.Value | int) -> Ex:
        """The flat row-major offset of element ``index`` (one i64 index per axis): constant
        dims and indices fold. No bounds check, as with :meth:`load`."""
        if len(index) != self.rank:
            raise IndexError(f"{len(index)} indices for a tensor of rank {self.rank}")
        b = self.kb.b
        flat = const(b, I64, 0)
        for a, i in enumerate(index):
            flat = flat * ex(b, self.dim(a)) + (const(b, I64, i) if isinstance(i, int) else ex(b, i))
        return flat

    def __getitem__(self, index) -> Ex:
        """``t[i, j, k]``: the element in its compute type, as an Ex (``t[()]`` for rank 0)."""
        return ex(self.kb.b, self.load(self.offset(*(index if isinstance(index, tuple) else (index,))).v))

    def __setitem__(self, index, value: Ex | ir.Value | int | float) -> None:
        """``t[i, j, k] = v``: store ``v`` (a Python number becomes a constant of the compute type)."""
        v = const(self.kb.b, self.ctype, value).v if isinstance(value, (int, float)) else raw(value)
        self.store(self.offset(*(index if isinstance(index, tuple) else (index,))).v, v)

    @property
    def flat(self) -> "_Flat":
        """``t.flat[i]``: element ``i`` of the row-major elements, read and written as Exs."""
        return _Flat(self)


class _Flat:
    def __init__(self, t: Tensor):
        self.t = t

    def __getitem__(self, i) -> Ex:
        return ex(self.t.kb.b, self.t.load(_index(self.t.kb.b, i)))

    def __setitem__(self, i, value) -> None:
        t = self.t
        v = const(t.kb.b, t.ctype, value).v if isinstance(value, (int, float)) else raw(value)
        t.store(_index(t.kb.b, i), v)


def _index(b: ir.IRBuilder, i: Ex | ir.Value | int) -> ir.Value:
    return i64(i) if isinstance(i, int) else raw(i)


class _VolatileAtomicLoad(ir.instructions.LoadAtomicInstr):
    """``load atomic volatile``, which llvmlite's builder cannot spell."""

    def descr(self, buf):
        [ptr] = self.operands
        buf.append(f"load atomic volatile {self.type}, {ptr.type} {ptr.get_reference()} {self.ordering}, "
                   f"align {self.align}{self._stringify_metadata(leading_comma=True)}\n")


class KernelBuilder:
    """Builds one kernel function. Use :meth:`tensor` for arguments, :meth:`loop` for
    counted loops, :meth:`fail_if` for a checked error exit, then :meth:`finish`."""

    def __init__(self, module: ir.Module, name: str, target=None):
        self.module = module
        self.target = target  # toolkit.codegen.target.Target: vector widths, the CPU
        self.fn = ir.Function(module, KERNEL_FN, name=name)
        self.fn.linkage = "internal"
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self._loops = 0  # loops made so far: a loop whose body made more holds another
        self._body: ir.Block | None = None  # where the body starts when a test precedes it
        self._early: ir.Instruction | None = None  # return_if_no_outputs' branch
        self._early_if_valid: ir.Value | None = None  # its condition for a kernel that rejects inputs
        self._rejects_inputs = False  # a fail_if with an input status: inputs are checked
        self.parted = False  # share() was asked: the VM runs the kernel once per thread

    def share(self, n: ir.Value | int, grain: int = 1,
              unit_work: ir.Value | int | None = None) -> tuple[ir.Value, ir.Value]:
        """This call's share ``[lo, hi)`` of ``n`` units of independent work, split evenly
        in units of ``grain`` between the parts (the last part's share ends at ``n``); marks
        the kernel parted. A part writes only its own units, computing each as one thread
        would, so the results have the same bits whatever the number of parts.

        ``unit_work``: about how many elements one unit reads or writes. Then the work goes
        to at most as many parts as get :data:`MIN_PART_WORK` elements each (the parts after
        them get nothing), and work known to be smaller than two parts' is not split at all:
        the kernel stays whole, and its loop keeps its constant bounds (in a kernel already
        parted, the first part runs it whole). A share asked before the kernel is parted by
        another cannot know it: ask for the split work first."""
        b = self.b
        if unit_work is not None and isinstance(n, (int, ir.Constant)) and isinstance(unit_work, (int, ir.Constant)):
            count, work = (v if isinstance(v, int) else v.constant for v in (n, unit_work))
            if count * work < 2 * MIN_PART_WORK:
                if not self.parted:
                    return i64(0), i64(count)
                # the kernel is parted already: the whole loop is the first part's
                return i64(0), b.select(self._is_first_part(), i64(count), i64(0))
        n = i64(n) if isinstance(n, int) else n
        grains = ceildiv(self, n, i64(grain)) if grain > 1 else n
        most = None
        if unit_work is not None:
            work = i64(max(1, unit_work * grain)) if isinstance(unit_work, int) else \
                smax(self, self.mul(unit_work, i64(grain)), i64(1))
            most = b.udiv(grains, ceildiv(self, i64(MIN_PART_WORK), work))  # parts of MIN_PART_WORK
        part, parts = self.part(most)
        lo, hi = self.portion(grains, part, parts)
        if grain > 1:
            lo, hi = smin(self, b.mul(lo, i64(grain)), n), smin(self, b.mul(hi, i64(grain)), n)
        return lo, hi

    def part(self, most: ir.Value | None = None) -> tuple[ir.Value, ir.Value]:
        """This call's part and the number of parts (i64); marks the kernel parted. With
        ``most``, the work goes to at most that many parts (at least one): a part past them
        gets the index ``parts``, whose :meth:`portion` is empty."""
        self.parted = True
        b = self.b
        part, parts = (b.sext(a, I64) for a in self.fn.args[4:6])
        if most is not None:
            parts = smax(self, i64(1), smin(self, parts, most))
            part = smin(self, part, parts)
        return part, parts

    def portion(self, n: ir.Value, part: ir.Value, parts: ir.Value) -> tuple[ir.Value, ir.Value]:
        """Part ``part``'s ``[lo, hi)`` of ``n`` units split evenly between ``parts`` (empty
        for part == parts)."""
        b = self.b
        return tuple(b.udiv(b.mul(n, p), parts) for p in (part, smin(self, b.add(part, i64(1)), parts)))

    @contextmanager
    def split_loop(self, n: ir.Value | int, name: str = "i", grain: int = 1,
                   unit_work: ir.Value | int | None = None):
        """``for i in`` this part's share of ``range(n)`` (:meth:`share`); yields ``i``."""
        lo, hi = self.share(n, grain, unit_work)
        with self.loop(hi, name, None if isinstance(lo, ir.Constant) and lo.constant == 0 else lo) as i:
            yield i

    @contextmanager
    def first_part(self):
        """The ``with`` body runs in part 0 only: work a parted kernel does not split. (Never
        in every part: where an output is an input's buffer, a part would read what another
        already wrote.)"""
        with self.b.if_then(self._is_first_part()):
            yield

    def _is_first_part(self) -> ir.Value:
        return self.b.icmp_signed("==", self.fn.args[4], ir.Constant(I32, 0))

    def tensor(self, index: int, dtype: DType, shape: Sequence[Dim]) -> Tensor:
        return Tensor(self, index, dtype, shape)

    def scalar_ptr(self, index: int) -> ir.Value:
        return self.b.gep(self.fn.args[1], [i64(index)], source_etype=I64)

    def scalar(self, index: int) -> ir.Value:
        return self.b.load(self.scalar_ptr(index), typ=I64, name=f"s{index}")

    def mul(self, a: ir.Value, b: ir.Value) -> ir.Value:
        if isinstance(a, ir.Constant) and a.constant == 1:
            return b
        if isinstance(b, ir.Constant) and b.constant == 1:
            return a
        if isinstance(a, ir.Constant) and isinstance(b, ir.Constant):
            return i64(a.constant * b.constant)
        return self.b.mul(a, b)

    def sub(self, a: ir.Value, b: ir.Value) -> ir.Value:
        """a - b, folded when b is 0 or both are constants (as :meth:`add` and :meth:`mul`)."""
        if isinstance(b, ir.Constant) and b.constant == 0:
            return a
        if isinstance(a, ir.Constant) and isinstance(b, ir.Constant):
            return i64(a.constant - b.constant)
        return self.b.sub(a, b)

    def add(self, a: ir.Value, b: ir.Value) -> ir.Value:
        if isinstance(a, ir.Constant) and a.constant == 0:
            return b
        if isinstance(b, ir.Constant) and b.constant == 0:
            return a
        return self.b.add(a, b)

    @contextmanager
    def _counted(self, n: ir.Value, name: str, inits: Sequence[ir.Value], start: ir.Value | None = None,
                 plain: bool = False):
        """``for i in range(start, n)`` carrying values: yields ``(i, phis, updates)``. The ``with``
        body emits the loop body and appends to ``updates`` one next value per phi; after the
        loop the phis hold the final values. ``plain``: LLVM neither vectorizes nor unrolls it."""
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
        self._loops += 1
        made = self._loops
        yield i, phis, updates
        if self._loops > made:
            self._poll_cancel()
        nxt = b.add(i, i64(1), name=f"{name}.next")
        nxt.flags.append("nsw")
        i.add_incoming(nxt, b.block)
        for phi, new in zip(phis, updates):
            phi.add_incoming(new, b.block)
        latch = b.branch(header)
        if plain:
            latch.set_metadata("llvm.loop", self._plain_loop_id())
        b.position_at_end(done)

    def _plain_loop_id(self) -> ir.MDValue:
        """A new loop ID (its first operand is itself, as LLVM requires) that turns off
        vectorizing and unrolling the loop."""
        m = self.module
        ident = m.add_metadata([ir.MetaDataString(m, "symwasm.loop"), ir.Constant(I64, len(m.metadata))])
        node = m.add_metadata([
            ident, m.add_metadata([ir.MetaDataString(m, "llvm.loop.vectorize.enable"), ir.Constant(ir.IntType(1), 0)]),
            m.add_metadata([ir.MetaDataString(m, "llvm.loop.unroll.disable")])])
        node.operands = (node, *node.operands)
        return node

    @contextmanager
    def range(self, n: Ex | ir.Value | int, name: str = "i", start: Ex | ir.Value | int | None = None,
              plain: bool = False):
        """:meth:`loop` for the kernel language: ``n`` and ``start`` may be Exs or ints, and
        it yields ``i`` as an :class:`~toolkit.codegen.expr.Ex`."""
        b = self.b
        with self.loop(_index(b, n), name, None if start is None else _index(b, start), plain) as i:
            yield ex(b, i)

    def iterate(self, start: Ex | ir.Value | int, stop: Ex | ir.Value | int, inits: Sequence[Ex | ir.Value],
                step: Callable[[Ex, list[Ex]], Sequence[Ex | ir.Value]], name: str = "c",
                plain: bool = False) -> list[Ex]:
        """:meth:`carry` for the kernel language: ``step`` gets ``i`` and the values as Exs
        and returns the next values (Exs or llvmlite values); returns the final values as Exs."""
        b = self.b
        firsts = [raw(v) for v in inits]

        def body(i: ir.Value, vals: list[ir.Value]) -> list[ir.Value]:
            nxt = step(ex(b, i), [ex(b, v) for v in vals])
            return [const(b, f.type, v).v if isinstance(v, (int, float)) else raw(v) for f, v in zip(firsts, nxt)]

        return [ex(b, v) for v in self.carry(_index(b, start), _index(b, stop), firsts, body, name, plain)]

    @contextmanager
    def loop(self, n: ir.Value, name: str = "i", start: ir.Value | None = None, plain: bool = False):
        """``for i in range(n)`` (``range(start, n)`` with ``start``); yields ``i`` (i64). The
        body is what the ``with`` emits. ``plain``: LLVM neither vectorizes nor unrolls it (a
        loop of a few trips in code emitted many times over)."""
        with self._counted(n, name, (), start, plain) as (i, _, _updates):
            yield i

    def accumulate(self, n: ir.Value, init: ir.Value, step: Callable[[ir.Value, ir.Value], ir.Value],
                   name: str = "r") -> ir.Value:
        """A reduction loop: ``acc = init; for i in range(n): acc = step(acc, i)``."""
        return self.carry(i64(0), n, [init], lambda i, vals: [step(vals[0], i)], name)[0]

    def carry(self, start: ir.Value, stop: ir.Value, inits: Sequence[ir.Value],
              step: Callable[[ir.Value, list[ir.Value]], list[ir.Value]], name: str = "c",
              plain: bool = False) -> list[ir.Value]:
        """``for i in range(start, stop): vals = step(i, vals)`` with ``vals`` kept in
        registers; returns the final ``vals``. ``plain``: as for :meth:`loop`."""
        with self._counted(stop, name, inits, start, plain) as (i, phis, updates):
            updates.extend(step(i, list(phis)))
        return phis

    def _poll_cancel(self) -> None:
        """Return CANCELLED if the host set the cancel flag (an atomic load: another thread
        writes it; volatile too: wasm32 has no atomics, so its backend lowers the load to a
        plain one, which it then hoisted out of a loop that stores nothing, such as rows of no
        elements, and the loop never saw the flag)."""
        flag = _VolatileAtomicLoad(self.b.block, self.fn.args[3], "monotonic", 4, typ=I32)
        self.b._insert(flag)
        self.fail_if(self.b.icmp_signed("!=", flag, ir.Constant(I32, 0)), STATUS_CANCELLED)

    def return_if_no_outputs(self, first: int, types: Sequence[tuple[DType, Sequence[Dim]]],
                             inputs: Sequence[tuple[DType, Sequence[Dim]]] = ()) -> None:
        """Return at once when each of the tensors from ``first`` on (the kernel's outputs,
        ``types``) has a dim of 0: there is nothing to write, and loops over the other dims
        would walk up to 2**63 empty rows (an input of shape (2**40, 0) costs no memory, so
        the memory limit bounds nothing). No test when an output's dims are all known and
        none is 0. A kernel that rejects inputs (:meth:`fail_if` with an input status: an
        index out of range) returns early only when its integer ``inputs`` are empty too, so
        an index that onnxruntime rejects is rejected even where the output is empty."""
        none = self._all_empty(list(enumerate(types, first)))
        if none is None:
            return
        indices = self._all_empty([(k, t) for k, t in enumerate(inputs) if t[0].is_int])
        self._early_if_valid = self.b.and_(none, indices if indices is not None else ir.Constant(ir.IntType(1), 0))
        nothing, body = self.fn.append_basic_block("nothing_to_write"), self.fn.append_basic_block("body")
        self._early = self.b.cbranch(none, nothing, body)
        self.b.position_at_end(nothing)
        self.b.ret(ir.Constant(I32, 0))
        self.b.position_at_end(body)
        self._body = self.b.block

    def _all_empty(self, tensors: Sequence[tuple[int, tuple[DType, Sequence[Dim]]]]) -> ir.Value | None:
        """An i1: each of the ``tensors`` (argument index, type) has a dim of 0 at run time;
        None when one of them has all its dims known and none is 0."""
        none: ir.Value = ir.Constant(ir.IntType(1), 1)
        for k, (dtype, shape) in tensors:
            if any(isinstance(d, int) and d == 0 for d in shape):
                continue
            unknown = [a for a, d in enumerate(shape) if not isinstance(d, int)]
            if not unknown:
                return None
            t = self.tensor(k, dtype, shape)
            empty = self.b.icmp_signed("==", t.dim(unknown[0]), i64(0))
            for a in unknown[1:]:
                empty = self.b.or_(empty, self.b.icmp_signed("==", t.dim(a), i64(0)))
            none = self.b.and_(none, empty)
        return none

    def fail_if(self, cond: ir.Value, status: int, details: Sequence[ir.Value] = ()) -> None:
        """If ``cond``: write ``details`` for the message and return ``status``. (Either may
        be Exs.)"""
        cond, details = raw(cond), [raw(d) for d in details]
        if status in (STATUS_INVALID_INPUT, STATUS_OUT_OF_RANGE):
            # a kernel that rejects inputs (an index out of range) checks them even when its
            # outputs are empty, as onnxruntime does (finish narrows its early return to empty
            # integer inputs)
            self._rejects_inputs = True
        b = self.b
        bad = self.fn.append_basic_block("fail")
        ok = self.fn.append_basic_block("ok")
        b.cbranch(cond, bad, ok)
        b.position_at_end(bad)
        for k, d in enumerate(details[:3]):
            b.store(d, b.gep(self.fn.args[2], [i64(k)], source_etype=I64))
        b.ret(ir.Constant(I32, status))
        b.position_at_end(ok)

    def set_scalar(self, index: int, value: ir.Value) -> None:
        if self._body is not None:
            raise RuntimeError(f"kernel {self.fn.name} writes scalars, so it cannot return early for "
                               "empty outputs: mark its build function with @writes_scalars (internal)")
        self.b.store(value, self.scalar_ptr(index))

    def finish(self) -> ir.Function:
        self.b.ret(ir.Constant(I32, 0))
        if self._early is not None and self._rejects_inputs:
            self._early.replace_usage(self._early.operands[0], self._early_if_valid)
        if self._body is not None:
            # the body's fixed-size allocas go back to the entry block, where SROA and mem2reg
            # promote them to registers (they look only there)
            entry = self.fn.entry_basic_block
            for ins in [i for i in self._body.instructions if isinstance(i, ir.AllocaInstr)
                        and all(isinstance(op, ir.Constant) for op in i.operands)]:
                self._body.instructions.remove(ins)
                entry.instructions.insert(len(entry.instructions) - 1, ins)
                ins.parent = entry
        return self.fn


def writes_scalars(build):
    """Marks a kernel build function that writes scalars (a count, output dims): its kernel
    runs even when its tensor outputs are empty (see KernelBuilder.return_if_no_outputs)."""
    build.writes_scalars = True
    return build


def unswitched(build):
    """Marks a kernel build function whose loops LLVM's nontrivial loop unswitching should
    version on their loop-invariant conditions (O3's default, off for other kernels:
    :data:`.target.UNSWITCHING`): the convolutions, pools, products and broadcasts, whose
    tests on symbolic dims (padding, edges, strides of 0 or 1) it takes out of their inner
    loops. The zoo's models ran 1-15% slower without it on them. Other kernels go without it
    when the module is split in parts (:mod:`.parallel`); a module that stays whole has it if
    one of its kernels is marked. D92."""
    build.unswitch_loops = True
    return build


def intrinsic(b: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
    """Call the LLVM intrinsic ``name`` overloaded on its first argument's type, a scalar or
    a vector (llvm.maximum, llvm.smax, llvm.sqrt, llvm.fabs.v4f32, ...): these lower to
    instructions, never libcalls."""
    t = args[0].type
    fnty = ir.FunctionType(t, [a.type for a in args])
    if isinstance(t, ir.VectorType):  # llvmlite names scalar overloads only: llvm.maximum.v4f32
        full = f"{name}.v{t.count}{t.element.intrinsic_name}"
        fn = b.module.globals.get(full) or ir.Function(b.module, fnty, full)
        return b.call(fn, list(args))
    return b.call(b.module.declare_intrinsic(name, [t], fnty), list(args))


def splat(b: ir.IRBuilder, s: ir.Value, lanes: int) -> ir.Value:
    """The scalar s in every one of ``lanes`` lanes (s itself when 1)."""
    if lanes == 1:
        return s
    undef = ir.Constant(ir.VectorType(s.type, lanes), ir.Undefined)
    v = b.insert_element(undef, s, ir.Constant(I32, 0))
    return b.shuffle_vector(v, undef, ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))


def pinned(b: ir.IRBuilder, ptr: ir.Value) -> ir.Value:
    """``ptr`` through an empty inline asm: the same address (or i32), which LLVM cannot see
    through. Loads at constant offsets from it then keep them as the load's offset immediate on wasm32,
    where loop strength reduction would rewrite each into a pointer of its own and an
    ``i32.add`` (the GEPs it makes lack ``inbounds``, without which the offset may wrap)."""
    return b.asm(ir.FunctionType(ptr.type, [ptr.type]), "", "=r,0", [ptr], side_effect=False)


def settle(kb: "KernelBuilder", never: ir.Value, values: Sequence[ir.Value]) -> list[ir.Value]:
    """``values``, computed here on wasm32 under Cranelift (wasmtime) too. Cranelift keeps a
    loop body's loads in order (a load may trap) and places each pure instruction at its
    first use, which for a loop's accumulators is the back edge: a step's multiply-adds all
    land after all its loads, and every vector loaded holds a register meanwhile. Here the
    values become arguments of a join after a branch on ``never`` (an opaque condition that is
    never true) to an arm that replaces them with zeros, so they are computed before the
    branch. The arm holds only an empty inline asm with side effects, which keeps it (LLVM
    may not speculate it away) and emits no code; the branch costs a compare per use."""
    b = kb.b
    here = b.block
    arm = kb.fn.append_basic_block("settle.arm")
    join = kb.fn.append_basic_block("settle.join")
    b.cbranch(never, arm, join)
    b.position_at_end(arm)
    b.asm(ir.FunctionType(ir.VoidType(), []), "", "", [], side_effect=True)
    b.branch(join)
    b.position_at_end(join)
    out = []
    for v in values:
        phi = b.phi(v.type)
        phi.add_incoming(v, here)
        phi.add_incoming(ir.Constant(v.type, None), arm)
        out.append(phi)
    return out


def prefetch(b: ir.IRBuilder, ptr: ir.Value, write: bool = False) -> None:
    """Bring the cache line at ``ptr`` towards L1 for a read soon, or with ``write`` for a
    store soon (owned, so the store need not fetch it first) (llvm.prefetch: high locality,
    data). A hint: it never faults."""
    i8p = ir.IntType(8).as_pointer()
    fnty = ir.FunctionType(ir.VoidType(), [i8p, ir.IntType(32), ir.IntType(32), ir.IntType(32)])
    fn = b.module.globals.get("llvm.prefetch.p0") or ir.Function(b.module, fnty, "llvm.prefetch.p0")
    i32 = ir.IntType(32)
    b.call(fn, [b.bitcast(ptr, i8p), ir.Constant(i32, int(write)), ir.Constant(i32, 3), ir.Constant(i32, 1)])


def fptosi_sat(b: ir.IRBuilder, x: ir.Value, to: ir.IntType, signed: bool = True) -> ir.Value:
    """float -> int that saturates (NaN gives 0) where a plain conversion would trap on wasm."""
    src = "f64" if x.type == F64 else "f32"
    name = f"llvm.fpto{'s' if signed else 'u'}i.sat.i{to.width}.{src}"
    fn = b.module.declare_intrinsic(name, (), ir.FunctionType(to, [x.type]))
    return b.call(fn, [x])


def fast(instr: ir.Instruction) -> ir.Instruction:
    """Mark a float op reassociable (reductions vectorize only with this)."""
    instr.flags.extend(REDUCE_FLAGS)
    return instr


class at_entry:
    """``with at_entry(kb):`` positions the builder at the start of the kernel's entry block
    (for allocas, which LLVM keeps static only there), then back where it was."""

    def __init__(self, kb: KernelBuilder):
        self.kb = kb

    def __enter__(self):
        b = self.kb.b
        self.block = b.block
        entry = self.kb.fn.entry_basic_block
        if entry.instructions:
            b.position_before(entry.instructions[0])
        else:
            b.position_at_end(entry)

    def __exit__(self, *exc):
        self.kb.b.position_at_end(self.block)


def ceildiv(kb: KernelBuilder, a: ir.Value, c: ir.Value) -> ir.Value:
    """ceil(a / c) for a >= 0 and c >= 1 (i64), folded when both are constants."""
    if isinstance(a, ir.Constant) and isinstance(c, ir.Constant):
        return i64(-(-a.constant // c.constant))
    return kb.b.udiv(kb.b.sub(kb.add(a, c), i64(1)), c)


def smax(kb: KernelBuilder, a: ir.Value, b_: ir.Value) -> ir.Value:
    return kb.b.select(kb.b.icmp_signed(">", a, b_), a, b_)


def smin(kb: KernelBuilder, a: ir.Value, b_: ir.Value) -> ir.Value:
    return kb.b.select(kb.b.icmp_signed("<", a, b_), a, b_)


def transpose_vectors(b: ir.IRBuilder, rows: Sequence[ir.Value]) -> list[ir.Value]:
    """The transpose of a square matrix held as ``len(rows)`` vectors (a power of two) of as
    many lanes: in round s (1, 2, 4, ...), rows i and i + s (i without bit s) exchange their
    blocks of s lanes, one two-vector shuffle each."""
    n = len(rows)
    rows = list(rows)
    s = 1
    while s < n:
        for i in range(n):
            if i & s:
                continue
            lo = [j if not j & s else n + j - s for j in range(n)]
            hi = [j + s if not j & s else n + j for j in range(n)]
            mask = ir.VectorType(I32, n)
            rows[i], rows[i + s] = (b.shuffle_vector(rows[i], rows[i + s], ir.Constant(mask, lo)),
                                    b.shuffle_vector(rows[i], rows[i + s], ir.Constant(mask, hi)))
        s *= 2
    return rows
