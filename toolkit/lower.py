"""Graph IR -> VM program and kernels.

The lowerer walks the nodes in order. Shapes are symbolic; each dim expression an op needs
at run time is evaluated once into a shape-heap slot (interned expressions make the memo a
plain dict). Input dims bind symbols and check constraints; data-dependent symbols are
defined by the op that computes them (NonZero's count, a runtime Reshape target).

Values whose contents are known at compile time (constants, shape values such as
``Shape(x)``) need no kernel: they are materialized only when a kernel reads them.
A buffer is freed right after its last reader, counting every view that aliases it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
from llvmlite import ir

from .codegen.kernel import KernelBuilder
from .ir import dims as D
from .ir.dims import Dim, Sym, _Op
from .ir.graph import CompileError, DType, Graph, Node, Value, dtype_of_numpy
from .vm import isa


@dataclass
class Program:
    """What the module embeds for the VM, plus names for inspect."""

    words: list[int] = field(default_factory=list)
    strings: list[str] = field(default_factory=list)
    heap_init: list[int] = field(default_factory=list)
    consts: list[tuple[str, np.ndarray]] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)
    reg_names: list[str] = field(default_factory=list)
    slot_names: dict[int, str] = field(default_factory=dict)
    inputs: list[tuple[int, int, int]] = field(default_factory=list)  # dtype, rank, name string
    outputs: list[int] = field(default_factory=list)  # name string
    arena_size: int = 0  # bytes of the static arena

    def disassemble(self) -> str:
        return isa.disassemble(self.words, self.strings, self.kernels, self.reg_names, self.slot_names)


ARENA_ALIGN = 64
ARENA_LIMIT = (1 << 31) - 1  # offsets are int32 immediates


@dataclass
class StaticBuffer:
    """A buffer whose size is known at compile time: it gets an offset in the static arena,
    shared with buffers whose lifetimes (node indices, inclusive) do not overlap."""

    nbytes: int
    start: int
    end: int | None  # None: alive until the end of the run (outputs, never freed)
    word: int  # where ALLOC_STATIC's offset operand is, patched once offsets are planned


class Lowerer:
    """Emits the program for a graph; op lowerings call its methods."""

    def __init__(self, graph: Graph, module: ir.Module):
        self.graph = graph
        self.module = module
        self.prog = Program()
        self._string_ids: dict[str, int] = {}
        self._const_slots: dict[int, int] = {}
        self._expr_slots: dict[Dim, int] = {}
        self._regs: dict[str, int] = {}
        self._kernel_ids: dict[tuple, int] = {}
        self._alias_root: dict[str, str] = {}  # value -> the value owning its buffer
        self._first_binding: dict[Sym, str] = {}  # input symbol -> where it was bound
        self._freed: set[str] = set()
        self._derived: set[str] = set()  # constants made by lowerings
        self._static: dict[int, StaticBuffer] = {}  # register -> its planned buffer
        self._index = 0  # the node being lowered
        self.node: Node | None = None

    # ------------------------------------------------------------------ tables
    def string(self, text: str) -> int:
        if text not in self._string_ids:
            self._string_ids[text] = len(self.prog.strings)
            self.prog.strings.append(text)
        return self._string_ids[text]

    def emit(self, op: str, *operands) -> None:
        self.prog.words.extend(isa.encode(op, *operands))

    def new_slot(self, name: str | None = None, init: int = 0) -> int:
        slot = len(self.prog.heap_init)
        self.prog.heap_init.append(init)
        if name:
            self.prog.slot_names[slot] = name
        return slot

    def new_reg(self, name: str) -> int:
        self.prog.reg_names.append(name)
        return len(self.prog.reg_names) - 1

    def context(self) -> str:
        return self.node.label() if self.node else "model"

    # ------------------------------------------------------------------ dims
    def const_slot(self, v: int) -> int:
        if v not in self._const_slots:
            self._const_slots[v] = self.new_slot(str(v), init=v)
        return self._const_slots[v]

    def define(self, d: Dim, slot: int) -> None:
        """Record that ``slot`` holds the run-time value of ``d`` (a symbol, usually)."""
        d = D.as_dim(d)
        self._expr_slots[d] = slot
        if isinstance(d, D.Expr):
            if isinstance(d.atom(), Sym):  # a symbol names its slot better than its source
                self.prog.slot_names[slot] = str(d)
            else:
                self.prog.slot_names.setdefault(slot, str(d))

    def is_defined(self, d: Dim) -> bool:
        return isinstance(d, int) or D.as_dim(d) in self._expr_slots

    def slot(self, d: Dim) -> int:
        """A slot holding the run-time value of dim expression ``d``, emitting its evaluation."""
        d = D.as_dim(d)
        if isinstance(d, int):
            return self.const_slot(d)
        if d in self._expr_slots:
            return self._expr_slots[d]
        atom = d.atom()
        if atom is not None:
            slot = self._atom_slot(atom)
        else:
            slot = None
            for mono, coef in d.terms:
                term = self.const_slot(coef) if not mono else None
                for a in mono:
                    s = self.slot(D.atom_expr(a))
                    term = s if term is None else self.arith("MUL", term, s)
                if mono and coef != 1:
                    term = self.arith("MUL", term, self.const_slot(coef))
                slot = term if slot is None else self.arith("ADD", slot, term)
        self.define(d, slot)
        return slot

    def arith(self, kind: str, a: int, b: int, msg: str | None = None) -> int:
        """A new slot := slot a <kind> slot b (see isa.ARITH); ``msg`` if it fails."""
        dst = self.new_slot()
        self.emit("ARITH", kind, dst, a, b, self.string(msg or f"{self.context()}: shape arithmetic "
                                                        f"{kind.lower()} of {{0}} and {{1}} overflows or "
                                                        f"is undefined"))
        return dst

    def _atom_slot(self, atom) -> int:
        if isinstance(atom, Sym):
            raise CompileError(f"{self.context()}: symbol '{atom}' has no value at this point "
                               f"(internal: no instruction defines it)")
        assert isinstance(atom, _Op)
        args = atom.args
        if atom.op == "bcast":
            return self._bcast_slot(atom, self.string(
                f"{self.context()}: dims {args[0]} = {{0}} and {args[1]} = {{1}} do not broadcast"))
        if atom.op in ("min", "max"):
            slot = self.slot(args[0])
            for x in args[1:]:
                slot = self.arith(atom.op.upper(), slot, self.slot(x))
            return slot
        kind = {"floordiv": "FLOORDIV", "mod": "MOD", "div": "DIV"}[atom.op]
        msg = (f"{self.context()}: {args[0]} = {{0}} is not divisible by {args[1]} = {{1}}"
               if kind == "DIV" else None)
        return self.arith(kind, self.slot(args[0]), self.slot(args[1]), msg)

    def _bcast_slot(self, atom, msg: int) -> int:
        """The broadcast of the atom's dims, failing with ``msg`` when they do not broadcast."""
        slot = self.slot(atom.args[0])
        for x in atom.args[1:]:
            dst = self.new_slot()
            self.emit("BCAST", dst, slot, self.slot(x), msg)
            slot = dst
        return slot

    # ------------------------------------------------------------------ values
    def value(self, name: str) -> Value:
        return self.graph.values[name]

    def tensor(self, name: str) -> int:
        """The register of a value, materializing constants and shape values."""
        if name in self._regs:
            return self._regs[name]
        v = self.value(name)
        if v.const is not None:
            # once per value: the register is memoized below and constants are never freed
            self.prog.consts.append((name, np.ascontiguousarray(v.const)))
            reg = self.new_reg(name)
            self.emit("CONST", reg, len(self.prog.consts) - 1)
        elif v.sym is not None:
            reg = self.alloc(name)
            self.emit("STORE_VALUES", reg, [self.slot(s) for s in v.sym])
        else:
            raise CompileError(f"{self.context()}: value '{name}' is used before it is computed "
                               f"(internal lowering order error)")
        self._regs[name] = reg
        return reg

    def alloc(self, name: str) -> int:
        """A new buffer for value ``name`` with its symbolic shape."""
        v = self.value(name)
        reg = self._new_buffer(name, v.dtype, v.shape, f"'{name}' {v.describe()}")
        self._regs[name] = reg
        return reg

    def _new_buffer(self, reg_name: str, dtype: DType, shape: Sequence[Dim], what: str,
                    end: int | None = None) -> int:
        """A static-arena buffer when the shape is known now, a run-time allocation otherwise."""
        reg = self.new_reg(reg_name)
        dims = [self.slot(d) for d in shape]
        if all(isinstance(d, int) for d in shape):
            word = len(self.prog.words) + 3  # ALLOC_STATIC reg dtype offset ...
            self.emit("ALLOC_STATIC", reg, dtype.code, 0, dims)
            nbytes = dtype.itemsize * int(np.prod([int(d) for d in shape], dtype=np.int64))
            self._static[reg] = StaticBuffer(nbytes, self._index, end, word)
        else:
            msg = self.string(f"{self.context()}: cannot allocate {{0}} bytes for {what} "
                              f"(memory limit {{1}} bytes)")
            self.emit("ALLOC", reg, dtype.code, msg, dims)
        return reg

    def view(self, out: str, src: str) -> int:
        """``out`` shares ``src``'s buffer with its own shape (Reshape, Squeeze, ...)."""
        v = self.value(out)
        src_reg = self.tensor(src)
        reg = self.new_reg(out)
        self.emit("VIEW", reg, src_reg, [self.slot(d) for d in v.shape])
        self._regs[out] = reg
        self._alias_root[out] = self._alias_root.get(src, src)
        return reg

    def constant(self, name: str, array: np.ndarray) -> str:
        """A constant derived at compile time for a lowering (a weight transposed or packed
        for its kernel), named ``name``; asking again for the same name gives the same one."""
        if name not in self._derived:
            if name in self.graph.values:
                raise CompileError(f"{self.context()}: derived constant '{name}' clashes with a value")
            arr = np.ascontiguousarray(array)
            self.graph.add_value(Value(name, dtype_of_numpy(arr.dtype), tuple(arr.shape), const=arr))
            self._derived.add(name)
        return name

    def scratch(self, what: str, dtype: DType, shape: Sequence[Dim]) -> int:
        """A temporary buffer for one kernel call (``what`` names it in messages); release
        it with ``free`` after the call."""
        return self._new_buffer(what, dtype, shape, f"the {what} {D.fmt_shape(shape)}", end=self._index)

    def free(self, reg: int) -> None:
        if reg in self._static:
            self._static[reg].end = self._index  # its arena space is reusable after this node
        else:
            self.emit("FREE", reg)

    def values_of(self, name: str) -> list[int]:
        """Slots holding the integer elements of a value (loaded at run time if unknown)."""
        v = self.value(name)
        known = v.int_contents()
        if known is not None:
            return [self.slot(s) for s in known]
        n = v.numel
        if not isinstance(n, int):
            raise CompileError(f"{self.context()}: '{name}' has {n} elements; a shape tensor "
                               f"needs a static length")
        slots = [self.new_slot(f"{name}[{i}]") for i in range(n)]
        self.emit("LOAD_VALUES", self.tensor(name), self.string(
            f"{self.context()}: '{name}' has {{0}} elements, expected {{1}}"), slots)
        return slots

    # ------------------------------------------------------------------ kernels
    def kernel(self, key: tuple, build: Callable[[KernelBuilder], None]) -> int:
        """The index of the kernel for ``key``, building it on first use."""
        if key not in self._kernel_ids:
            name = f"k{len(self.prog.kernels)}_" + "_".join(str(k) for k in key[:2]).lower()
            name = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
            kb = KernelBuilder(self.module, name)
            build(kb)
            kb.finish()
            self._kernel_ids[key] = len(self.prog.kernels)
            self.prog.kernels.append(name)
        return self._kernel_ids[key]

    def run_kernel(self, key: tuple, build: Callable[[KernelBuilder], None], inputs: Sequence[str],
                   outputs: Sequence[str], error: str | None = None) -> None:
        """Build (once per ``key``) and call a kernel on the values ``inputs`` and new
        buffers for ``outputs``, in that order."""
        k = self.kernel(key, build)
        self.call(k, [self.tensor(i) for i in inputs] + [self.alloc(o) for o in outputs], error=error)

    def call(self, kernel: int, tensors: Sequence[int], scalars: Sequence[int] = (),
             error: str | None = None) -> None:
        msg = self.string(f"{self.context()}: {error}" if error else f"{self.context()}: kernel failed "
                          f"({{0}}, {{1}}, {{2}})")
        self.emit("CALL", kernel, msg, list(tensors), list(scalars))

    # ------------------------------------------------------------------ driver
    def lower(self, lowering_of: Callable[[Node], Callable]) -> Program:
        """Emit the whole program; ``lowering_of(node)`` is the node's op lowering."""
        g = self.graph
        self._bind_inputs()
        last_use = self._last_uses()
        for index, node in enumerate(g.nodes):
            self.node = node
            self._index = index
            outs = [self.value(o) for o in node.outputs if o]
            if all(v.known for v in outs):
                self._free_dead(index, last_use)
                continue
            for c in node.checks:
                if c.kind == "define":
                    if not self.is_defined(c.a):
                        self.define(c.a, self._bcast_slot(c.a.atom(), self.string(c.message)))
                elif c.kind == "eq":
                    self.emit("CHECK_EQ", self.slot(c.a), self.slot(c.b), self.string(c.message))
                else:
                    # "a broadcasts to b" is one-way: a is 1 or equals b (BCAST alone would
                    # also accept b == 1 < a)
                    msg = self.string(c.message)
                    out = self.new_slot()
                    self.emit("BCAST", out, self.slot(c.a), self.slot(c.b), msg)
                    self.emit("CHECK_EQ", out, self.slot(c.b), msg)
            lowering_of(node)(self, node)
            self._free_dead(index, last_use)
        self.node = None
        self._index = len(g.nodes)
        for i, name in enumerate(g.outputs):
            self.emit("OUTPUT", i, self.tensor(name))
            self.prog.outputs.append(self.string(name))
        self.emit("RETURN")
        self._plan_arena()
        return self.prog

    def _plan_arena(self) -> None:
        """Offsets for the static buffers: largest first, each at the lowest offset clear of
        every placed buffer whose lifetime overlaps its own."""
        placed: list[tuple[int, int, int, int]] = []  # start, end, offset, size
        top = 0
        forever = len(self.graph.nodes) + 1
        for buf in sorted(self._static.values(), key=lambda b: -b.nbytes):
            end = forever if buf.end is None else buf.end
            size = -(-buf.nbytes // ARENA_ALIGN) * ARENA_ALIGN
            busy = sorted((off, off + sz) for s, e, off, sz in placed if s <= end and buf.start <= e)
            offset = 0
            for lo, hi in busy:
                if offset + size <= lo:
                    break
                offset = max(offset, hi)
            placed.append((buf.start, end, offset, size))
            self.prog.words[buf.word] = offset
            top = max(top, offset + size)
        if top > ARENA_LIMIT:
            raise CompileError(f"the static arena needs {top} bytes, more than the {ARENA_LIMIT} "
                               f"a module can address")
        self.prog.arena_size = top

    def _bind_inputs(self) -> None:
        for i, name in enumerate(self.graph.inputs):
            v = self.value(name)
            reg = self.new_reg(name)
            self._regs[name] = reg
            self.prog.inputs.append((v.dtype.code, v.rank, self.string(name)))
            self.emit("INPUT", i, reg)
            for axis, d in enumerate(v.shape):
                where = f"input '{name}' dim {axis}"
                s = self.new_slot(f"{name}.shape[{axis}]")
                self.emit("DIM", s, reg, axis)
                atom = d.atom() if isinstance(d, D.Expr) else None
                if isinstance(d, int):
                    self.emit("CHECK_EQ", s, self.const_slot(d),
                              self.string(f"{where}: expected {d}, got {{0}}"))
                elif isinstance(atom, Sym) and not self.is_defined(d):
                    self.define(d, s)
                    self._first_binding[atom] = where
                    if atom.lo > 0:
                        self.emit("CHECK_LE", self.const_slot(atom.lo), s, self.string(
                            f"{where} ({atom}): {{1}} is below the minimum {{0}}"))
                    if atom.hi is not None:
                        self.emit("CHECK_LE", s, self.const_slot(atom.hi), self.string(
                            f"{where} ({atom}): {{0}} exceeds bound {{1}}"))
                else:
                    first = self._first_binding.get(atom, "an earlier dim") if atom else "its expression"
                    self.emit("CHECK_EQ", s, self.slot(d), self.string(
                        f"{where} ({d}): got {{0}}, but {d} = {{1}} from {first}"))

    def _last_uses(self) -> dict[str, int]:
        last: dict[str, int] = {}
        for index, node in enumerate(self.graph.nodes):
            for i in node.inputs:
                if i:
                    last[i] = index
        return last

    def _free_dead(self, index: int, last_use: dict[str, int]) -> None:
        """Free buffers whose every alias was last read by node ``index``."""
        g = self.graph
        keep = {self._alias_root.get(o, o) for o in g.outputs}
        node = g.nodes[index]
        # its inputs, and its outputs that nothing reads (e.g. LayerNormalization's Mean)
        for name in dict.fromkeys([i for i in node.inputs if i] + [o for o in node.outputs if o]):
            root = self._alias_root.get(name, name)
            if root in keep or root in g.inputs or self.value(root).const is not None:
                continue
            aliases = [n for n, r in self._alias_root.items() if r == root] + [root]
            if all(last_use.get(a, -1) <= index for a in aliases) and root in self._regs:
                if root not in self._freed:
                    self._freed.add(root)
                    self.free(self._regs[root])

