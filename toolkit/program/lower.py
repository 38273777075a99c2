"""Graph of core ops -> program IR.

:func:`lower_graph` plans which values are written in place into part of another's buffer
(:func:`.memory.plan_in_place`), binds the inputs (their dims bind symbols and are
checked), then asks each node's core op to lower itself through a :class:`Lowerer`, then
emits the outputs. Afterwards the memory passes plan the static arena
(:func:`.liveness.plan_arena`) and the dynamic one (:func:`.memory.plan_dynamic`, whose
prologue goes where the inputs have been bound), free dead run-time buffers, and the
program is verified.

The Lowerer is what a core op's ``lower`` sees. It has no opcodes in its interface: ops ask
for registers of values (:meth:`~Lowerer.tensor`, :meth:`~Lowerer.alloc`,
:meth:`~Lowerer.view`, :meth:`~Lowerer.scratch`), slots holding the run-time value of dim
expressions and named shape builtins (checks, arithmetic, broadcast, Reshape's target,
Slice's bounds), which it has from its base class :class:`.shapes.ShapeEmitter`, and
kernel calls (:meth:`~Lowerer.call`), whose keys are derived (:mod:`.kernels`).

Dims are evaluated once per scope, and values materialized once: an expression lowered to a
slot, or a constant or shape value given a register, is remembered in the current
:class:`~.shapes.Scope`; an If branch or a Loop body lowers in a child scope, so that what
one side computed is never reused on the other or after the join.
"""
from __future__ import annotations

from math import prod
from typing import Any, Callable, Sequence

import numpy as np

from ..codegen.target import Target
from ..ir import dims as D
from ..ir.dims import Dim, Sym
from ..ir.dtypes import UINT8, DType, dtype_of_numpy
from ..ir.graph import CompileError, Graph, Node, Value
from ..ops.base import recomputable
from ..vm import isa
from . import liveness, memory
from .ir import Block, KernelRef, Program, Reg, Slot, StaticBuffer
from .kernels import BuildFn, KernelTable
from .shapes import Scope, ShapeEmitter


