"""Dims -> slots: the instructions that give dim expressions their run-time values.

A :class:`ShapeEmitter` appends to one block of a :class:`~.ir.Program` and offers:

- slots: :meth:`~ShapeEmitter.slot` holds the run-time value of a dim expression, evaluated
  once per :class:`Scope`; :meth:`~ShapeEmitter.const_slot` (the program's constant slots,
  shared by every emitter), :meth:`~ShapeEmitter.new_slot`, :meth:`~ShapeEmitter.define`
  (a symbol's slot), :meth:`~ShapeEmitter.is_defined`, :meth:`~ShapeEmitter.can_evaluate`;
- input dims: :meth:`~ShapeEmitter.bind_dim` binds a symbol where an input's dim first
  gives it, checks its range, and checks every later dim against it. It remembers where
  each symbol was bound, so messages can say which input dims a failing expression comes from;
- the shape builtins: :meth:`~ShapeEmitter.arith`, :meth:`~ShapeEmitter.assign`,
  :meth:`~ShapeEmitter.bcast`, :meth:`~ShapeEmitter.broadcast_dims`,
  :meth:`~ShapeEmitter.check_eq`, :meth:`~ShapeEmitter.check_le`,
  :meth:`~ShapeEmitter.check_nonnegative`, :meth:`~ShapeEmitter.check` (a node's deferred
  :class:`~toolkit.ir.graph.Check`), :meth:`~ShapeEmitter.reshape_target`,
  :meth:`~ShapeEmitter.slice_dim`, :meth:`~ShapeEmitter.dim_of`,
  :meth:`~ShapeEmitter.define_dims`.

It has two users. The :class:`~.lower.Lowerer` is a subclass: ops call ``lw.slot(d)`` and
``lw.check_eq`` on the same object that gives them registers and kernels, so the current
block and scope are one pair of fields, never two kept in step, and the Lowerer's
:meth:`~ShapeEmitter.context` (the node being lowered) is what messages name. Memory
planning (:mod:`.memory`) is the other. It evaluates the dynamic arena's offsets after the
whole program is lowered, as if at the point where the inputs were bound: lowering
:meth:`~ShapeEmitter.fork` s an emitter at that point, and the planner puts what it emitted
there (:meth:`~.ir.Program.insert`).

A scope also remembers the register of each value (the Lowerer's), so that a branch's
child scope forgets both together: what one side computed is never reused on the other or
after the join.
"""
from __future__ import annotations

from typing import Sequence

from ..ir import dims as D
from ..ir.dims import Dim, Sym
from ..ir.graph import Check, CompileError
from ..vm import isa
from .ir import Block, Instr, Point, Program, Reg, Slot


class Scope:
    """Which slot holds each dim expression and which register each value, in one scope of
    straight-line code; lookups fall back to the enclosing scope."""

    def __init__(self, parent: "Scope | None" = None):
        self.parent = parent
        self.slots: dict[Dim, Slot] = {}
        self.regs: dict[str, Reg] = {}

    def slot(self, d: Dim) -> Slot | None:
        return self._find("slots", d)

    def reg(self, name: str) -> Reg | None:
        return self._find("regs", name)

    def _find(self, table: str, key):
        """``key`` in this scope's ``table`` or the nearest enclosing scope's."""
        scope: Scope | None = self
        while scope is not None:
            found = getattr(scope, table).get(key)
            if found is not None:
                return found
            scope = scope.parent
        return None


