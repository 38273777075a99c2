"""ONNX node -> core ops: the registry of translations and what a translation sees.

This is the only place that knows ONNX op versions. For a model of opset N, a node's op
has one *version in effect* (the newest schema version not above N, from onnx.defs); each
translation is registered for the exact versions whose meaning it implements, so a version
it was never checked against fails naming the op and version instead of being read as an
older one. A translation reads attributes (with the schema's defaults) and constant inputs
once, and emits core ops (:mod:`toolkit.ops`) with those parameters decoded.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NoReturn, Sequence

import numpy as np
import onnx

from ...ir.dtypes import DTYPE_BY_CODE, DType, dtype_of_numpy
from ...ir.graph import CompileError, Graph, Node, Region, Value
from ...ops.base import CoreOp, promote_sym, run_infer

Translation = Callable[["TranslateContext"], None]


@dataclass(frozen=True)
class Entry:
    op_type: str
    versions: tuple[int, ...]
    translate: Translation
    # outputs are computed at compile time with onnx.reference when all inputs are constant
    foldable: bool = True


class Registry:
    """Translations by (domain, op type): the default domain's, those of the
    ``com.microsoft`` ops that onnxruntime's tools write into shipped models (:data:`CONTRIB`),
    and those of the classical machine-learning domain (:data:`ML`)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], list[Entry]] = {}

    def add(self, op_type: str, versions: Sequence[int], translate: Translation, foldable: bool = True,
            domain: str = "") -> None:
        self._entries.setdefault((domain, op_type), []).append(Entry(op_type, tuple(versions), translate, foldable))

    def lookup(self, op_type: str, version: int, domain: str = "") -> Entry | None:
        return next((e for e in self._entries.get((domain, op_type), ()) if version in e.versions), None)

    def versions(self, op_type: str, domain: str = "") -> list[int]:
        return sorted(v for e in self._entries.get((domain, op_type), ()) for v in e.versions)

    def ops(self, domain: str = "") -> list[str]:
        return sorted(op for d, op in self._entries if d == domain)


# onnxruntime's contrib domain: its quantizer and transformer optimizer write these ops into
# models; onnx has no schemas for them, so their translations give their own attribute defaults
CONTRIB = "com.microsoft"
# ops onnxruntime defines in the default domain where onnx has no schema for them (its
# transformer optimizer writes SimplifiedLayerNormalization there, and LayerNormalization
# into models of opsets below 17, where onnx has none yet): read as contrib ops. Of the
# other ops onnxruntime defines there below onnx's versions, none is written by its tools
# (onnx's old experimental ops: Affine, Crop, Scale, ImageScaler...)
ORT_DEFAULT_DOMAIN = frozenset({"SimplifiedLayerNormalization", "LayerNormalization"})
# onnx's classical machine-learning domain (skl2onnx's and onnxmltools' linear models,
# scalers, trees): onnx has schemas for its ops, at the domain's own versions (1 to 5)
ML = "ai.onnx.ml"


_REGISTRY: Registry | None = None


def registry() -> Registry:
    global _REGISTRY
    if _REGISTRY is None:
        from .ops import (constant, contrib_nn, contrib_quant, control, conv, data_dependent, elementwise, indexing,
                          layout, misc, ml, nn, quant, random, reduce, rnn, select, sequence, shape, signal, tensor,
                          text)

        r = Registry()
        for family in (constant, control, elementwise, shape, tensor, indexing, reduce, nn, conv, data_dependent,
                       select, layout, rnn, quant, misc, signal, random, sequence, text, contrib_nn, contrib_quant, ml):
            family.register(r)
        _REGISTRY = r
    return _REGISTRY


def ident(name: str) -> str:
    """``name`` as an identifier for a generated symbol (``x_dim0``, ``y_dim1``)."""
    return "".join(c if c.isalnum() else "_" for c in name) or "v"


