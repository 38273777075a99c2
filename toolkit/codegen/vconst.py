"""wasm32: vector constants used in loops are loaded once, before the loop.

LLVM's WebAssembly backend writes a ``v128.const`` at every use of a vector constant (it
rematerializes constants rather than keep them in locals), and V8 materializes each one in
three instructions, the last a shuffle: an ``exp`` over float32 spent 16 of its 35 cycles a
vector on its 16 constants, and erf twice that. A value loaded from memory is opaque to V8,
so here, after LLVM's optimization and before instruction selection, every 128-bit vector
constant used in a loop becomes a load from a read-only global, placed in the immediate
dominator of the header of the innermost loop that uses it (outside that loop, on every
path into it): the loop then reads a local (a register, or a stack slot), and Cranelift,
which loads constants from a pool anyway, is unchanged. Loading them all at the function's
entry instead kept a GEMM epilogue's constants live across the GEMM's own loops.

Constants stay where their value matters to instruction selection: shift counts (wasm
shifts take a scalar count), divisors (LLVM turns a division by a constant into a
multiply), shuffle masks and address offsets. Zero vectors stay (both engines make them
with one xor). The rewrite works on the optimized module's text; a line it cannot read
keeps its constants.
"""
from __future__ import annotations

import re

# the operand forms of a vector constant in LLVM's text: ``splat (float 2.0)`` (its width
# from the line's vector type) and ``<i32 1, i32 2, i32 3, i32 4>``
_SPLAT = re.compile(r"splat \((float|double|i8|i16|i32|i64) ([-\w.+]+)\)")
_LITERAL = re.compile(r"<((?:float|double|i8|i16|i32|i64) [-\w.+]+(?:, (?:float|double|i8|i16|i32|i64) [-\w.+]+)*)>")
_VTYPE = re.compile(r"<(\d+) x (float|double|i8|i16|i32|i64)>")
_BITS = {"float": 32, "double": 64, "i8": 8, "i16": 16, "i32": 32, "i64": 64}
# instructions whose constant operands instruction selection needs as constants
_KEEP = re.compile(r"=\s*(?:shl|lshr|ashr|udiv|sdiv|urem|srem|shufflevector|getelementptr)\b|@llvm\.fsh[lr]|"
                   r"@llvm\.wasm\.shuffle|\bswitch\b")
_LABEL = re.compile(r"^[-\w.$\"]+:")

ENABLED = True  # off only where a test compares a module against its own rewrite


def hoist(text: str) -> str:
    """``text``, an optimized wasm32 module, with the vector constants of its functions'
    loops loaded before the loops (see the module's docstring)."""
    pool: dict[tuple[str, str], str] = {}  # (vector type, literal) -> global name
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("define ") and line.rstrip().endswith("{"):
            end = i + 1
            while lines[end] != "}":
                end += 1
            out.extend(_function(lines[i:end + 1], pool))
            i = end + 1
            continue
        out.append(line)
        i += 1
    if not pool:
        return text
    for (vtype, literal), name in pool.items():
        out.append(f"{name} = private unnamed_addr constant {vtype} {literal}, align 16")
    # the kernels' memory attributes (argmem only, say) no longer hold once they read a global
    return re.sub(r" memory\([^)]*\)", "", "\n".join(out))


def _function(body: list[str], pool: dict[tuple[str, str], str]) -> list[str]:
    """One function's lines (``define`` to ``}``), its loops' constants loaded before them."""
    blocks = _blocks(body)
    idom = _dominators(blocks)
    loop_of = _innermost_loops(blocks, idom)
    # per loop header: its constants' local names, loaded at the end of the header's
    # immediate dominator (outside the loop, and on every path into it)
    loads: dict[str, dict[tuple[str, str], str]] = {}
    counter = [0]
    out_lines: dict[str, list[str]] = {}
    for blk in blocks:
        header = loop_of.get(blk.name)
        if header is None:
            out_lines[blk.name] = blk.lines
            continue
        names = loads.setdefault(header, {})

        def local(vtype: str, literal: str, names=names) -> str:
            key = (vtype, literal)
            if key not in names:
                if key not in pool:
                    pool[key] = f"@__swc.{len(pool)}"
                names[key] = f"%__swc.{counter[0]}"
                counter[0] += 1
            return names[key]

        out_lines[blk.name] = [_rewrite(line, local) if _candidate(line) else line for line in blk.lines]
    for header, names in loads.items():
        if not names:
            continue
        at = out_lines[idom[header]]
        text = [f"  {name} = load volatile {key[0]}, ptr {pool[key]}, align 16" for key, name in names.items()]
        end = max(i for i, line in enumerate(at) if _TERMINATOR.match(line))
        out_lines[idom[header]] = at[:end] + text + at[end:]
    result = [body[0]]
    for blk in blocks:
        result.extend(blk.head + out_lines[blk.name])
    result.append(body[-1])
    return result


class _Block:
    def __init__(self, name: str, head: list[str]):
        self.name, self.head, self.lines, self.succs = name, head, [], []


