"""The kernel table: one LLVM function per distinct kernel key.

A kernel's key is derived, never written by hand: the build function, its parameters (a
hashable value, usually the core op itself or a plan it made) and the dtype and shape of
every tensor argument, with symbols renamed canonically in order of first appearance
(:func:`canonical`). So Add over ``(n, 10)`` and over ``(m, 10)`` share one kernel, and a
parameter left out of the key cannot exist: the build function receives exactly the
canonical parameters and types the key holds, nothing else.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from llvmlite import ir

from ..abi import DIM_UNCHECKED
from ..codegen.kernel import KernelBuilder
from ..codegen.target import Target
from ..ir import dims as D
from ..ir.dtypes import DType
from .ir import KernelRef, Program

# (dtype, shape) of one tensor argument, as a kernel sees it
TensorType = tuple[DType, tuple[D.Dim, ...]]
BuildFn = Callable[[KernelBuilder, Any, Sequence[TensorType]], None]


def canonical(obj: Any) -> Any:
    """``obj`` with every symbol renamed ``_0``, ``_1``, ... in order of first appearance
    (ranges and kinds kept). Walks tuples, lists (made tuples), frozen dataclasses and dims;
    other values are kept as they are."""
    mapping: dict[D.Sym, D.Expr] = {}
    memo: dict = {}  # one renaming for the whole walk, so rebuilt subexpressions are shared

    def rename(s: D.Sym) -> D.Expr:
        if s not in mapping:
            mapping[s] = D.atom_expr(D.Sym(f"_{len(mapping)}", s.kind, s.lo, s.hi))
        return mapping[s]

    def walk(x: Any) -> Any:
        if isinstance(x, D.Expr):
            # visit symbols in a fixed order first, so renaming does not depend on names
            for s in _ordered_symbols(x):
                rename(s)
            return D.substitute(x, rename, memo)
        if isinstance(x, (tuple, list)):
            return tuple(walk(y) for y in x)
        if dataclasses.is_dataclass(x) and not isinstance(x, type) and not isinstance(x, DType):
            return dataclasses.replace(x, **{f.name: walk(getattr(x, f.name)) for f in dataclasses.fields(x)
                                             if f.init})
        return x

    return walk(obj)


def signature(types_c: Sequence[TensorType]) -> tuple[int, ...]:
    """What the VM checks of a kernel's tensors before each call (the ``kernel_sigs`` table of
    the ABI): per tensor its dtype code and rank, then each dim as its static size, ``-1 - k``
    for the canonical symbol ``_k``, or DIM_UNCHECKED for an expression of symbols."""
    out: list[int] = []
    for dt, shape in types_c:
        out += [dt.code, len(shape)]
        for d in shape:
            atom = d.atom() if isinstance(d, D.Expr) else None
            if isinstance(d, int):
                out.append(d if d < 2 ** 31 else DIM_UNCHECKED)
            elif isinstance(atom, D.Sym) and atom.name.startswith("_"):
                out.append(-1 - int(atom.name[1:]))
            else:
                out.append(DIM_UNCHECKED)
    return tuple(out)


def _ordered_symbols(d: D.Expr) -> list[D.Sym]:
    """The symbols of ``d`` in its canonical term order (atoms sorted by text)."""
    out: list[D.Sym] = []
    seen: set[int] = set()

    def visit(x) -> None:
        if isinstance(x, int) or id(x) in seen:
            return
        seen.add(id(x))
        if isinstance(x, D.Sym):
            if x not in out:
                out.append(x)
        elif isinstance(x, D.Atom):
            for a in D.atom_op(D.atom_expr(x))[1]:
                visit(a)
        else:
            for mono, _ in x.terms:
                for a in mono:
                    visit(a)

    visit(d)
    return out


class KernelTable:
    """Builds each distinct kernel once into the model's LLVM module."""

    def __init__(self, module: ir.Module, target: Target, prog: Program):
        self.module, self.target, self.prog = module, target, prog
        self._by_key: dict[tuple, KernelRef] = {}

    def get(self, build: BuildFn, params: Any, types: Sequence[TensorType], nscalars: int,
            noutputs: int) -> KernelRef:
        """The kernel for these tensor types (inputs, then the ``noutputs`` it writes)."""
        params_c, types_c = canonical((params, tuple((dt, tuple(shape)) for dt, shape in types)))
        key = (build.__module__, build.__qualname__, params_c, types_c, nscalars, noutputs)
        ref = self._by_key.get(key)
        if ref is None:
            # readable in inspect: k3_greater_float32, k4_conv2d_float32
            stem = getattr(params, "kernel_name", None) or build.__name__.removeprefix("build_")
            dtype = f"_{types[0][0].name}" if types else ""
            name = "".join(c if c.isalnum() else "_" for c in f"k{len(self.prog.kernels)}_{stem}{dtype}")
            kb = KernelBuilder(self.module, name, self.target)
            if noutputs and not getattr(build, "writes_scalars", False):
                kb.return_if_no_outputs(len(types_c) - noutputs, types_c[len(types_c) - noutputs:],
                                        types_c[:len(types_c) - noutputs])
            build(kb, params_c, types_c)
            kb.finish()
            ref = KernelRef(len(self.prog.kernels), name, len(types), nscalars, noutputs, signature(types_c),
                            getattr(build, "unswitch_loops", False), kb.parted)
            self.prog.kernels.append(ref)
            self._by_key[key] = ref
        return ref