class ShapeEmitter:
    """Emits dim computations and shape checks into ``block`` of ``prog`` (see the module
    doc). ``bound``: input symbol -> where it was bound ("input 'x' dim 0"), shared with
    the emitter this one was forked from."""

    def __init__(self, prog: Program, block: Block, scope: Scope | None = None,
                 bound: dict[Sym, str] | None = None):
        self.prog = prog
        self.block = block
        self.scope = Scope() if scope is None else scope
        self._bound: dict[Sym, str] = {} if bound is None else bound

    def context(self) -> str:
        """What messages name; the Lowerer names the node being lowered."""
        return "model"

    def _emit(self, op: str, *args) -> Instr:
        ins = Instr(isa.BY_NAME[op], list(args))
        self.block.instrs.append(ins)
        return ins

    def here(self) -> Point:
        """The point after the last instruction emitted so far."""
        return Point(self.block, self.block.instrs[-1] if self.block.instrs else None)

    def fork(self, label: str) -> ShapeEmitter:
        """An emitter into a new block ``label`` (not in the program: see
        :meth:`~.ir.Program.insert`) that knows the dims this one has evaluated so far in
        its scope, and where the input symbols were bound. What either evaluates from
        then on is its own."""
        scope = Scope()
        scope.slots.update(self.scope.slots)
        return ShapeEmitter(self.prog, Block(label), scope, self._bound)

    # ------------------------------------------------------------------ slots
    def new_slot(self, name: str | None = None) -> Slot:
        return self.prog.new_slot(name)

    def const_slot(self, v: int) -> Slot:
        return self.prog.const_slot(v)

    def define(self, d: Dim, slot: Slot) -> None:
        """Record that ``slot`` holds the run-time value of ``d`` (a symbol, usually)."""
        d = D.as_dim(d)
        self.scope.slots[d] = slot
        if isinstance(d, D.Expr) and (slot.name is None or isinstance(d.atom(), Sym)):
            slot.name = str(d)  # a symbol names its slot better than its source

    def is_defined(self, d: Dim) -> bool:
        return isinstance(d, int) or self.scope.slot(D.as_dim(d)) is not None

    def can_evaluate(self, d: Dim) -> bool:
        """Whether every symbol of ``d`` has a value at this point."""
        return all(self.is_defined(D.atom_expr(s)) for s in D.free_symbols(d))

    def slot(self, d: Dim) -> Slot:
        """A slot holding the run-time value of dim expression ``d``, evaluating it once."""
        d = D.as_dim(d)
        if isinstance(d, int):
            return self.const_slot(d)
        known = self.scope.slot(d)
        if known is not None:
            return known
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

    def _atom_slot(self, atom: D.Atom) -> Slot:
        if isinstance(atom, Sym):
            raise CompileError(f"{self.context()}: symbol '{atom}' has no value at this point "
                               f"(internal: no instruction defines it)")
        op, args = D.atom_op(D.atom_expr(atom))
        if op == "bcast":
            msg = f"{self.context()}: dims {args[0]} = {{0}} and {args[1]} = {{1}} do not broadcast"
            return self.broadcast_dims(args, msg)
        if op in ("min", "max"):
            slot = self.slot(args[0])
            for x in args[1:]:
                slot = self.arith(op.upper(), slot, self.slot(x))
            return slot
        if op == "ifzero":  # v + (v == 0) * (d - v)
            v, d = self.slot(args[0]), self.slot(args[1])
            zero = self.arith("EQ", v, self.const_slot(0))
            return self.arith("ADD", v, self.arith("MUL", zero, self.arith("SUB", d, v)))
        kind = {"floordiv": "FLOORDIV", "mod": "MOD", "div": "DIV"}[op]
        where = self._where(D.atom_expr(atom)) if kind == "DIV" else ""
        msg = (f"{self.context()}: {args[0]} = {{0}} is not divisible by {args[1]} = {{1}}"
               + (f" ({where})" if where else "") if kind == "DIV" else None)
        return self.arith(kind, self.slot(args[0]), self.slot(args[1]), msg)

    # ------------------------------------------------------------------ input dims
    def bind_dim(self, d: Dim, s: Slot, where: str) -> None:
        """Slot ``s`` holds a run-time dim declared as ``d`` (``where`` names it: "input 'x'
        dim 0"). A symbol met for the first time is bound to it and its range checked;
        anything else is checked against the value it already has."""
        atom = d.atom() if isinstance(d, D.Expr) else None
        if isinstance(d, int):
            self.check_eq(s, self.const_slot(d), f"{where}: expected {d}, got {{0}}")
        elif isinstance(atom, Sym) and not self.is_defined(d):
            self.define(d, s)
            self._bound[atom] = where
            if atom.lo > 0:
                self.check_le(self.const_slot(atom.lo), s, f"{where} ({atom}): {{1}} is below the minimum {{0}}")
            if atom.hi is not None:
                self.check_le(s, self.const_slot(atom.hi), f"{where} ({atom}): {{0}} exceeds bound {{1}}")
        else:
            first = self._bound.get(atom, "an earlier dim") if atom else "its expression"
            self.check_eq(s, self.slot(d), f"{where} ({d}): got {{0}}, but {d} = {{1}} from {first}")

    def _where(self, d: Dim) -> str:
        """Which input dims the symbols of ``d`` come from."""
        return ", ".join(f"{s} from {self._bound[s]}" for s in sorted(D.free_symbols(d), key=str)
                         if s in self._bound)

    # ------------------------------------------------------------------ shape builtins
    def arith(self, kind: str, a: Slot, b: Slot, msg: str | None = None) -> Slot:
        """A new slot := a <kind> b (see isa.ARITH); ``msg`` if it fails."""
        dst = self.new_slot()
        self.arith_into(kind, dst, a, b, msg)
        return dst

    def arith_into(self, kind: str, dst: Slot, a: Slot, b: Slot, msg: str | None = None) -> None:
        """``dst`` := a <kind> b (a slot redefined on each pass of a loop)."""
        self._emit("ARITH", kind, dst, a, b, msg or f"{self.context()}: shape arithmetic {kind.lower()} of "
                                                   f"{{0}} and {{1}} overflows or is undefined")

    def assign(self, dst: Slot, src: Slot) -> None:
        """``dst`` := ``src`` (a slot redefined on each pass of a loop)."""
        self.arith_into("ADD", dst, src, self.const_slot(0))

    def bcast(self, a: Slot, b: Slot, msg: str) -> Slot:
        """A new slot := the numpy broadcast of dims a and b; ``msg`` when they do not."""
        dst = self.new_slot()
        self._emit("BCAST", dst, a, b, msg)
        return dst

    def broadcast_dims(self, dims: Sequence[Dim], msg: str) -> Slot:
        """The numpy broadcast of ``dims``, failing with ``msg`` when they do not broadcast."""
        slot = self.slot(dims[0])
        for x in dims[1:]:
            slot = self.bcast(slot, self.slot(x), msg)
        return slot

    def check_eq(self, a: Slot, b: Slot, msg: str) -> None:
        self._emit("CHECK_EQ", a, b, msg)

    def check_le(self, a: Slot, b: Slot, msg: str) -> None:
        self._emit("CHECK_LE", a, b, msg)

    def check_nonnegative(self, d: Dim, msg: str) -> None:
        """``d >= 0`` at run time; ``msg`` gets the value as {1}."""
        if not isinstance(d, int) and D.bounds(d)[0] < 0:
            self.check_le(self.const_slot(0), self.slot(d), msg)

    def check(self, c: Check) -> None:
        """The run-time form of a condition a shape function could not prove."""
        if c.kind == "define":
            if not self.is_defined(c.a):
                self.define(c.a, self.broadcast_dims(D.atom_op(c.a)[1], c.message))
        elif c.kind == "eq":
            self.check_eq(self.slot(c.a), self.slot(c.b), c.message)
        elif c.kind == "le":
            self.check_le(self.slot(c.a), self.slot(c.b), c.message)
        else:
            # "a broadcasts to b" is one-way: a is 1 or equals b (BCAST alone would
            # also accept b == 1 < a)
            out = self.bcast(self.slot(c.a), self.slot(c.b), c.message)
            self.check_eq(out, self.slot(c.b), c.message)

    def reshape_target(self, input_dims: Sequence[Slot], target: Sequence[Slot], msg: str) -> list[Slot]:
        """Fresh slots holding the ``target`` with ONNX Reshape's 0 (copy the input dim) and -1
        (infer) resolved against the input's dims; fails with ``msg`` and the reason. The
        builtin resolves in place, so it works on copies: a target's slots may be shared with
        other values (the constant 0, a symbol such as the batch), which it must not change."""
        out = [self.new_slot() for _ in target]
        for o, t in zip(out, target):
            self.assign(o, t)
        self._emit("RESHAPE", msg, list(input_dims), out)
        return out

    def slice_dim(self, dim: Slot, start: Slot, end: Slot, step: Slot, msg: str,
                  name: str | None = None) -> tuple[Slot, Slot]:
        """(first, count) of ``range(dim)[start:end:step]`` with ONNX Slice's clamping;
        ``msg`` (with dim, start, end) when step is 0."""
        first, count = self.new_slot(name), self.new_slot()
        self._emit("SLICE_DIM", dim, start, end, step, first, count, msg)
        return first, count

    def dim_of(self, reg: Reg, axis: int, name: str | None = None) -> Slot:
        """A new slot := dim ``axis`` of the tensor in ``reg`` at run time."""
        s = self.new_slot(name)
        self._emit("DIM", s, reg, axis)
        return s

    def define_dims(self, dims: Sequence[Dim], slots: Sequence[Slot]) -> None:
        """Bind an output's data-dependent ``dims`` to run-time values, checking that each
        is a valid (non-negative) dim."""
        zero = self.const_slot(0)
        for axis, (d, s) in enumerate(zip(dims, slots)):
            if not self.is_defined(d):
                self.check_le(zero, s, f"{self.context()}: output dim {axis} is {{1}}")
                self.define(d, s)
