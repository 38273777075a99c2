"""The text of a module's dynamic report (``toolkit.passes.dynamic.report``, kept in its
metadata): shared by ``--static``'s error and ``symwasm inspect``, which runs where only the
runtime is installed, so this imports nothing of the compiler."""
from __future__ import annotations


def _paren(expr: str) -> str:
    """A dim's text in parentheses, without doubling those it prints itself: ``(n or 10)``."""
    depth = 0
    for i, c in enumerate(expr):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth == 0 and i < len(expr) - 1:
            return f"({expr})"
    return expr if expr.startswith("(") and expr.endswith(")") else f"({expr})"


def describe(entry: dict, symbols: dict) -> str:
    """One dynamic dim of the report as text: the value, its producer, and each of its
    symbols' cause (``symbols`` is the report's)."""
    name, axis = entry["value"], entry["dim"]
    dim = _paren(entry["expr"])
    if len(entry["symbols"]) == 1 and entry["expr"] == entry["symbols"][0]:
        s = symbols[entry["expr"]]
        if entry["node"] is None and s["input"] == [name, axis]:
            # the input dim that is the symbol: say what the symbol is
            return f"input '{name}' dim {axis} {dim} is " + s["why"].removeprefix(f"input '{name}' dim {axis}, ")
    parts = []
    for sym in entry["symbols"]:
        s = symbols[sym]
        exact = s["kind"] == "input" and entry["expr"] == sym
        parts.append(("is " if exact else "depends on ") + s["why"])
    head = f"node '{entry['node']}' ({entry['op']}): " if entry["node"] is not None else ""
    return f"{head}value '{name}' dim {axis} {dim} " + "; and ".join(parts)
