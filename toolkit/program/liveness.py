"""Buffer lifetimes over the program IR's control-flow graph.

A *buffer* is the register an ALLOC, ALLOC_STATIC, COPY, MOVE, INPUT or CONST defines; a
VIEW's register aliases the buffer of its source, so reading a view reads its buffer (a MOVE
hands its source's buffer to a new register, which is a buffer of its own from then on). Liveness is the usual
backward dataflow over blocks, so it holds across branches and loop back-edges.

Two uses of it:

- :func:`insert_frees` releases each run-time buffer (ALLOC) right after the instruction
  where it dies, and at the start of a block for a buffer live out of a predecessor but dead
  on entry (the other side of a branch);
- :func:`plan_arena` gives every static buffer (ALLOC_STATIC) an offset in the arena, sharing
  space between buffers whose live ranges, in the program's linear order, never overlap.

Buffers that reach an OUTPUT escape the run: never freed, alive to the end. So do the
buffers in ``prog.kept`` (string pools: other tensors' elements point into their bytes).
"""
from __future__ import annotations

from ..vm.isa import ARENA_LIMIT
from .ir import Block, Instr, Program, Reg, StaticBuffer

ARENA_ALIGN = 64

OWNING = ("ALLOC", "ALLOC_STATIC", "ALLOC_AT", "COPY", "MOVE")  # their first register gets a new buffer


def buffer_roots(prog: Program) -> dict[Reg, Reg]:
    """Register -> the register of the buffer it reads (itself for a buffer)."""
    root: dict[Reg, Reg] = {}
    for _, _, ins in prog.instrs():
        if ins.name == "VIEW":
            dst, src = ins.args[0], ins.args[1]
            root[dst] = root.get(src, src)
    return root


def _uses(ins: Instr, root: dict[Reg, Reg]) -> set[Reg]:
    return {root.get(r, r) for r in ins.regs("use", "usedef")}


def _defs(ins: Instr) -> set[Reg]:
    """Buffers whose previous contents die here (a new buffer in the register)."""
    return set(ins.regs("def")) if ins.name in OWNING else set()


def escaping(prog: Program, root: dict[Reg, Reg]) -> set[Reg]:
    """Buffers alive to the end: those an OUTPUT reads, and the kept ones (string pools)."""
    return {root.get(ins.args[1], ins.args[1]) for _, _, ins in prog.instrs() if ins.name == "OUTPUT"} | prog.kept


def live_sets(prog: Program, root: dict[Reg, Reg]) -> tuple[list[set[Reg]], list[set[Reg]]]:
    """(live_in, live_out) buffers per block."""
    n = len(prog.blocks)
    succ = [prog.successors(i) for i in range(n)]
    gen, kill = [], []
    for block in prog.blocks:
        g: set[Reg] = set()
        k: set[Reg] = set()
        for ins in reversed(block.instrs):
            d = _defs(ins)
            g -= d
            k |= d
            g |= _uses(ins, root)
        gen.append(g)
        kill.append(k)
    live_in: list[set[Reg]] = [set() for _ in range(n)]
    live_out: list[set[Reg]] = [set() for _ in range(n)]
    changed = True
    while changed:
        changed = False
        for i in reversed(range(n)):
            out = set().union(*[live_in[j] for j in succ[i]]) if succ[i] else set()
            inn = gen[i] | (out - kill[i])
            if out != live_out[i] or inn != live_in[i]:
                live_out[i], live_in[i], changed = out, inn, True
    return live_in, live_out


def _freeable(prog: Program) -> set[Reg]:
    return {ins.args[0] for _, _, ins in prog.instrs() if ins.name in ("ALLOC", "COPY", "MOVE")}


def _moved_out(ins: Instr) -> set[Reg]:
    """A MOVE empties its source: there is nothing left to free."""
    return {ins.args[1]} if ins.name == "MOVE" else set()


def insert_frees(prog: Program) -> None:
    """A FREE for every run-time buffer where it dies (see the module doc)."""
    from ..vm.isa import BY_NAME

    free_op = BY_NAME["FREE"]
    root = buffer_roots(prog)
    keep = escaping(prog, root)
    freeable = _freeable(prog) - keep
    live_in, live_out = live_sets(prog, root)
    preds: list[list[int]] = [[] for _ in prog.blocks]
    for i in range(len(prog.blocks)):
        for j in prog.successors(i):
            preds[j].append(i)
    for i, block in enumerate(prog.blocks):
        live = set(live_out[i])
        out: list[Instr] = []
        for ins in reversed(block.instrs):
            dying = sorted((_uses(ins, root) | _defs(ins)) - live - _moved_out(ins), key=lambda r: r.id)
            # after the instruction (before a block's final jump would be wrong: a jump has no uses)
            out.extend(Instr(free_op, [r]) for r in reversed(dying) if r in freeable)
            out.append(ins)
            live -= _defs(ins)
            live |= _uses(ins, root)
        out.reverse()
        entering = set().union(*[live_out[p] for p in preds[i]]) if preds[i] else set()
        head = [Instr(free_op, [r]) for r in sorted(entering - live_in[i], key=lambda r: r.id) if r in freeable]
        block.instrs = head + out
        _keep_terminator_last(block)