def version_in_effect(op_type: str, opset: int) -> int | None:
    """The since-version of the schema an opset-``opset`` model uses for ``op_type``."""
    try:
        return onnx.defs.get_schema(op_type, opset, "").since_version
    except (onnx.defs.SchemaError, TypeError):  # TypeError: an op type that is not text
        return None


class TranslateContext:
    """One ONNX node while its translation runs."""

    def __init__(self, graph: Graph, proto: onnx.NodeProto, name: str, version: int, attrs: dict[str, Any],
                 import_region: Callable[..., Region]):
        # the importer's import_region, handed down: a translation that imports a subgraph
        # (If, Loop, SequenceMap) calls back into the importer, which imports the translations
        self._import_region = import_region
        self.graph = graph
        self.proto = proto
        self.name = name
        self.op_type = proto.op_type
        self.version = version
        self.attrs = attrs
        self.inputs = list(proto.input)
        self.outputs = list(proto.output)
        self.nodes: list[Node] = []

    def label(self) -> str:
        return f"node '{self.name}' ({self.op_type})"

    def import_region(self, gp: onnx.GraphProto, bound: list[Value], label: str | None = None) -> Region:
        """Import the subgraph ``gp`` (an If branch, a Loop body) into the graph as a region,
        its inputs bound to ``bound`` (:func:`.importer.import_region`); errors inside it are
        labelled ``label`` (default: this node)."""
        return self._import_region(self.graph, gp, bound, label or self.label())

    def fail(self, reason: str) -> NoReturn:
        raise CompileError(f"{self.label()}: {reason}")

    # attributes and inputs -------------------------------------------------
    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def ints(self, name: str, default: Sequence[int] | None = None) -> tuple[int, ...] | None:
        v = self.attrs.get(name)
        return tuple(int(x) for x in v) if v is not None else (tuple(default) if default is not None else None)

    def has(self, i: int) -> bool:
        return i < len(self.inputs) and bool(self.inputs[i])

    def value(self, i: int) -> Value | None:
        return self.graph.values[self.inputs[i]] if self.has(i) else None

    def const_ints(self, i: int, what: str) -> tuple[int, ...] | None:
        """The elements of input ``i``, which must be known at compile time (None if absent)."""
        v = self.value(i)
        if v is None:
            return None
        vals = v.int_contents()
        if vals is None or not all(isinstance(x, int) for x in vals):
            self.fail(f"{what} (input '{v.name}') must be a constant")
        return tuple(int(x) for x in vals)

    def dtype(self, code: int, what: str) -> DType:
        dt = DTYPE_BY_CODE.get(int(code))
        if dt is None:
            name = onnx.TensorProto.DataType.Name(code) if code in onnx.TensorProto.DataType.values() else code
            self.fail(f"{what} {name} is not supported (supported: {', '.join(d.name for d in DTYPE_BY_CODE.values())})")
        return dt

    # emitting ---------------------------------------------------------------
    def emit(self, op: CoreOp, inputs: Sequence[str] | None = None, outputs: Sequence[str] | None = None) -> Node:
        """A core node (the node's own inputs and outputs unless given), inferred now so the
        next one can read its outputs."""
        node = Node(op, self.name, self.op_type, list(self.inputs if inputs is None else inputs),
                    list(self.outputs if outputs is None else outputs))
        self.graph.nodes.append(node)
        self.nodes.append(node)
        run_infer(self.graph, node)
        return node

    def tmp(self, what: str) -> str:
        """A name for a value between the core nodes of this one node."""
        return self.graph.fresh_name(f"{self.outputs[0] or self.name}/{what}")

    def constant(self, what: str, array: np.ndarray) -> str:
        """A new constant value (an attribute of an old op version that later versions take
        as an input); returns its name."""
        arr = np.asarray(array)
        try:
            dt = dtype_of_numpy(arr.dtype)
        except KeyError:
            self.fail(f"{what} has dtype {arr.dtype}, which is not supported")
        name = self.tmp(what)
        v = Value(name, dt, tuple(arr.shape), const=arr)
        v.sym = promote_sym(v)
        self.graph.add_value(v)
        return name
