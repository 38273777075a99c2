"""Evaluate the dim formulas a module's metadata carries (the memory plan's arena size), as
the compiler wrote them (toolkit.program.memory.dim_json): an int, ``["sym", name]``,
``["poly", [[coef, [atom, ...]], ...]]``, or ``[op, args...]`` for floordiv, mod, div,
min, max, bcast and ifzero. Python ints: no overflow."""
from __future__ import annotations

from typing import Mapping


def evaluate(f, bindings: Mapping[str, int]) -> int:
    """The value of formula ``f`` for these symbol values; KeyError names a missing symbol."""
    if isinstance(f, int):
        return f
    op, *args = f
    if op == "sym":
        return int(bindings[args[0]])
    if op == "poly":
        total = 0
        for coef, atoms in args[0]:
            term = coef
            for a in atoms:
                term *= evaluate(a, bindings)
            total += term
        return total
    vals = [evaluate(a, bindings) for a in args]
    if op == "floordiv":
        return vals[0] // vals[1]
    if op == "mod":
        return vals[0] % vals[1]
    if op == "div":
        return vals[0] // vals[1]
    if op == "min":
        return min(vals)
    if op == "max":
        return max(vals)
    if op == "bcast":
        return vals[1] if vals[0] == 1 else vals[0]
    if op == "ifzero":
        return vals[0] if vals[0] != 0 else vals[1]
    raise ValueError(f"unknown formula operation '{op}'")


def symbols(f) -> set[str]:
    """The symbols formula ``f`` reads."""
    if isinstance(f, int):
        return set()
    op, *args = f
    if op == "sym":
        return {args[0]}
    if op == "poly":
        return set().union(*[symbols(a) for _, atoms in args[0] for a in atoms])
    return set().union(*[symbols(a) for a in args])