_TARGET = re.compile(r"label %([-\w.$]+|\"[^\"]*\")")
_TERMINATOR = re.compile(r"^\s+(br|switch|ret|unreachable|indirectbr|resume|invoke|callbr)\b")


def _blocks(body: list[str]) -> list[_Block]:
    """The basic blocks of a function's lines between ``define`` and ``}``: the entry block
    is "<entry>" unless labelled; a block's lines exclude its label."""
    blocks: list[_Block] = []
    for line in body[1:-1]:
        m = _LABEL.match(line)
        if m:
            blocks.append(_Block(m.group(0)[:-1], [line]))
        elif not blocks:
            blocks.append(_Block("<entry>", []))
            blocks[-1].lines.append(line)
        else:
            blocks[-1].lines.append(line)
    for blk in blocks:
        i = len(blk.lines) - 1
        while i >= 0 and not _TERMINATOR.match(blk.lines[i]):
            i -= 1
        blk.succs = [t for line in blk.lines[max(i, 0):] for t in _TARGET.findall(line)]
    return blocks


def _dominators(blocks: list[_Block]) -> dict[str, str]:
    """Each reachable block's immediate dominator (Cooper, Harvey and Kennedy's iteration)."""
    order: list[str] = []
    succs = {b.name: b.succs for b in blocks}
    seen: set[str] = set()
    stack = [(blocks[0].name, iter(succs[blocks[0].name]))]
    seen.add(blocks[0].name)
    while stack:
        node, it = stack[-1]
        nxt = next((s for s in it if s not in seen and s in succs), None)
        if nxt is None:
            order.append(node)
            stack.pop()
        else:
            seen.add(nxt)
            stack.append((nxt, iter(succs[nxt])))
    rpo = order[::-1]
    index = {n: i for i, n in enumerate(rpo)}
    preds: dict[str, list[str]] = {n: [] for n in rpo}
    for n in rpo:
        for s in succs[n]:
            if s in preds:
                preds[s].append(n)
    idom = {rpo[0]: rpo[0]}
    changed = True
    while changed:
        changed = False
        for n in rpo[1:]:
            done = [p for p in preds[n] if p in idom]
            new = done[0]
            for p in done[1:]:
                a, b = p, new
                while a != b:
                    while index[a] > index[b]:
                        a = idom[a]
                    while index[b] > index[a]:
                        b = idom[b]
                new = a
            if idom.get(n) != new:
                idom[n] = new
                changed = True
    return idom


def _innermost_loops(blocks: list[_Block], idom: dict[str, str]) -> dict[str, str]:
    """Each block inside a loop -> the header of the innermost loop holding it (``idom``:
    :func:`_dominators` of ``blocks``)."""
    preds: dict[str, list[str]] = {b.name: [] for b in blocks}
    for b in blocks:
        for s in b.succs:
            if s in preds:
                preds[s].append(b.name)

    def dominates(a: str, b: str) -> bool:
        while True:
            if a == b:
                return True
            if idom.get(b, b) == b:
                return False
            b = idom[b]

    loops: dict[str, set[str]] = {}
    for b in blocks:
        if b.name not in idom:
            continue
        for h in b.succs:
            if h in idom and dominates(h, b.name):  # a back edge b -> h
                body = loops.setdefault(h, {h})
                work = [b.name]
                while work:
                    n = work.pop()
                    if n not in body:
                        body.add(n)
                        work.extend(p for p in preds[n] if p in idom)
    inner: dict[str, str] = {}
    for h, body in sorted(loops.items(), key=lambda kv: -len(kv[1])):
        for n in body:
            inner[n] = h  # smaller loops come later and win
    return inner


def _candidate(line: str) -> bool:
    return "=" in line and not _KEEP.search(line) and ("splat (" in line or "<" in line)


def _rewrite(line: str, local) -> str:
    widths = {}
    for n, elem in _VTYPE.findall(line):
        widths.setdefault(elem, set()).add(int(n))

    def splat(m: re.Match) -> str:
        elem, value = m.group(1), m.group(2)
        ns = widths.get(elem, set())
        if len(ns) != 1 or value in ("0", "0.000000e+00", "poison", "undef", "zeroinitializer"):
            return m.group(0)
        n = next(iter(ns))
        if n * _BITS[elem] != 128:
            return m.group(0)
        name = local(f"<{n} x {elem}>", f"<{', '.join([f'{elem} {value}'] * n)}>")
        return name

    def literal(m: re.Match) -> str:
        items = m.group(1).split(", ")
        elems = {it.split(" ")[0] for it in items}
        if len(elems) != 1 or any(it.split(" ")[1] in ("poison", "undef") for it in items):
            return m.group(0)
        elem = elems.pop()
        if len(items) * _BITS[elem] != 128:
            return m.group(0)
        name = local(f"<{len(items)} x {elem}>", m.group(0))
        return name

    return _LITERAL.sub(literal, _SPLAT.sub(splat, line))