def _keep_terminator_last(block: Block) -> None:
    """A FREE placed after a block's BRANCH/JUMP/RETURN moves before it (those read no
    buffers, so the buffer is dead there too)."""
    ends = [k for k, ins in enumerate(block.instrs) if ins.name in ("RETURN", "JUMP", "BRANCH")]
    if ends and ends[-1] != len(block.instrs) - 1:
        k = ends[-1]
        block.instrs = block.instrs[:k] + block.instrs[k + 1:] + [block.instrs[k]]


def intervals(prog: Program) -> dict[Reg, tuple[int, int]]:
    """Per buffer, the first and last position (instructions numbered in block order) at
    which it is defined, read or live. Escaping buffers last to the end.

    Within a block a buffer is live over one stretch (from entry or its definition to exit
    or its last use), so the hull of those endpoints is the hull of every live position."""
    root = buffer_roots(prog)
    live_in, live_out = live_sets(prog, root)
    spans: dict[Reg, list[int]] = {}

    def touch(r: Reg, pos: int) -> None:
        s = spans.get(r)
        if s is None:
            spans[r] = [pos, pos]
        elif pos < s[0]:
            s[0] = pos
        elif pos > s[1]:
            s[1] = pos

    pos0 = 0
    for i, block in enumerate(prog.blocks):
        n = len(block.instrs)
        for r in live_in[i]:
            touch(r, pos0)
        for r in live_out[i]:
            touch(r, pos0 + n - 1)
        for k, ins in enumerate(block.instrs):
            for r in _uses(ins, root) | _defs(ins):
                touch(r, pos0 + k)
        pos0 += n
    end = pos0
    for r in escaping(prog, root):
        if r in spans:
            spans[r][1] = end
    return {r: (s[0], s[1]) for r, s in spans.items()}


def plan_arena(prog: Program, spans: dict[Reg, tuple[int, int]] | None = None) -> None:
    """Offsets for the static buffers: largest first, each at the lowest offset clear of
    every placed buffer whose live range overlaps its own (``spans``: :func:`intervals`,
    computed here if not given). Sets ``prog.arena_size``."""
    from ..ir.graph import CompileError

    spans = static_spans(prog, intervals(prog) if spans is None else spans)
    allocs = [(ins.args[0], ins.args[2]) for _, _, ins in prog.instrs() if ins.name == "ALLOC_STATIC"]
    statics: list[tuple[Reg, StaticBuffer]] = [(reg, buf) for reg, buf in allocs if buf.parent is None]
    placed: list[tuple[int, int, int, int]] = []  # start, end, offset, size
    top = 0
    for reg, buf in sorted(statics, key=lambda rb: (-rb[1].nbytes, rb[0].id)):
        start, end = spans.get(reg, (0, 0))
        size = -(-buf.nbytes // ARENA_ALIGN) * ARENA_ALIGN
        busy = sorted((off, off + sz) for s, e, off, sz in placed if s <= end and start <= e)
        offset = 0
        for lo, hi in busy:
            if offset + size <= lo:
                break
            offset = max(offset, hi)
        placed.append((start, end, offset, size))
        buf.offset = offset
        top = max(top, offset + size)
    for _, buf in allocs:
        if buf.parent is not None:
            buf.offset = buf.parent.offset + buf.at
    if top > ARENA_LIMIT:
        raise CompileError(f"the static arena needs {top} bytes, more than the {ARENA_LIMIT} a module can address")
    prog.arena_size = top


def static_spans(prog: Program, spans: dict[Reg, tuple[int, int]]) -> dict[Reg, tuple[int, int]]:
    """``spans`` with each static buffer that has parts (:class:`StaticBuffer`'s ``parent``,
    itself a buffer with none) alive over its parts' spans too, and the parts, which take no
    space of their own, left out."""
    allocs = [(ins.args[0], ins.args[2]) for _, _, ins in prog.instrs() if ins.name == "ALLOC_STATIC"]
    root_reg = {id(buf): reg for reg, buf in allocs if buf.parent is None}
    out = dict(spans)
    for reg, buf in allocs:
        if buf.parent is None:
            continue
        parent = root_reg[id(buf.parent)]
        s, e = out.pop(reg, (0, 0))
        ps, pe = out.get(parent, (s, e))
        out[parent] = (min(ps, s), max(pe, e))
    return out