class Lowerer(ShapeEmitter):
    """Builds one program; core ops' ``lower`` methods call it. ``places``: the static
    buffers planned for the values written in place and for the values that hold them
    (:func:`.memory.plan_in_place`)."""

    def __init__(self, graph: Graph, kernels: KernelTable, prog: Program,
                 places: dict[str, StaticBuffer]):
        super().__init__(prog, prog.new_block("entry"))
        self.graph = graph
        self.kernels = kernels
        self._result_slots: set[Slot] = set()  # the scalars kernels write (result_slot)
        self.node: Node | None = None
        # control flow: the values a region yields get run-time buffers (a static buffer
        # cannot leave its region), and the buffers the current region owns may be moved out
        self._runtime_values: set[str] = set()
        self._owned: list[set[Reg]] = [set()]
        self._labels: dict[str, int] = {}
        self._hoisted: set[int] = set()  # ids of checks emitted at the start (input relations)
        self.loop_depth = 0  # Loop bodies being lowered (a string pool cannot be made in one)
        self._places = places
        self.in_place: set[Reg] = set()  # the registers of values written in place (parts)

    @property
    def target(self) -> Target:
        return self.kernels.target

    def context(self) -> str:
        """What messages name: the node being lowered."""
        return self.node.label() if self.node else "model"

    # ------------------------------------------------------------------ slots
    def result_slot(self, name: str | None = None) -> Slot:
        """A slot a kernel call writes (CALL's scalars are read and written): it starts
        every run at 0, so it is defined before the call reads it."""
        slot = self.prog.new_slot(name, init=0)
        self._result_slots.add(slot)
        return slot

    # ------------------------------------------------------------------ values
    def value(self, name: str) -> Value:
        return self.graph.values[name]

    def tensor(self, name: str) -> Reg:
        """The register of a value, materializing constants and shape values."""
        known = self.scope.reg(name)
        if known is not None:
            return known
        v = self.value(name)
        if v.const is not None and v.dtype.is_string:
            # the weights cannot hold addresses: the elements are stored as offsets into the
            # constant's own bytes and made addresses by a kernel (sw_lib.h, sw_text_unpack)
            from ..codegen.clib import CCall, build_ccall, pack_strings

            packed = pack_strings(v.const)
            blob = self.prog.new_reg(f"{name}/packed", UINT8, packed.shape)
            self.prog.consts.append((f"{name}/packed", packed))
            self._emit("CONST", blob, len(self.prog.consts) - 1)
            reg = self.alloc(name)
            self.call(build_ccall, CCall("sw_text_unpack"), [blob, reg])
        elif v.const is not None:
            reg = self.prog.new_reg(name, v.dtype, v.shape)
            # (np.ascontiguousarray would make a 0-d constant 1-d)
            arr = v.const if v.const.flags.c_contiguous else v.const.copy(order="C")
            self.prog.consts.append((name, arr))
            self._emit("CONST", reg, len(self.prog.consts) - 1)
        elif v.sym is not None:
            reg = self.alloc(name)
            self._emit("STORE_VALUES", reg, [self.slot(s) for s in v.sym])
        else:
            raise CompileError(f"{self.context()}: value '{name}' is used before it is computed "
                               f"(internal lowering order error)")
        self.scope.regs[name] = reg
        return reg

    def derived_const(self, name: str, what: str, make: Callable[[np.ndarray], np.ndarray]) -> Reg:
        """A constant made at compile time from constant value ``name`` by ``make`` (a packed
        layout a kernel reads; ``what`` names it, ``name/what``), made once per scope. The
        original is not stored unless something asks for it."""
        key = f"{name}/{what}"
        known = self.scope.reg(key)
        if known is not None:
            return known
        arr = np.ascontiguousarray(make(self.value(name).const))
        reg = self.prog.new_reg(key, dtype_of_numpy(arr.dtype), arr.shape)
        self.prog.consts.append((key, arr))
        self._emit("CONST", reg, len(self.prog.consts) - 1)
        self.scope.regs[key] = reg
        return reg

    def alloc(self, name: str) -> Reg:
        """A new buffer for value ``name`` with its symbolic shape: at the top level, the
        static buffer planned for it if it is written in place (a part of another value's,
        such as a Concat's input) or has parts."""
        v = self.value(name)
        place = None
        if self.scope.parent is None and name not in self._runtime_values:
            place = self._places.get(name)
        reg = self._buffer(name, v.dtype, v.shape, f"'{name}' {v.describe()}", place)
        if place is not None and place.parent is not None:
            self.in_place.add(reg)
        self.scope.regs[name] = reg
        return reg

    def scratch(self, what: str, dtype: DType, shape: Sequence[Dim]) -> Reg:
        """A temporary buffer (``what`` names it in messages); it dies after its last use."""
        return self._buffer(what, dtype, tuple(shape), f"the {what} {D.fmt_shape(shape)}")

    def pool(self, what: str, nbytes: Dim) -> Reg:
        """A uint8 buffer of ``nbytes`` that new strings' bytes go into. It lives until the run
        ends (``prog.kept``): string elements anywhere may point into it."""
        if self.loop_depth:
            raise CompileError(f"{self.context()}: making new strings inside a Loop or Scan body is not "
                               f"supported (their bytes must outlive the iteration)")
        reg = self._buffer(what, UINT8, (nbytes,), f"the {what} ({nbytes} bytes)")
        self.prog.kept.add(reg)
        return reg

    def _buffer(self, name: str, dtype: DType, shape: Sequence[Dim], what: str,
                place: StaticBuffer | None = None) -> Reg:
        """A static-arena buffer when the shape is known now (``place``, if given), a run-time
        allocation otherwise."""
        reg = self.prog.new_reg(name, dtype, tuple(shape))
        dims = [self.slot(d) for d in shape]
        if all(isinstance(d, int) for d in shape) and name not in self._runtime_values:
            nbytes = dtype.itemsize * prod(int(d) for d in shape)  # Python ints: no overflow
            if nbytes > isa.ARENA_LIMIT:
                raise CompileError(f"{self.context()}: {what} needs {nbytes} bytes, more than the "
                                   f"{isa.ARENA_LIMIT} a module can address")
            self._emit("ALLOC_STATIC", reg, dtype, place if place is not None else StaticBuffer(nbytes), dims)
        else:
            self._emit("ALLOC", reg, dtype, self._oom(what), dims)
            self._owned[-1].add(reg)
        return reg

    def _oom(self, what: str) -> str:
        return f"{self.context()}: cannot allocate {{0}} bytes for {what} (memory limit {{1}} bytes)"

    def view(self, out: str, src: str) -> Reg:
        """``out`` shares ``src``'s buffer with its own shape (Reshape, Squeeze, ...)."""
        return self.view_of(out, self.tensor(src))

    def values_of(self, name: str) -> list[Slot]:
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
        self._emit("LOAD_VALUES", self.tensor(name),
                   f"{self.context()}: '{name}' has {{0}} elements, expected {{1}}", slots)
        return slots

    # ------------------------------------------------------------------ kernels
    def call(self, build: BuildFn, params: Any, tensors: Sequence[Reg], scalars: Sequence[Slot] = (),
             error: str | None = None, *, outputs: int = 1) -> KernelRef:
        """Call the kernel ``build(kb, params, types)`` makes for these tensors (inputs then
        the ``outputs`` it writes) and scalars (read, and written back). ``error`` is the
        message when it fails ({0} {1} {2}: the kernel's details), prefixed with the node."""
        for r in tensors:
            if r.dtype is None:
                raise CompileError(f"{self.context()}: register {r!r} has no type (internal)")
        k = self.kernels.get(build, params, [(r.dtype, r.shape) for r in tensors], len(scalars), outputs)
        msg = f"{self.context()}: {error}" if error else f"{self.context()}: kernel failed ({{0}}, {{1}}, {{2}})"
        # --check-facts: a scalar the kernel only reads (a dim, a constant) is unchanged after
        # it, since a CALL writes every scalar back and other values share that slot
        read_only = [(s, self.arith("ADD", s, self.const_slot(0))) for s in dict.fromkeys(scalars)
                     if s not in self._result_slots] if self.graph.check_facts else []
        self._emit("CALL", k, msg, list(tensors), list(scalars))
        for s, before in read_only:
            self.check_eq(s, before, f"{self.context()}: fact check failed: kernel {k.name} changed its scalar "
                                     f"input {s.name or s.id} from {{1}} to {{0}}")
        return k

    def run_kernel(self, build: BuildFn, params: Any, inputs: Sequence[str], outputs: Sequence[str],
                   error: str | None = None) -> None:
        """Call a kernel on the values ``inputs`` and new buffers for ``outputs``."""
        self.call(build, params, [self.tensor(i) for i in inputs] + [self.alloc(o) for o in outputs],
                  error=error, outputs=len(outputs))

    # ------------------------------------------------------------------ control flow
    def new_block(self, label: str) -> Block:
        """A block to jump to, placed in the program by :meth:`start`."""
        n = self._labels.get(label, 0)
        self._labels[label] = n + 1
        return Block(f"{label}{n}" if n else label)

    def start(self, block: Block) -> None:
        """Continue emitting into ``block``, laid out after everything emitted so far (the
        previous block falls through to it unless it ended in a jump)."""
        self.prog.blocks.append(block)
        self.block = block

    def jump(self, block: Block) -> None:
        self._emit("JUMP", block)

    def branch(self, cond: Slot, block: Block) -> None:
        """Continue at ``block`` if ``cond`` is non-zero, else with what follows."""
        self._emit("BRANCH", cond, block)

    def lower_nodes(self, nodes: Sequence[Node]) -> None:
        for node in nodes:
            outs = [o for o in node.outputs if o]
            if outs and all(self.graph.values[o].known for o in outs) and not recomputable(self.graph, node):
                continue  # computed at compile time; materialized where a kernel reads it
            self.node = node
            self.emit_checks(node)
            node.op.lower(self, node)
            if outs and all(self.graph.values[o].known for o in outs):
                self.check_facts_of(node)

    def lower_region(self, region, bind: dict[str, Reg]) -> list[Reg]:
        """Lower a region's nodes in a child scope where its inputs are the registers
        ``bind`` gives; returns registers of its outputs, each either a buffer the region
        allocated (which may be moved out) or anything else (to be copied out). The
        caller hands them out with :meth:`yield_to` before leaving the scope. Messages
        name the control node again afterwards."""
        node = self.node
        self.scope.regs.update(bind)
        self._runtime_values.update(region.outputs)
        self.lower_nodes(region.nodes)
        outs = [self.tensor(o) for o in region.outputs]
        self.node = node
        return outs

    def enter_region(self) -> tuple:
        saved = (self.scope, self.node)
        self.scope = Scope(self.scope)
        self._owned.append(set())
        return saved

    def leave_region(self, saved: tuple) -> None:
        self.scope, self.node = saved
        self._owned.pop()

    def yield_to(self, srcs: Sequence[Reg | None], dsts: Sequence[Reg], what: Sequence[str]) -> None:
        """Hand values out of the current region into registers of the enclosing one: a
        buffer the region allocated moves (no copy); anything else (a value of an enclosing
        scope, a constant, a view, a buffer handed out twice) is copied first, so that no
        destination is written before every source has been read. None: leave that
        destination as it is."""
        moved: set[Reg] = set()
        final: list[tuple[Reg, Reg]] = []
        for src, dst, w in zip(srcs, dsts, what):
            if src is None:
                continue
            if src in self._owned[-1] and src not in moved:
                moved.add(src)
                final.append((dst, src))
            else:
                tmp = self.prog.new_reg(w, src.dtype, src.shape)
                self._emit("COPY", tmp, src, self._oom(f"a copy of {w}"))
                final.append((dst, tmp))
        for dst, src in final:
            self._emit("MOVE", dst, src)

    def new_reg(self, name: str, dtype: DType | None, shape: Sequence[Dim]) -> Reg:
        """A register that holds nothing yet (a control op's result, defined on each path)."""
        return self.prog.new_reg(name, dtype, shape)

    def bind(self, name: str, reg: Reg) -> None:
        """Value ``name`` is in ``reg`` from here on, in the current scope."""
        self.scope.regs[name] = reg

    def copy(self, dst: Reg, src: Reg, what: str) -> None:
        """``dst`` := a new buffer holding a copy of ``src``."""
        self._emit("COPY", dst, src, self._oom(what))

    def view_of(self, name: str, src: Reg) -> Reg:
        """A register for value ``name`` (with its symbolic shape) viewing ``src``'s tensor."""
        v = self.value(name)
        reg = self.prog.new_reg(name, v.dtype, v.shape)
        self._emit("VIEW", reg, src, [self.slot(d) for d in v.shape])
        self.scope.regs[name] = reg
        return reg

    def own(self, reg: Reg) -> None:
        """``reg`` holds a buffer the current region owns (it may be moved out)."""
        self._owned[-1].add(reg)

    def move(self, dst: Reg, src: Reg) -> None:
        self._emit("MOVE", dst, src)

    def alloc_empty(self, reg: Reg, dims: Sequence[Slot], what: str) -> None:
        """A run-time buffer in ``reg`` with the given dims (slots): an accumulator."""
        self._emit("ALLOC", reg, reg.dtype, self._oom(what), list(dims))

    def append(self, acc: Reg, item: Reg, what: str) -> None:
        self._emit("APPEND", acc, item,
                   f"{self.context()}: {what}: dim {{0}} is {{2}} in this iteration, {{1}} in the first",
                   self._oom(what))

    def store_scalar(self, name: str, dtype: DType, value: Slot, shape: tuple = ()) -> Reg:
        """A new run-time tensor holding ``value`` (a loop's iteration number)."""
        reg = self._buffer(name, dtype, shape, f"'{name}'")
        self._emit("STORE_VALUES", reg, [value])
        return reg

    def load_scalar(self, name: str, what: str, into: Slot | None = None) -> Slot:
        """A slot holding the single integer (or bool) element of value ``name``."""
        v = self.value(name)
        known = v.int_contents()
        if known is not None:
            if into is None:
                return self.slot(known[0])
            self.assign(into, self.slot(known[0]))
            return into
        slot = into or self.new_slot(name)
        self._emit("LOAD_VALUES", self.tensor(name),
                   f"{self.context()}: {what} '{name}' has {{0}} elements, expected {{1}}", [slot])
        return slot

    # ------------------------------------------------------------------ driver pieces
    def bind_inputs(self) -> None:
        for i, name in enumerate(self.graph.inputs):
            v = self.value(name)
            reg = self.new_reg(name, v.dtype, v.shape)
            self.scope.regs[name] = reg
            self.prog.inputs.append((v.dtype, v.rank, name))
            self._emit("INPUT", i, reg)
            for axis, d in enumerate(v.shape):
                self.bind_dim(d, self.dim_of(reg, axis, f"{name}.shape[{axis}]"), f"input '{name}' dim {axis}")

    def check_input_relations(self, nodes: Sequence[Node]) -> None:
        """Right after the inputs are bound, every relation among input symbols that the
        nodes of the top level (which all run) rely on: their deferred checks whose dims
        involve only input symbols, and exact divisions such as ``seq / heads``. So a run
        with inputs that could never work fails before any kernel, naming the node and the
        inputs' dims, instead of half way through."""
        for node in nodes:
            outs = [o for o in node.outputs if o]
            if outs and all(self.graph.values[o].known for o in outs):
                continue
            self.node = node
            for c in node.checks:
                if self._of_inputs(c.a, c.b):
                    self.check(c)
                    self._hoisted.add(id(c))
            for o in outs:
                for d in self.value(o).shape:
                    for atom in _div_atoms(d):
                        if self._of_inputs(atom) and not self.is_defined(atom):
                            self.slot(atom)
        self.node = None

    def _of_inputs(self, *dims: Dim) -> bool:
        syms = set().union(*[D.free_symbols(d) for d in dims])
        return bool(syms) and all(s.kind == "input" and self.is_defined(D.atom_expr(s)) for s in syms)

    def check_facts_of(self, node: Node) -> None:
        """--check-facts: ``node``'s outputs, which the compiler knew and which its kernel has
        now computed, hold what the compiler derived, element by element."""
        for o in node.outputs:
            v, reg = self.value(o) if o else None, self.scope.reg(o) if o else None
            if reg is not None:
                derived = v.int_contents()
                self.check_values(reg, derived, f"'{o}'")

    def loaded_values(self, reg: Reg, n: int, what: str) -> list[Slot]:
        """New slots := the ``n`` integer elements of the tensor in ``reg`` at run time (for
        --check-facts: what a kernel computed, not what the compiler derived)."""
        got = [self.new_slot(f"{what}[{i}] at run time") for i in range(n)]
        self._emit("LOAD_VALUES", reg, f"{self.context()}: fact check failed: {what} has {{0}} elements at run "
                                       f"time, the compiler derived {{1}}", got)
        return got

    def check_values(self, reg: Reg, derived: Sequence[Dim], what: str) -> None:
        """Fail naming the node unless the tensor in ``reg`` holds ``derived`` (dims the
        compiler relied on)."""
        got = self.loaded_values(reg, len(derived), what)
        for i, (s, d) in enumerate(zip(got, derived)):
            self.check_eq(s, self.slot(d), f"{self.context()}: fact check failed: {what}[{i}] is {{0}} at run "
                                           f"time; the compiler derived {d} = {{1}}")

    def emit_checks(self, node: Node) -> None:
        """The run-time checks the node's shape function could not prove."""
        for c in node.checks:
            if id(c) in self._hoisted:
                continue
            self.check(c)

    def emit_outputs(self) -> None:
        self.node = None
        for i, name in enumerate(self.graph.outputs):
            self._emit("OUTPUT", i, self.tensor(name))
            self.prog.outputs.append(name)
        self._emit("RETURN")


