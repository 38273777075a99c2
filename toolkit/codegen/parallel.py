"""Object emission on every core: LLVM's optimization and code generation are most of a
large model's compile time (bert2 natively: 2.8 of 3.6 s), and llvmlite runs one LLVM call at
a time per process, so the work is spread over forked processes.

A large module is split in parts, one per core, each a module LLVM optimizes and emits on its
own, and the linker joins the objects. The kernels are the unit: a kernel is called only
through the program's kernel table, so moving one to another part turns its definition there
into a hidden (not exported) symbol and leaves a declaration in part 0. What a moved kernel
refers to comes along: declarations (intrinsics, C kernels), internal helpers and read-only
tables are copied into its part as the part's own internal definitions.

The kernels that want O3's nontrivial loop unswitching (:func:`.kernel.unswitched`) go to
parts of their own, since it is a process-wide LLVM option (:data:`.target.UNSWITCHING`);
the others, and part 0, are optimized without it. A module holding both kinds is one part
more than the cores, so that neither kind is left to a single core. A module that stays whole
(too small, mutable internal state, one core, no fork) is optimized with unswitching if any
kernel in it wants it.

A model compiled to two variants (wasm32 baseline and relaxed SIMD) optimizes each part once
and emits it for both (:func:`.target.emit_variants`); a module too small to split emits
each variant in a process of its own.

A failed child changes nothing but the time: its job then runs in this process.
"""
from __future__ import annotations

import contextlib
import os
import re
import signal
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from llvmlite import ir

from .target import Target, emit_object, emit_variants

# instructions below which a module stays one part: a second part costs a fork, a second
# parse and the copied declarations, more than a small module's emission saves
SPLIT_MIN_INSTRUCTIONS = 3000
_NAME = re.compile(r'@("(?:[^"\\]|\\.)*"|[-\w.$]+)')
HIDDEN = "hidden"  # printed where a linkage goes: "define hidden ..." is external, not exported


def workers() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def instructions(fn: ir.Function) -> int:
    return sum(len(block.instructions) for block in fn.blocks)


def _referenced_functions(module: ir.Module) -> set[str]:
    """Names of the functions some function's code refers to (calls or pointers)."""
    out: set[str] = set()
    for fn in module.functions:
        for block in fn.blocks:
            for ins in block.instructions:
                for op in ins.operands:
                    if isinstance(op, ir.Function):
                        out.add(op.name)
    return out


def _mutable_internal(g) -> bool:
    """A global that a copy in another part would fork."""
    return isinstance(g, ir.GlobalVariable) and g.linkage == "internal" and not g.global_constant


@dataclass(frozen=True)
class Part:
    """Kernels moved to a module of their own, optimized with or without O3's nontrivial loop
    unswitching (:data:`.target.UNSWITCHING`)."""

    names: tuple[str, ...]
    unswitch: bool


def split(module: ir.Module, parts: int, unswitched: Collection[str] = ()) -> list[Part]:
    """The module's kernels for parts 1.. (part 0 keeps the rest, without unswitching): the
    internal functions no function refers to (the program reaches them through its kernel
    table), largest first into the lightest part of their kind, part 0 counting everything
    else. The ``unswitched`` kernels get parts of their own, as many of the ``parts`` as their
    share of the instructions (at least one, at most one per kernel), and the others one part
    more than are left, so a module of both kinds takes ``parts + 1`` jobs. Empty when the
    module is too small or holds mutable internal state."""
    if parts < 2 or any(_mutable_internal(g) for g in module.global_values):
        return []
    called = _referenced_functions(module)
    sizes = {fn.name: instructions(fn) for fn in module.functions if fn.blocks}
    total = sum(sizes.values())
    if total < SPLIT_MIN_INSTRUCTIONS:
        return []
    movable = sorted((n for n in sizes if n not in called and module.globals[n].linkage == "internal"),
                     key=lambda n: (-sizes[n], n))
    on_load = sum(sizes[n] for n in movable if n in unswitched)
    n_marked = sum(1 for n in movable if n in unswitched)
    n_on = max(1, min(parts, n_marked, round(parts * on_load / total))) if on_load else 0
    flags = [False] * (1 + (parts - n_on if n_on else parts - 1)) + [True] * n_on  # [0] is part 0
    load = [total - sum(sizes[n] for n in movable)] + [0] * (len(flags) - 1)
    bins: list[list[str]] = [[] for _ in flags]
    for name in movable:
        on = name in unswitched
        i = min((p for p in range(len(flags)) if flags[p] == on), key=lambda p: (load[p], p))
        bins[i].append(name)
        load[i] += sizes[name]
    return [Part(tuple(b), f) for b, f in zip(bins[1:], flags[1:]) if b]


def _header(module: ir.Module) -> list[str]:
    return [f'; ModuleID = "{module.name}"', f'target triple = "{module.triple}"',
            f'target datalayout = "{module.data_layout}"', ""] + \
           [t.get_declaration() for t in module.get_identified_types().values()]


class _relinked:
    """Print ``fns`` with another linkage (and, with ``body=False``, as declarations), then
    restore them."""

    def __init__(self, fns: Sequence[ir.Function], linkage: str, body: bool = True):
        self.fns, self.linkage, self.body = fns, linkage, body

    def __enter__(self):
        self.saved = [(f.linkage, f.blocks) for f in self.fns]
        for f in self.fns:
            f.linkage = self.linkage
            if not self.body:
                f.blocks = []

    def __exit__(self, *exc):
        for f, (linkage, blocks) in zip(self.fns, self.saved):
            f.linkage, f.blocks = linkage, blocks


