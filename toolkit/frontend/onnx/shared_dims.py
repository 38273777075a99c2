"""A ``dim_param`` that several graph inputs name: one dim, or one per input?

onnxruntime reads a dim's name as a label only: two inputs that both say ``N`` may be fed
different sizes. Exporters reuse names freely (``batch`` on a CLIP model's texts and images,
``N`` on two unrelated features), so symwasm cannot take a shared name as a promise. Nor can it
give up the promise everywhere: ``input_ids`` and ``attention_mask`` both ``(batch, seq)`` meet
in a broadcasting Add, where proving the dims equal is what lets the compiler pick the plain
elementwise kernel, and a user who feeds them different sizes has a bug worth a clear error.

So the importer asks the graph. It imports the model once with each input's copy of a shared
name as a dim of its own (``N`` for the first input that names it, ``N@y`` for input ``y``).
Copies that meet in one dim expression or one run-time check (a broadcast, an equality a MatMul
or a Concat requires) are one dim after all; the model is imported again with those merged,
until nothing more meets. Copies that never meet stay apart, as onnxruntime reads them: a
CLIP model's image batch and text batch only meet as the two dims of the similarity matrix,
never in one expression. One dim per name, which is what every name meant before, is kept
where the copies apart would cost the compiler what it knows (:func:`opaque_dims`) or where
the trial import fails."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import onnx

from ...abi import SHARED_DIM_MARK
from ...ir import dims as D
from ...ir.graph import Graph


@dataclass
class Split:
    """For each shared name, the inputs that name it, in groups that share one dim: the
    first group keeps the name, each other group's dim is ``name@<its first input>``."""

    groups: dict[str, list[list[str]]] = field(default_factory=dict)

    def symbol(self, name: str, inp: str) -> str:
        """The symbol an input's dim called ``name`` stands for."""
        for k, group in enumerate(self.groups.get(name, ())):
            if inp in group:
                return name if k == 0 else f"{name}{SHARED_DIM_MARK}{group[0]}"
        return name

    def copies(self) -> dict[str, str]:
        """Every symbol of a split name, to that name."""
        return {self.symbol(name, g[0]): name for name, groups in self.groups.items() for g in groups}

    def active(self) -> bool:
        return any(len(g) > 1 for g in self.groups.values())


def shared_names(g: onnx.GraphProto, binds: Mapping[str, int], anonymous: frozenset[str],
                 weights: set[str]) -> Split:
    """The names of dims that two or more of the graph's inputs give (each input its own
    group): not a bound name, not an anonymous one, not an initializer listed as an input."""
    users: dict[str, list[str]] = {}
    for inp in g.input:
        if inp.name in weights or inp.type.WhichOneof("value") != "tensor_type":
            continue
        for d in inp.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param not in anonymous and d.dim_param not in binds:
                group = users.setdefault(d.dim_param, [])
                if inp.name not in group:
                    group.append(inp.name)
    return Split({name: [[i] for i in ins] for name, ins in users.items() if len(ins) > 1})


def merge_met(graph: Graph, split: Split) -> bool:
    """Merges the groups whose dims meet in ``graph`` (imported with ``split``): in one dim
    expression of a value's shape or shape contents, or in one run-time check. True if any did."""
    copies = split.copies()
    found: list[set[str]] = []

    def scan(*dims) -> None:
        syms = {s.name for d in dims for s in D.free_symbols(d) if s.name in copies}
        if len(syms) > 1:
            found.append(syms)

    for v in graph.values.values():
        for d in v.shape + (v.sym or ()):
            scan(d)
    for node in graph.all_nodes():
        for c in node.checks:
            scan(c.a, c.b)
    # a symbol stands for the first input of its group as imported: merging renames groups,
    # so later sets find their groups by that input, not by the symbol the group has now
    first_input = {split.symbol(name, g[0]): g[0] for name, groups in split.groups.items() for g in groups}
    merged = False
    for syms in found:
        for name in {copies[s] for s in syms}:
            ours = {first_input[s] for s in syms if copies[s] == name}
            groups = split.groups[name]
            joined = [g for g in groups if ours & set(g)]
            if len(joined) < 2:
                continue
            first = groups.index(joined[0])
            groups[first] = [i for g in joined for i in g]
            for g in joined[1:]:
                groups.remove(g)
            merged = True
    return merged


def opaque_dims(graph: Graph) -> int:
    """How many dims of the graph's values the compiler knows only at run time beyond the
    inputs' own: a dim computed from data, or a broadcast it could not decide. Copies kept
    apart are worth it only where they cost none of these (the attention mask of a
    transformers 5 export, indexed by batch row, would turn its Expand's shape into data)."""
    return sum(1 for v in graph.values.values() for d in v.shape
               if any(isinstance(a, D.Sym) and a.kind == "data" or getattr(a, "op", None) == "bcast"
                      for a in D.atoms(d)))


def notes(split: Split) -> list[str]:
    """What ``inspect`` says about each name kept apart."""
    out = []
    for name, groups in split.groups.items():
        if len(groups) > 1:
            apart = "; ".join(f"{', '.join(repr(i) for i in g)}: {split.symbol(name, g[0])}" for g in groups)
            out.append(f"dim '{name}' is named by several inputs whose dims never meet in an op: each may be "
                       f"fed its own size, as onnxruntime reads it ({apart})")
    return out