def _div_atoms(d: Dim) -> list[Dim]:
    """The exact-division atoms inside ``d`` (``seq / 4``), innermost first."""
    out: list[Dim] = []
    seen: set[int] = set()  # shared subexpressions are walked once

    def walk(x) -> None:
        if id(x) in seen:
            return
        seen.add(id(x))
        if isinstance(x, D.Expr):
            for mono, _ in x.terms:
                for a in mono:
                    walk(a)
        elif isinstance(x, D.Atom) and not isinstance(x, Sym):
            for c in x.args:
                walk(c)
            if x.op == "div":
                out.append(D.atom_expr(x))

    walk(d)
    return out


def lower_graph(graph: Graph, kernels: KernelTable) -> Program:
    """The verified program for ``graph``, its kernels built into ``kernels``' module."""
    prog = kernels.prog
    lw = Lowerer(graph, kernels, prog, memory.plan_in_place(graph))
    lw.bind_inputs()
    lw.check_input_relations(graph.nodes)
    bound, prologue = lw.here(), lw.fork("prologue")
    lw.lower_nodes(graph.nodes)
    lw.emit_outputs()
    spans = liveness.intervals(prog)
    liveness.plan_arena(prog, spans)
    prog.memory = memory.plan_dynamic(prog, prologue, bound, spans)
    liveness.insert_frees(prog)
    prog.verify()
    return prog