def main_text(module: ir.Module, moved: Sequence[str]) -> str:
    """The module with the ``moved`` kernels as hidden declarations."""
    with _relinked([module.globals[n] for n in moved], HIDDEN, body=False):
        return str(module)


def part_text(module: ir.Module, names: Sequence[str]) -> str:
    """A module of the kernels ``names`` (hidden definitions) and what they refer to."""
    own = [module.globals[n] for n in names]
    with _relinked(own, HIDDEN):
        body = [str(f) for f in own]
    done = set(names)
    todo = [m for text in body for m in _NAME.findall(text)]
    extra: list[str] = []
    while todo:
        name = todo.pop()
        name = name[1:-1] if name.startswith('"') else name
        if name in done or name not in module.globals:
            continue
        done.add(name)
        g = module.globals[name]
        if _mutable_internal(g):
            raise AssertionError(f"kernel part refers to mutable internal global @{name}")  # split() excludes
        text = str(g)
        extra.append(text)
        if isinstance(g, ir.GlobalVariable) or g.blocks:
            todo.extend(_NAME.findall(text))
    return "\n".join(_header(module) + extra + body + module._get_metadata_lines())


def run_forked(jobs: Sequence[Callable[[], bytes]]) -> list[bytes]:
    """Each job's bytes: the first job here, the others in forked children at once. A job
    whose child fails, or could not be forked, runs here afterwards (and raises here if it
    is broken: a child reports nothing itself). Children ignore Ctrl-C, which this process
    handles, and do not outlive it."""
    children = []
    try:
        for job in jobs[1:]:
            r, w = os.pipe()
            try:
                pid = os.fork() if hasattr(os, "fork") else -1
            except OSError:  # no process to spare (EAGAIN, ENOMEM): the job runs here
                pid = -1
            if pid == 0:  # the child: one job, its bytes down the pipe, then out without cleanup
                code = 1
                try:
                    signal.signal(signal.SIGINT, signal.SIG_IGN)
                    os.close(r)
                    data = job()
                    with os.fdopen(w, "wb") as f:
                        f.write(data)
                    code = 0
                finally:
                    os._exit(code)
            os.close(w)
            children.append([pid, r])
        results = [jobs[0]()]
        for job, child in zip(jobs[1:], children):
            pid, r = child
            data, ok = b"", False
            with os.fdopen(r, "rb") as f:
                child[1] = None
                if pid > 0:
                    data = f.read()
            if pid > 0:
                _, status = os.waitpid(pid, 0)
                child[0] = -1
                ok = os.waitstatus_to_exitcode(status) == 0
            results.append(data if ok else job())
        return results
    finally:  # after an error or Ctrl-C here: no child left running, no pipe left open
        for pid, r in children:
            if r is not None:
                os.close(r)
            if pid > 0:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)


def _joined(objects: Sequence[bytes]) -> bytes:
    """Several objects as one job's bytes: each after its 8-byte little-endian length."""
    return b"".join(len(o).to_bytes(8, "little") + o for o in objects)


def _parted(data: bytes) -> list[bytes]:
    out, at = [], 0
    while at < len(data):
        n = int.from_bytes(data[at:at + 8], "little")
        out.append(data[at + 8:at + 8 + n])
        at += 8 + n
    return out


def emit_objects(module: ir.Module, targets: Sequence[Target],
                 unswitched: Collection[str] = ()) -> dict[Target, list[bytes]]:
    """The object files of ``module`` for each target (linked together, they are the module's
    kernels and program), emitted on up to :func:`workers` cores. Several targets are the
    wasm32 variants, which share one optimization (:func:`.target.emit_variants`, optimized
    for the last): a module large enough to split is split in parts, and each part is
    optimized once and emitted for every variant on a core of its own (bert2's two variants:
    codegen 1.04-1.06 -> 0.77-0.92 s on two cores, where a core per variant optimized the
    whole module twice); a smaller one emits each variant on a core of its own.
    ``unswitched``: the kernels (:func:`.kernel.unswitched`) optimized with O3's nontrivial
    loop unswitching, in parts of their own; a module that stays whole has it if it holds one."""
    whole_on = any(fn.name in unswitched for fn in module.functions if fn.blocks)
    cores = workers()
    if cores < 2 or not hasattr(os, "fork"):
        return dict(zip(targets, ([o] for o in emit_variants(module, targets, unswitch=whole_on))))
    parts = split(module, cores, unswitched)
    if not parts:
        if len(targets) == 1:
            return {targets[0]: [emit_object(module, targets[0], unswitch=whole_on)]}
        return dict(zip(targets, ([o] for o in run_forked(
            [lambda t=t: emit_object(module, t, unswitch=whole_on) for t in targets]))))
    moved = [n for p in parts for n in p.names]
    jobs = [lambda: _joined(emit_variants(main_text(module, moved), targets, unswitch=False))] + \
           [lambda p=p: _joined(emit_variants(part_text(module, p.names), targets, unswitch=p.unswitch))
            for p in parts]
    per_job = [_parted(data) for data in run_forked(jobs)]
    return {t: [objs[i] for objs in per_job] for i, t in enumerate(targets)}
