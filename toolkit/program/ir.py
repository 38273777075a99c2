"""The program IR: what the VM runs, before it becomes words.

A :class:`Program` is a list of :class:`Block` s of :class:`Instr` uctions whose operands
are objects, not numbers: :class:`Reg` (a tensor register), :class:`Slot` (an int64 in the
shape heap), message strings, :class:`KernelRef`, :class:`Block` (jump targets) and
:class:`StaticBuffer` (an ALLOC_STATIC's place in the arena, planned later). Each
instruction is one of the ISA's (:mod:`toolkit.vm.isa`), whose table also says which
operands an instruction reads and writes (:func:`toolkit.vm.isa.roles`).

Passes over a program (freeing dead buffers, planning the arena: :mod:`.liveness`; the
dynamic arena: :mod:`.memory`) work on these objects, and may put code at a :class:`Point`
marked while the program was built (:meth:`Program.insert`). :meth:`Program.verify` checks
a program; :meth:`Program.encode` turns it into words at the very end, resolving blocks to
offsets. Nothing is patched by word offset.

A block runs to its last instruction; one that does not end in RETURN or JUMP falls through
to the next block. BRANCH, JUMP and RETURN appear only at the end of a block.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from ..codegen.embed import Encoded
from ..ir.dtypes import DType
from ..ir.graph import CompileError
from ..vm import isa


class Reg:
    """A tensor register. ``dtype`` and ``shape`` describe what it holds (kernel keys and
    messages use them)."""

    __slots__ = ("id", "name", "dtype", "shape")

    def __init__(self, id: int, name: str, dtype: DType | None = None, shape: tuple = ()):
        self.id, self.name, self.dtype, self.shape = id, name, dtype, shape

    def __repr__(self) -> str:
        return f"%{self.id}<{self.name}>"


class Slot:
    """An int64 of the shape heap. ``init`` not None: preset to it before a run; ``const``:
    it holds that value for the whole run (shared by every use of the value: never written)."""

    __slots__ = ("id", "name", "init", "const")

    def __init__(self, id: int, name: str | None = None, init: int | None = None, const: bool = False):
        self.id, self.name, self.init, self.const = id, name, init, const

    def __repr__(self) -> str:
        return f"${self.id}" + (f"<{self.name}>" if self.name else "")


@dataclass(eq=False)
class StaticBuffer:
    """Where an ALLOC_STATIC's tensor lives in the static arena: ``offset`` is planned from
    lifetimes after the program is complete (:func:`toolkit.program.liveness.plan_arena`).
    A buffer with a ``parent`` is a part of the parent's, ``at`` bytes from its start (an
    input an op writes in place into its output, such as a Concat's: see
    :func:`toolkit.program.memory.plan_in_place`), and lives as long as it."""

    nbytes: int
    offset: int | None = None
    parent: "StaticBuffer | None" = None
    at: int = 0

    def __repr__(self) -> str:
        where = "?" if self.offset is None else self.offset
        inside = "" if self.parent is None else f" (+{self.at} in a {self.parent.nbytes}-byte buffer)"
        return f"arena[{where}:+{self.nbytes}]{inside}"


@dataclass(eq=False)
class KernelRef:
    index: int
    name: str
    ntensors: int
    nscalars: int
    noutputs: int = 1  # its last tensors, the ones it writes
    signature: tuple[int, ...] = ()  # per tensor: dtype, rank, dims (see kernels.signature)
    unswitch_loops: bool = False  # its build function is codegen.kernel.unswitched
    parted: bool = False  # its work is split in parts across threads (KernelBuilder.part)

    def __repr__(self) -> str:
        return self.name


@functools.cache
def _operand_kinds(op: isa.Op) -> tuple[tuple[str, bool, str], ...]:
    """Per operand of ``op``: its kind (a list's element kind), whether it is a list, its role."""
    kinds = [isa.kind(spec) for spec in op.operands]
    return tuple((k.rstrip("*"), k.endswith("*"), role) for k, role in zip(kinds, isa.roles(op)))


@dataclass(eq=False)
class Instr:
    op: isa.Op
    args: list

    def operands(self) -> Iterator[tuple[str, str, object]]:
        """(kind, role, value) per operand; list operands are expanded."""
        for (k, many, role), value in zip(_operand_kinds(self.op), self.args):
            if many:
                for v in value:
                    yield k, role, v
            else:
                yield k, role, value

    def regs(self, *roles: str) -> list[Reg]:
        return [v for k, r, v in self.operands() if k == "reg" and r in roles]

    def slots(self, *roles: str) -> list[Slot]:
        return [v for k, r, v in self.operands() if k == "slot" and r in roles]

    @property
    def name(self) -> str:
        return self.op.name


@dataclass(eq=False)
class Block:
    label: str
    instrs: list[Instr] = field(default_factory=list)

    def __repr__(self) -> str:
        return self.label


TERMINATORS = ("RETURN", "JUMP")
ENDS_BLOCK = ("RETURN", "JUMP", "BRANCH")


@dataclass(eq=False)
class Point:
    """A place in a program, after instruction ``after`` of ``block`` (None: at its start),
    where a pass puts code it makes later (:meth:`Program.insert`): memory planning's
    prologue goes where the inputs have been bound. It names an instruction, not an index,
    so code inserted elsewhere in the block meanwhile does not move it."""

    block: Block
    after: Instr | None


class Program:
    def __init__(self) -> None:
        self.regs: list[Reg] = []
        self.slots: list[Slot] = []
        self.blocks: list[Block] = []
        self.consts: list[tuple[str, np.ndarray]] = []
        self.kernels: list[KernelRef] = []
        self.inputs: list[tuple[DType, int, str]] = []  # dtype, rank, name
        self.outputs: list[str] = []
        self.arena_size = 0
        self.memory = None  # the memory plan (toolkit.program.memory.MemoryPlan), set by lowering
        # buffers alive until the run ends although no OUTPUT reads them: string pools, whose
        # bytes the string elements of other tensors point into
        self.kept: set[Reg] = set()
        self._const_slots: dict[int, Slot] = {}

    # ------------------------------------------------------------------ building
    def new_reg(self, name: str, dtype: DType | None = None, shape: tuple = ()) -> Reg:
        r = Reg(len(self.regs), name, dtype, tuple(shape))
        self.regs.append(r)
        return r

    def new_slot(self, name: str | None = None, init: int | None = None, const: bool = False) -> Slot:
        s = Slot(len(self.slots), name, init, const)
        self.slots.append(s)
        return s

    def const_slot(self, v: int) -> Slot:
        """The slot holding ``v`` for the whole run: preset before it, so valid in every
        block and scope; one per value, shared by every use."""
        if v not in self._const_slots:
            self._const_slots[v] = self.new_slot(str(v), init=v, const=True)
        return self._const_slots[v]

    def new_block(self, label: str) -> Block:
        b = Block(label)
        self.blocks.append(b)
        return b

    def insert(self, at: Point, instrs: list[Instr]) -> None:
        """Put ``instrs`` at point ``at``, in order."""
        k = 0 if at.after is None else next(i for i, ins in enumerate(at.block.instrs) if ins is at.after) + 1
        at.block.instrs[k:k] = instrs

    def instrs(self) -> Iterator[tuple[Block, int, Instr]]:
        for block in self.blocks:
            for i, ins in enumerate(block.instrs):
                yield block, i, ins

    def successors(self, index: int) -> list[int]:
        """Indices of the blocks that may run after block ``index``."""
        block = self.blocks[index]
        last = block.instrs[-1] if block.instrs else None
        out = []
        if last is not None and last.name in ("JUMP", "BRANCH"):
            out.append(self.blocks.index(last.args[-1]))
        if last is None or last.name not in TERMINATORS:
            if index + 1 < len(self.blocks):
                out.append(index + 1)
        return out

    # ------------------------------------------------------------------ text
    def dump(self, messages: bool = False) -> str:
        """Readable text: one instruction per line, what it defines on the left."""
        lines = []
        for block in self.blocks:
            lines.append(f"{block.label}:")
            for ins in block.instrs:
                lines.append("  " + _format(ins, messages))
        return "\n".join(lines)

    # ------------------------------------------------------------------ checks
    def verify(self) -> None:
        """Raise CompileError (an internal error: a compiler bug) unless the program is well
        formed: operands of the right kinds from this program, kernel arities, blocks ending
        properly, and every register and slot defined on every path before it is read."""
        def bad(block: Block, ins: Instr | None, why: str):
            where = f"{block.label}: {_format(ins, False)}" if ins is not None else block.label
            raise CompileError(f"internal error: invalid program at {where}: {why}")

        if not self.blocks:
            raise CompileError("internal error: invalid program: no blocks")
        for block in self.blocks:
            if not block.instrs:
                bad(block, None, "empty block")
            for i, ins in enumerate(block.instrs):
                if len(ins.args) != len(ins.op.operands):
                    bad(block, ins, f"{len(ins.args)} operands, {ins.op.name} takes {len(ins.op.operands)}")
                for k, _, v in ins.operands():
                    if not _kind_ok(self, k, v, ins):
                        bad(block, ins, f"operand {v!r} is not a {k}")
                if ins.name in ENDS_BLOCK and i != len(block.instrs) - 1:
                    bad(block, ins, f"{ins.name} before the end of its block")
                if ins.name == "CALL":
                    k, regs, scalars = ins.args[0], ins.args[2], ins.args[3]
                    if (len(regs), len(scalars)) != (k.ntensors, k.nscalars):
                        bad(block, ins, f"{k.name} takes {k.ntensors} tensors and {k.nscalars} scalars, "
                                        f"given {len(regs)} and {len(scalars)}")
        if self.blocks[-1].instrs[-1].name not in TERMINATORS:
            bad(self.blocks[-1], self.blocks[-1].instrs[-1], "the last block falls off the end")
        self._verify_defined(bad)

    def _verify_defined(self, bad) -> None:
        preset = frozenset(s for s in self.slots if s.init is not None)
        n = len(self.blocks)
        preds: list[list[int]] = [[] for _ in range(n)]
        for i in range(n):
            for j in self.successors(i):
                preds[j].append(i)
        everything = frozenset(self.regs) | frozenset(self.slots)
        # what each block defines, read once: the fixpoint below only needs the union
        defines = [frozenset(v for ins in block.instrs for v in ins.regs("def") + ins.slots("def"))
                   for block in self.blocks]
        out: list[frozenset] = [everything] * n  # "defined at the end": start full, intersect down
        changed = True
        while changed:
            changed = False
            for i in range(n):
                have = preset if i == 0 else frozenset.intersection(*[out[p] for p in preds[i]]) if preds[i] \
                    else preset
                new = have | defines[i]
                if new != out[i]:
                    out[i], changed = new, True
        for i, block in enumerate(self.blocks):
            have = set(preset if i == 0 or not preds[i] else frozenset.intersection(*[out[p] for p in preds[i]]))
            for ins in block.instrs:
                # a constant slot is shared by every use of its value: had RESHAPE resolved the
                # constant 0 in place, 0 would read as the batch everywhere after
                # (reshape_zero_trunk). A CALL's scalars are inputs to most kernels; the few that
                # write theirs are given result slots, which the lowerer's call sites choose
                for s in ins.slots("def", "usedef") if ins.name != "CALL" else ():
                    if s.const:
                        bad(block, ins, f"{s!r} holds the constant {s.init} and is written")
                for v in ins.regs("use", "usedef") + ins.slots("use", "usedef"):
                    if v not in have:
                        bad(block, ins, f"{v!r} is read before it is defined")
                have.update(ins.regs("def") + ins.slots("def"))

    # ------------------------------------------------------------------ words
    def encode(self) -> Encoded:
        strings: list[str] = []
        ids: dict[str, int] = {}

        def string(text: str) -> int:
            if text not in ids:
                ids[text] = len(strings)
                strings.append(text)
            return ids[text]

        starts: dict[int, int] = {}
        pc = 0
        for block in self.blocks:
            starts[id(block)] = pc
            pc += sum(_length(ins) for ins in block.instrs)
        words: list[int] = []
        for block in self.blocks:
            for ins in block.instrs:
                vals = [[_word(x, k, string, starts) for x in v] if many else _word(v, k, string, starts)
                        for (k, many, _), v in zip(_operand_kinds(ins.op), ins.args)]
                words.extend(isa.encode(ins.op.name, *vals))
        inputs = [w for dt, rank, name in self.inputs for w in (dt.code, rank, string(name))]
        outputs = [string(name) for name in self.outputs]
        kernel_info: list[int] = []
        kernel_sigs: list[int] = []
        for k in self.kernels:
            kernel_info += [k.ntensors, k.nscalars, k.noutputs, len(kernel_sigs), int(k.parted)]  # abi.KERNEL_INFO
            kernel_sigs += k.signature
        return Encoded(
            words=words, strings=strings, heap_init=[s.init or 0 for s in self.slots],
            arena_size=self.arena_size, kernels=[k.name for k in self.kernels],
            kernel_info=kernel_info, kernel_sigs=kernel_sigs,
            inputs=inputs, outputs=outputs, consts=list(self.consts),
            reg_names=[r.name for r in self.regs],
            slot_names={s.id: s.name for s in self.slots if s.name},
            blocks={starts[id(b)]: b.label for b in self.blocks})


def _length(ins: Instr) -> int:
    n = 1
    for spec, v in zip(ins.op.operands, ins.args):
        n += 1 + len(v) if spec.endswith("*") else 1
    return n


def _word(v, k: str, string, starts: dict[int, int]) -> int:
    if k in ("reg", "slot"):
        return v.id
    if k == "msg":
        return string(v)
    if k == "kernel":
        return v.index
    if k == "pc":
        return starts[id(v)]
    if k == "dtype":
        return v.code
    if k == "arith":
        return isa.ARITH.index(v)
    if isinstance(v, StaticBuffer):
        if v.offset is None:
            raise CompileError("internal error: a static buffer was never placed in the arena")
        return v.offset
    return int(v)


def _kind_ok(prog: Program, k: str, v, ins: Instr) -> bool:
    if k == "reg":
        return isinstance(v, Reg) and v.id < len(prog.regs) and prog.regs[v.id] is v
    if k == "slot":
        return isinstance(v, Slot) and v.id < len(prog.slots) and prog.slots[v.id] is v
    if k == "msg":
        return isinstance(v, str)
    if k == "kernel":
        return isinstance(v, KernelRef) and v.index < len(prog.kernels) and prog.kernels[v.index] is v
    if k == "pc":
        return isinstance(v, Block) and any(b is v for b in prog.blocks)
    if k == "dtype":
        return isinstance(v, DType)
    if k == "arith":
        return v in isa.ARITH
    if k == "const":
        return isinstance(v, int) and 0 <= v < len(prog.consts)
    if k == "input":
        return isinstance(v, int) and 0 <= v < len(prog.inputs)
    if k == "output":
        return isinstance(v, int) and 0 <= v < len(prog.outputs)
    if k == "imm":
        return isinstance(v, (int, StaticBuffer))
    return False


def _format(ins: Instr, messages: bool) -> str:
    defs, rest = [], []
    for spec, role, v in zip(ins.op.operands, isa.roles(ins.op), ins.args):
        k = isa.kind(spec)
        text = _fmt_value(k, v, messages)
        if text is None:
            continue
        (defs if role == "def" and not k.endswith("*") else rest).append(text)
    head = f"{', '.join(defs)} = " if defs else ""
    return f"{head}{ins.op.name} {', '.join(rest)}".rstrip()


def _fmt_value(k: str, v, messages: bool) -> str | None:
    if k.endswith("*"):
        return "[" + ", ".join(_fmt_value(k[:-1], x, messages) or "" for x in v) + "]"
    if k == "msg":
        return repr(v) if messages else None
    if k == "dtype":
        return v.name
    return repr(v) if not isinstance(v, (int, str)) else str(v)
