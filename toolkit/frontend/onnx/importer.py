"""ONNX -> graph of core ops: symbols from dim_param, fresh symbols for unknown dims,
constants from initializers, then each node translated (:mod:`.translate`) into core ops
whose shape functions run at once, folding all-constant nodes with onnx.reference.

Models of opset 7 and newer import as they are: each op's version in effect picks its
translation, which reads that version's attributes (an opset 9 Softmax flattens to 2-D
first; an opset 10 Slice takes its bounds as attributes)."""
from __future__ import annotations

import os
from contextvars import ContextVar
from typing import Collection, Mapping

import numpy as np
import onnx
import onnx.version_converter
from onnx import numpy_helper

from ...ir import dims as D
from ...ir.dtypes import DTYPE_BY_CODE, DTYPES
from ...ir.graph import FOLD_LIMIT, WEIGHT_INPUTS, CompileError, Graph, Region, Value
from ...ops.base import promote_sym
from ...vm.isa import ARENA_LIMIT
from . import shared_dims
from .names import text_names
from .subgraphs import bound_node, rename_clashes, rename_in
from .ops import sequence
from .ops.ml import REFUSED as ML_REFUSED
from .translate import CONTRIB, ML, ORT_DEFAULT_DOMAIN, Entry, TranslateContext, ident, registry, version_in_effect

PREVIEW = "ai.onnx.preview"
MIN_OPSET = 7
MAX_OPSET = onnx.defs.onnx_opset_version()
# the newest version of the ai.onnx.ml domain the onnx package knows (its schemas go with it)
MAX_ML_OPSET = max(s.since_version for s in onnx.defs.get_all_schemas_with_history() if s.domain == ML)
# a weight computed from constants (a ConstantOfShape, a Reshape or Cast of an initializer:
# ir.graph.WEIGHT_INPUTS) folds whatever its size, as onnxruntime folds it when a session
# starts: left to run time it would be recomputed and packed again on every run, through the
# slower kernels of run-time weights (light_resnet50's 11M filled weights: 10% of its native
# time); but not past the bytes a module's static arena can address (vm.isa.ARENA_LIMIT): a hostile
# ConstantOfShape would otherwise be evaluated at compile time in whatever memory it asks for;
# left to run time, the arena's planning refuses it by name
# why an optional or a sequence cannot cross the module's boundary
NOT_AT_BOUNDARY = ("sequences and optionals are not supported as a model's inputs or outputs: symwasm's VM carries "
                   "tensors only, and each element of a sequence has its own shape (inside a model they are "
                   "supported where their structure is known at compile time)")
# dim_params that exporters write for "unknown", not as a name: TensorFlow's "?" and
# "None", "-1" as text. Each occurrence is its own unknown dim (a fresh symbol), as
# onnxruntime reads them, never one shared dim: paddle2onnx writes "?" for an image's height
# and width alike
ANONYMOUS_DIMS = frozenset({"", "?", "None", "-1"})
# the model's opset imports of the other domains, by domain, while it is imported: subgraphs
# are imported from translations (If, Loop) that see only the graph
_DOMAIN_OPSETS: ContextVar[dict[str, int]] = ContextVar("domain_opsets", default={})
# the model's own functions (model.functions), by (domain, name, overload), while it is
# imported: a node that names one is expanded from it, in any graph, function or subgraph
_LOCAL_FUNCTIONS: ContextVar[dict[tuple[str, str, str], onnx.FunctionProto]] = ContextVar("local_functions",
                                                                                          default={})
# the model's functions being expanded, outermost first: a function that calls itself is refused
_EXPANDING: ContextVar[tuple[str, ...]] = ContextVar("expanding", default=())
# the names the main graph's nodes read as weights (WEIGHT_INPUTS), while it is imported
_WEIGHTS: ContextVar[frozenset[str]] = ContextVar("weights", default=frozenset())


def load_onnx(model: "str | os.PathLike | bytes | onnx.ModelProto") -> onnx.ModelProto:
    """The model, its names all text (see :mod:`.names`)."""
    if isinstance(model, onnx.ModelProto):
        return text_names(model)
    try:
        if isinstance(model, (bytes, bytearray)):
            return text_names(onnx.load_from_string(bytes(model)))
        return text_names(onnx.load(os.fspath(model)))
    except FileNotFoundError:
        raise CompileError(f"model file not found: {model}") from None
    except Exception as e:  # protobuf raises several types for a corrupt file
        raise CompileError(f"malformed ONNX file {model}: cannot parse it ({e})") from None


def _dtype(code: int, what: str):
    dt = DTYPE_BY_CODE.get(code)
    if dt is None:
        name = onnx.TensorProto.DataType.Name(code) if code in onnx.TensorProto.DataType.values() else code
        raise CompileError(f"{what} has dtype {name}, which is not supported "
                           f"(supported: {', '.join(DTYPES)})")
    return dt


def _type_name(t: int) -> str:
    return onnx.AttributeProto.AttributeType.Name(t) if t in onnx.AttributeProto.AttributeType.values() else str(t)


def _attr_value(a: onnx.AttributeProto):
    v = onnx.helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    if isinstance(v, list):
        return [x.decode() if isinstance(x, bytes) else x for x in v]
    return v


def _attrs_with_defaults(node: onnx.NodeProto, opset: int, label: str) -> dict:
    """The node's attributes, each checked against the op's schema (name and type), with the
    schema's defaults for those not given."""
    schema = onnx.defs.get_schema(node.op_type, opset, node.domain or "")  # the caller checked it exists
    attrs = {}
    for a in node.attribute:
        spec = schema.attributes.get(a.name)
        if spec is None:
            raise CompileError(f"{label}: '{a.name}' is not an attribute of {node.op_type}-{schema.since_version} "
                               f"(it has: {', '.join(sorted(schema.attributes)) or 'none'})")
        if a.type != spec.type:
            raise CompileError(f"{label}: attribute '{a.name}' is {_type_name(a.type)}; {node.op_type} takes "
                               f"{_type_name(spec.type)}")
        try:
            attrs[a.name] = _attr_value(a)
        except Exception as e:  # noqa: BLE001 - a corrupt tensor or graph attribute in any form
            raise CompileError(f"{label}: attribute '{a.name}' cannot be read ({e})") from None
    for name, spec in schema.attributes.items():
        if name not in attrs and spec.required:
            raise CompileError(f"{label}: attribute '{name}' is required")
        if name not in attrs and spec.default_value.type != onnx.AttributeProto.UNDEFINED:
            attrs[name] = _attr_value(spec.default_value)
    return attrs


def _check_arity(node: onnx.NodeProto, opset: int, label: str) -> None:
    """The node gives every input and output the op's schema requires, and no more than it
    takes."""
    schema = onnx.defs.get_schema(node.op_type, opset, node.domain or "")
    single = onnx.defs.OpSchema.FormalParameterOption.Single
    for what, given, formal, most in (("input", node.input, schema.inputs, schema.max_input),
                                      ("output", node.output, schema.outputs, schema.max_output)):
        for k, f in enumerate(formal):
            if f.option == single and (k >= len(given) or not given[k]):
                raise CompileError(f"{label}: {what} {k} ({f.name}) is required")
        if len(given) > most:
            raise CompileError(f"{label}: {len(given)} {what}s given; {node.op_type} takes at most {most}")


def import_model(model, binds: Mapping[str, int] | None = None,
                 ranges: Mapping[str, tuple[int | None, int | None]] | None = None,
                 check_facts: bool = False, overridable: Collection[str] = ()) -> Graph:
    """Build the graph IR of an ONNX model. ``binds`` fixes named symbols to values;
    ``ranges`` gives symbols bounds (``lo``, ``hi``; None for the default), which the
    module checks at run time and the compiler uses to simplify. ``check_facts``: see
    :attr:`Graph.check_facts`. ``overridable``: initializers the model also lists as inputs
    that stay inputs, their values the default a run may override (``all``: every one); the
    others are compiled as the constants they hold. A dim name that several inputs give is
    one dim where their copies meet in an op, and one per input where they never do
    (:mod:`.shared_dims`)."""
    proto = load_onnx(model)
    binds = dict(binds or {})
    split = shared_dims.shared_names(proto.graph, binds, ANONYMOUS_DIMS, {i.name for i in proto.graph.initializer})
    trial = None
    while split.active():
        try:
            trial = _import_graph(proto, binds, ranges, check_facts, split, overridable)
        except CompileError:  # an op that needs the copies equal to compile
            trial = None
            break
        if not shared_dims.merge_met(trial, split):
            break
        trial = None
    graph = _import_graph(proto, binds, ranges, check_facts, shared_dims.Split(), overridable)
    if trial is not None and shared_dims.opaque_dims(trial) <= shared_dims.opaque_dims(graph):
        trial.notes.extend(shared_dims.notes(split))
        return trial
    return graph


def _import_graph(proto: onnx.ModelProto, binds: dict[str, int],
                  ranges: Mapping[str, tuple[int | None, int | None]] | None, check_facts: bool,
                  split: shared_dims.Split, overridable: Collection[str] = ()) -> Graph:
    ranges = dict(ranges or {})
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None and any(o.domain == ML for o in proto.opset_import):
        # a model of ml ops alone (one LinearRegressor) may import no default opset: their
        # translations emit core ops, which no default opset version changes
        opset = MAX_OPSET
    if opset is None:
        raise CompileError("malformed ONNX model: it imports no version of the default opset")
    converted_from = None
    if opset < MIN_OPSET:
        proto, converted_from, opset = _upgrade(proto, opset), opset, MIN_OPSET
    if opset > MAX_OPSET:
        raise CompileError(f"opset {opset} is newer than the onnx package knows ({MAX_OPSET}); "
                           f"upgrade onnx, or export the model for opset {MAX_OPSET} or older")
    g = proto.graph
    graph = Graph(name=g.name or "model", opset=opset, scope=D.SymbolScope(), check_facts=check_facts)

    for init in g.initializer:
        try:
            arr = numpy_helper.to_array(init)
        except Exception as e:
            raise CompileError(f"malformed ONNX model: initializer '{init.name}' cannot be read ({e})") from None
        dt = _dtype(init.data_type, f"initializer '{init.name}'")
        graph.add_value(Value(init.name, dt, tuple(arr.shape), const=arr.astype(dt.np),
                              sym=promote_sym(Value(init.name, dt, (), const=arr))))

    unused_binds = set(binds)
    # the model's own dim names first, so no generated name (x_dim0_0) can take one of them
    ranged = set()
    for inp in g.input:
        for d in inp.type.tensor_type.shape.dim:
            name = split.symbol(d.dim_param, inp.name)
            if d.dim_param not in ANONYMOUS_DIMS and d.dim_param not in binds and name not in graph.scope.symbols:
                lo, hi = ranges.get(d.dim_param, (None, None))  # a split name's range holds for each copy
                ranged.add(d.dim_param)
                if lo is not None and hi is not None and lo > hi:
                    raise CompileError(f"--range {d.dim_param}: the minimum {lo} exceeds the maximum {hi}")
                graph.scope.get(name, lo=max(lo or 0, 0), hi=hi)
    ranges = {k: v for k, v in ranges.items() if k not in ranged}
    if ranges:
        raise CompileError(f"--range names unknown symbols: {', '.join(sorted(ranges))} "
                           f"(the inputs' symbols are: {', '.join(graph.scope.symbols) or 'none'})")
    defaults = _overridable(g, overridable)
    for k, inp in enumerate(g.input):
        if not inp.name:
            raise CompileError(f"malformed ONNX model: graph input {k} has an empty name")
        if inp.name in graph.values:  # IR < 4 lists initializers as inputs too
            if inp.name not in defaults:
                graph.weight_inputs.append(inp.name)
                continue
            graph.input_defaults[inp.name] = graph.values.pop(inp.name).const
        tt = inp.type.tensor_type
        kind = inp.type.WhichOneof("value")
        if kind in ("sequence_type", "optional_type"):
            raise CompileError(f"input '{inp.name}' is {'a sequence' if kind == 'sequence_type' else 'an optional'} "
                               f"({sequence.type_text(inp.type)}); {NOT_AT_BOUNDARY}")
        if kind != "tensor_type":
            raise CompileError(f"input '{inp.name}' is not a tensor ({kind or 'it has no type'}); symwasm's inputs "
                               f"are tensors")
        dt = _dtype(tt.elem_type, f"input '{inp.name}'")
        if not tt.HasField("shape"):
            raise CompileError(f"input '{inp.name}' has no shape (unknown rank is not supported; "
                               f"give it a shape with named dims)")
        shape = []
        for axis, d in enumerate(tt.shape.dim):
            # several exporters write an unknown dim as dim_value -1; onnxruntime reads any
            # negative dim_value as unknown, and so does symwasm (a fresh symbol, below)
            if d.HasField("dim_value") and d.dim_value >= 0:
                shape.append(int(d.dim_value))
            elif d.HasField("dim_param") and d.dim_param not in ANONYMOUS_DIMS:
                if d.dim_param in binds:
                    unused_binds.discard(d.dim_param)
                    shape.append(int(binds[d.dim_param]))
                else:
                    shape.append(graph.scope.get(split.symbol(d.dim_param, inp.name)))
            else:
                shape.append(graph.scope.fresh(f"{ident(inp.name)}_dim{axis}", kind="input"))
        graph.add_value(Value(inp.name, dt, tuple(shape)))
        graph.inputs.append(inp.name)
        default = graph.input_defaults.get(inp.name)
        if default is not None and dt.np == np.dtype(object):
            raise CompileError(f"input '{inp.name}': a string input cannot have a default (--overridable)")
        if default is not None and (default.dtype != dt.np or default.ndim != len(shape) or any(
                isinstance(d, int) and d != n for d, n in zip(shape, default.shape))):
            raise CompileError(f"input '{inp.name}' is {dt.name}{D.fmt_shape(shape)}, but its initializer, the default "
                               f"--overridable gives it, is {default.dtype}{tuple(default.shape)}")
    if unused_binds:
        raise CompileError(f"--bind names unknown symbols: {', '.join(sorted(unused_binds))} "
                           f"(the inputs' symbols are: {', '.join(graph.scope.symbols) or 'none'})")

    reg = registry()
    old: dict[str, int] = {}
    token = _DOMAIN_OPSETS.set({o.domain: o.version for o in proto.opset_import})
    functions = _LOCAL_FUNCTIONS.set({(f.domain, f.name, f.overload): f for f in proto.functions})
    weights = _WEIGHTS.set(weight_names(g))
    specialized = _SPECIALIZED.set([0])
    try:
        for n, version in _import_nodes(graph, reg, in_order(g.node), [o.name for o in g.output], opset):
            known = reg.versions(n.op_type)  # none: the node was expanded from its ONNX function
            if known and version < max(known) and version < 13 and n.domain in ("", "ai.onnx"):
                old[f"{n.op_type}-{version}"] = old.get(f"{n.op_type}-{version}", 0) + 1
    finally:
        _SPECIALIZED.reset(specialized)
        _WEIGHTS.reset(weights)
        _LOCAL_FUNCTIONS.reset(functions)
        _DOMAIN_OPSETS.reset(token)
    if converted_from is not None:
        graph.notes.append(f"opset {converted_from} model upgraded to opset {MIN_OPSET} by onnx's version converter")
    if old:
        graph.notes.append("older op versions read in their own form (no conversion): "
                           + ", ".join(f"{k} x{v}" for k, v in sorted(old.items())))

    _note_contradicting_info(graph, g)
    if graph.weight_inputs:
        graph.notes.append(f"{len(graph.weight_inputs)} initializers the model also lists as inputs (as IR version 3 "
                           f"wrote weights) are compiled as the constants they hold; a run cannot feed them "
                           f"(compile --overridable NAME keeps one an input with its value as the default)")
    if graph.input_defaults:
        graph.notes.append(f"inputs with a default a run may override (compile --overridable): "
                           f"{', '.join(graph.input_defaults)}")
    for out in g.output:
        if out.name not in graph.values:
            raise CompileError(f"graph output '{out.name}' is not produced by any node")
        if sequence.is_held(graph.values[out.name]):
            raise CompileError(f"graph output '{out.name}' is {graph.values[out.name].describe()}; {NOT_AT_BOUNDARY}")
        graph.outputs.append(out.name)
    # no core node reads a held optional or sequence: only their elements live on
    for name in [k for k, v in graph.values.items() if sequence.is_held(v)]:
        del graph.values[name]
    _adopt_output_names(graph, g)
    return graph


def _overridable(g: onnx.GraphProto, names: Collection[str]) -> set[str]:
    """The initializers listed as inputs that ``names`` (compile --overridable) keeps as inputs."""
    initializers = {t.name for t in g.initializer}
    listed = [i.name for i in g.input if i.name in initializers]
    if "all" in names:
        return set(listed)
    unknown = sorted(set(names) - set(listed))
    if unknown:
        raise CompileError(f"--overridable names {', '.join(unknown)}, which {'is' if len(unknown) == 1 else 'are'} "
                           f"not an initializer the model lists as an input (those are: {', '.join(listed) or 'none'})")
    return set(names)


# how many times one model's code may be specialized after rank-polymorphic Ifs: each
# specialization copies what follows the If into both branches, so n of them in a row
# would copy it 2**n times
MAX_SPECIALIZATIONS = 8
_SPECIALIZED: ContextVar[list[int]] = ContextVar("specialized")  # per model being imported


def _import_nodes(graph: Graph, reg, nodes: list[onnx.NodeProto], leaving: list[str], opset: int):
    """Import ``nodes`` in order, yielding each with its op version. ``leaving``: the names
    that leave this graph (its outputs). An If whose branches yield different ranks is
    replaced by :func:`specialize_after_if`'s rewrite and the import goes on from there."""
    from .ops.control import RankPolymorphicIf

    index = 0
    while index < len(nodes):
        n = nodes[index]
        names = set(graph.values)
        try:
            yield n, _import_node(graph, reg, n, index, opset)
        except RankPolymorphicIf as e:
            for name in set(graph.values) - names:  # what the branches' import left
                del graph.values[name]
            nodes[index:] = specialize_after_if(nodes[index], nodes[index + 1:], leaving, e)
            continue
        index += 1


def specialize_after_if(node: onnx.NodeProto, after: list[onnx.NodeProto], leaving: list[str],
                        why: CompileError) -> list[onnx.NodeProto]:
    """Nodes that replace a rank-polymorphic If ``node`` and the nodes ``after`` it. Torch and
    spox write ``if x.dim() == 3: x = x.squeeze(1)``, then test the rank again
    (``Size(Shape(x))``); symwasm's values have one rank each, so the code after the If that
    reads its outputs is copied into both branches, where each rank is known and such tests
    fold. The nodes that do not read them come first, unchanged; the new If yields the
    values of ``leaving`` that the copied code computes. Refused when nothing after the If
    reads its outputs (a graph output whose rank depends on data) and past
    :data:`MAX_SPECIALIZATIONS`."""
    produced = set(node.output)
    copied, kept = [], []
    for n in after:
        if produced & _reads(n):
            copied.append(n)
            produced.update(o for o in n.output if o)
        else:
            kept.append(n)
    out = [x for x in leaving if x in produced]
    if not copied:
        raise CompileError(f"{why}; symwasm needs the ranks of the values that leave a graph to be known at "
                           f"compile time, and nothing after the If brings them back to one rank")
    count = _SPECIALIZED.get()
    count[0] += 1
    if count[0] > MAX_SPECIALIZATIONS:
        raise CompileError(f"{why}; the code after {MAX_SPECIALIZATIONS} such Ifs was already specialized "
                           f"into their branches, and symwasm stops there (each doubles that code)")
    attrs = {a.name: a.g for a in node.attribute}
    name = node.name or "If"
    branches = {}
    for which in ("then", "else"):
        body = onnx.GraphProto()
        body.CopyFrom(attrs[f"{which}_branch"])
        body.name = f"{name}/{which}"
        yields = [o.name for o in body.output]
        body.node.extend(onnx.helper.make_node("Identity", [y], [o], name=f"{name}/{which}/{o}")
                         for y, o in zip(yields, node.output) if o)
        body.node.extend(copied)
        del body.output[:]
        body.output.extend(onnx.ValueInfoProto(name=o) for o in out)
        # the names the copy defines are its own in each branch
        rename_in(body, {x: f"{x}@{which}" for x in produced})
        branches[f"{which}_branch"] = body
    merged = onnx.helper.make_node("If", [node.input[0]], out, name=f"{name}/specialized", **branches)
    return kept + [merged]


def in_order(nodes) -> list[onnx.NodeProto]:
    """``nodes`` with each after the nodes that produce what it reads, as onnxruntime sorts a
    graph when it loads it: the ONNX spec asks for sorted nodes, but tools write graphs out of
    order (onnxruntime's float16 converter). Stable: a sorted graph keeps its order, and an
    unsorted one moves only what it must. A name no node produces, or a cycle, is left for the
    import to name."""
    nodes = list(nodes)
    producer = {o: k for k, n in enumerate(nodes) for o in n.output if o}
    reads = [[producer[i] for i in _reads(n) if i in producer] for n in nodes]
    if all(p < k for k, ps in enumerate(reads) for p in ps):
        return nodes
    placed: set[int] = set()
    out = []
    for root in range(len(nodes)):
        stack = [(root, iter(sorted(reads[root])))]
        opened = {root}
        while stack:
            k, deps = stack[-1]
            if k in placed:
                stack.pop()
                continue
            d = next((d for d in deps if d not in placed and d not in opened), None)
            if d is not None:
                opened.add(d)
                stack.append((d, iter(sorted(reads[d]))))
                continue
            stack.pop()
            placed.add(k)
            out.append(nodes[k])
    return out


def _reads(n: onnx.NodeProto) -> set[str]:
    """Every name ``n`` reads, inside its subgraphs too (a subgraph's own names included:
    they cannot be an enclosing graph's)."""
    names = {i for i in n.input if i}
    for a in n.attribute:
        for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
            for m in g.node:
                names |= _reads(m)
    return names


def _note_contradicting_info(graph: Graph, g: onnx.GraphProto) -> None:
    """Exporters' value_info and output types are hints, sometimes stale (a dim fixed at
    export that the graph computes, a rank from before a rewrite): symwasm's inference wins,
    and each contradiction is noted for ``inspect``. Only what provably differs is noted: a
    dtype, a rank, or two static dims that are not equal."""
    for info in list(g.value_info) + list(g.output):
        v = graph.values.get(info.name)
        tt = info.type.tensor_type if info.type.WhichOneof("value") == "tensor_type" else None
        if v is None or tt is None:
            continue
        said = DTYPE_BY_CODE.get(tt.elem_type)
        why = None
        if tt.elem_type and said is not None and said != v.dtype:
            why = f"dtype {said.name}"
        elif tt.HasField("shape") and len(tt.shape.dim) != v.rank:
            why = f"rank {len(tt.shape.dim)}"
        elif tt.HasField("shape"):
            for axis, (d, mine) in enumerate(zip(tt.shape.dim, v.shape)):
                if d.HasField("dim_value") and d.dim_value >= 0 and isinstance(mine, int) and d.dim_value != mine:
                    why = f"dim {axis} = {d.dim_value}"
                    break
        if why is not None:
            graph.notes.append(f"the model's type of '{info.name}' says {why}; symwasm infers "
                               f"{v.describe()} and uses that")


def _import_node(graph: Graph, reg, n: onnx.NodeProto, index: int, opset: int) -> int:
    """Translate one node; returns the op version in effect."""
    name = n.name or f"{n.op_type}_{index}"
    label = f"node '{name}' ({n.op_type})"
    local = _LOCAL_FUNCTIONS.get().get((n.domain, n.op_type, n.overload))
    if local is None and n.domain not in ("", "ai.onnx", PREVIEW, CONTRIB, ML):
        raise CompileError(f"{label}: ops of domain '{n.domain}' are not supported")
    for i in n.input:
        if i and i not in graph.values:
            raise CompileError(f"{label}: input '{i}' is not produced by any earlier node, "
                               f"initializer or graph input (malformed or unsorted graph)")
    for o in n.output:
        if o and o in graph.values:
            raise CompileError(f"{label}: output '{o}' is already defined (by a graph input, an initializer or "
                               f"an earlier node); every value has one producer")
    if local is not None:  # its body's nodes are checked as they are imported
        return _expand_local_function(graph, reg, n, name, label, local, opset)
    held = [i for i in n.input if i and sequence.is_held(graph.values[i])]
    if held and (n.op_type not in sequence.HELD_OPS or n.domain not in ("", "ai.onnx")):
        raise CompileError(f"{label}: input '{held[0]}' is {graph.values[held[0]].describe()}, which symwasm "
                           f"resolves at compile time; {n.op_type} takes tensors only (Identity and the optional "
                           f"and sequence ops read optionals and sequences)")
    if n.domain == PREVIEW:
        return _import_preview(graph, reg, n, name, label, opset)
    if n.domain == CONTRIB:
        return _import_contrib(graph, reg, n, name, label)
    if n.domain == ML:
        return _import_ml(graph, reg, n, name, label)
    version = version_in_effect(n.op_type, opset)
    if version is None and n.op_type in ORT_DEFAULT_DOMAIN:
        return _import_contrib(graph, reg, n, name, label)
    entry = reg.lookup(n.op_type, version) if version is not None else None
    if held and n.op_type == "Identity" and entry is not None:  # Identity's own translation takes tensors
        entry = Entry("Identity", entry.versions, sequence.identity, foldable=False)
    if entry is None and version is not None:
        body = _function_body(graph, n, opset, label)
        if body is not None:
            fn, fn_opset = body
            _expand_function(graph, reg, n, name, f"{label}, expanded from its ONNX function",
                             fn, opset if fn_opset is None else fn_opset, _schema_attributes(graph, n, opset, label))
            return version
    if entry is None:
        known = reg.versions(n.op_type)
        if not known:
            raise CompileError(f"{label}: unsupported op '{n.op_type}' (opset {opset}); "
                               f"supported ops: {', '.join(reg.ops())}")
        raise CompileError(f"{label}: {n.op_type} version {version} (in effect at opset {opset}) is not "
                           f"supported; symwasm implements versions {', '.join(map(str, known))}")
    _check_arity(n, opset, label)
    ctx = TranslateContext(graph, n, name, version, _attrs_with_defaults(n, opset, label), import_region)
    _translate(graph, entry, ctx, n, label)
    if entry.foldable:
        _fold(graph, ctx, n, opset)
    return version


def _translate(graph: Graph, entry: Entry, ctx: TranslateContext, n: onnx.NodeProto, label: str) -> None:
    try:
        entry.translate(ctx)
    except CompileError:
        raise
    except Exception as e:  # a bug in a translation still names the node
        raise CompileError(f"{label}: translation failed: {type(e).__name__}: {e}") from e
    for o in n.output:
        if o and o not in graph.values:
            raise CompileError(f"{label}: output '{o}' was not inferred")


def _import_contrib(graph: Graph, reg, n: onnx.NodeProto, name: str, label: str) -> int:
    """An op of onnxruntime's contrib domain (every one is at version 1). onnx knows no schema
    for them: attributes are read as given, and each translation supplies its defaults and
    checks its inputs. They are never folded with onnx.reference, which does not know them."""
    entry = reg.lookup(n.op_type, 1, CONTRIB)
    if entry is None:
        raise CompileError(f"{label}: unsupported op '{n.op_type}' of domain '{CONTRIB}'; symwasm implements these "
                           f"of it: {', '.join(reg.ops(CONTRIB))}")
    attrs = {}
    for a in n.attribute:
        try:
            attrs[a.name] = _attr_value(a)
        except Exception as e:  # noqa: BLE001 - a corrupt tensor or graph attribute in any form
            raise CompileError(f"{label}: attribute '{a.name}' cannot be read ({e})") from None
    ctx = TranslateContext(graph, n, name, 1, attrs, import_region)
    _translate(graph, entry, ctx, n, label)
    return 1


def _import_ml(graph: Graph, reg, n: onnx.NodeProto, name: str, label: str) -> int:
    """An op of the ai.onnx.ml domain, at the version in effect at the model's import of that
    domain; its attributes are checked against onnx's schema of that version and its
    defaults filled in. ml nodes are never folded: their translations' core ops are.
    Returns the op's version."""
    ml_opset = _DOMAIN_OPSETS.get().get(ML)
    if ml_opset is None:
        raise CompileError(f"{label}: the model imports no version of domain '{ML}'")
    if not 1 <= ml_opset <= MAX_ML_OPSET:
        raise CompileError(f"{label}: the model imports version {ml_opset} of domain '{ML}'; the onnx package "
                           f"knows versions 1 to {MAX_ML_OPSET}")
    implemented = f"symwasm implements these of it: {', '.join(reg.ops(ML))}"
    if n.op_type in ML_REFUSED:
        raise CompileError(f"{label}: op '{n.op_type}' of domain '{ML}' is not supported: {ML_REFUSED[n.op_type]}")
    try:
        version = onnx.defs.get_schema(n.op_type, ml_opset, ML).since_version
    except (onnx.defs.SchemaError, TypeError):
        raise CompileError(f"{label}: unsupported op '{n.op_type}' of domain '{ML}' (it has none at version "
                           f"{ml_opset}); {implemented}") from None
    entry = reg.lookup(n.op_type, version, ML)
    known = reg.versions(n.op_type, ML)
    if entry is None and not known:
        raise CompileError(f"{label}: unsupported op '{n.op_type}' of domain '{ML}'; {implemented}")
    if entry is None:
        raise CompileError(f"{label}: {n.op_type} version {version} (in effect at '{ML}' opset {ml_opset}) is not "
                           f"supported; symwasm implements versions {', '.join(map(str, known))}")
    _check_arity(n, ml_opset, label)
    ctx = TranslateContext(graph, n, name, version, _attrs_with_defaults(n, ml_opset, label), import_region)
    _translate(graph, entry, ctx, n, label)
    return version


def _import_preview(graph: Graph, reg, n: onnx.NodeProto, name: str, label: str, opset: int) -> int:
    """An op of the ai.onnx.preview domain, imported as its ONNX function at the version the
    model imports of that domain (their bodies are default-domain ops, read at ``opset``);
    a preview op with no function is refused. Returns the op's version."""
    domain_opset = _DOMAIN_OPSETS.get().get(PREVIEW)
    if domain_opset is None:
        raise CompileError(f"{label}: the model imports no version of domain '{PREVIEW}'")
    try:
        version = onnx.defs.get_schema(n.op_type, domain_opset, PREVIEW).since_version
    except onnx.defs.SchemaError:
        raise CompileError(f"{label}: unsupported op '{PREVIEW}.{n.op_type}' (there is none at version "
                           f"{domain_opset} of the domain)") from None
    body = _function_body(graph, n, domain_opset, label)
    if body is None:
        raise CompileError(f"{label}: {PREVIEW}.{n.op_type}-{version} is not supported: symwasm imports the "
                           f"ops of domain '{PREVIEW}' that ONNX defines by a function, and it has none")
    fn, fn_opset = body
    _expand_function(graph, reg, n, name, f"{label}, expanded from its ONNX function", fn,
                     opset if fn_opset is None else fn_opset, _schema_attributes(graph, n, domain_opset, label))
    return version


def _upgrade(proto: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    """A model of an opset older than symwasm reads, converted by onnx's version converter
    to the oldest it reads."""
    try:
        return onnx.version_converter.convert_version(proto, MIN_OPSET)
    except Exception as e:  # noqa: BLE001 - the converter raises several types
        raise CompileError(f"opset {opset} is older than symwasm reads ({MIN_OPSET} to {MAX_OPSET}) and onnx's "
                           f"version converter cannot upgrade this model: {str(e).splitlines()[0][:200]}") from None


def _function_body(graph: Graph, n: onnx.NodeProto, opset: int, label: str):
    """(FunctionProto, its default-domain opset or None when it imports none) of the ONNX
    function that defines ``n``'s op at ``opset`` (of ``n``'s domain), or None when the op
    has none. Context-dependent functions (LogSoftmax, Attention, CastLike, FlexAttention...)
    are built for ``n``'s attributes, GRAPH-valued ones included (FlexAttention's builder
    inlines its score_mod and prob_mod subgraphs), and its inputs' types."""
    try:
        schema = onnx.defs.get_schema(n.op_type, opset, n.domain or "")
    except onnx.defs.SchemaError:
        return None
    plain = [v for v in schema.function_opset_versions if v <= opset]
    context = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
    if not plain and not context:
        return None
    _check_arity(n, opset, label)
    _attrs_with_defaults(n, opset, label)  # checks the attributes against the schema
    if plain and (not context or max(plain) >= max(context)):
        text = schema.get_function_with_opset_version(max(plain))
    else:
        types = []
        for i in n.input:
            t = onnx.TypeProto()
            if i:
                v = graph.values[i]
                t.tensor_type.elem_type = v.dtype.code
                for d in v.shape:
                    dim = t.tensor_type.shape.dim.add()
                    if isinstance(d, int):
                        dim.dim_value = d
                    else:
                        dim.dim_param = str(d)
            types.append(t.SerializeToString())
        try:
            text = schema.get_context_dependent_function_with_opset_version(max(context), n.SerializeToString(),
                                                                             types)
        except Exception as e:  # noqa: BLE001 - onnx refuses the node's types or attributes
            raise CompileError(f"{label}: its ONNX function cannot be built for these inputs ({e})") from None
    fn = onnx.FunctionProto()
    fn.ParseFromString(text)
    if not fn.node:
        return None
    return fn, next((o.version for o in fn.opset_import if o.domain in ("", "ai.onnx")), None)


def _schema_attributes(graph: Graph, n: onnx.NodeProto, opset: int, label: str) -> dict:
    """``n``'s attributes by name, with its ONNX schema's defaults for those it does not give,
    as its function body's references (``ref_attr_name``) read them."""
    schema = onnx.defs.get_schema(n.op_type, opset, n.domain or "")
    given = {a.name: a for a in n.attribute}
    for aname, spec in schema.attributes.items():
        if aname not in given and spec.default_value.type != onnx.AttributeProto.UNDEFINED:
            given[aname] = spec.default_value
    axis = given.get("axis")
    if axis is not None and axis.type == onnx.AttributeProto.INT and n.input and n.input[0]:
        rank = graph.values[n.input[0]].rank  # functions take the axis for granted: check it here
        if not -rank <= axis.i < max(rank, 1):
            raise CompileError(f"{label}: axis {axis.i} is out of range for input '{n.input[0]}' of rank {rank}")
    return given


def _expand_local_function(graph: Graph, reg, n: onnx.NodeProto, name: str, label: str,
                           fn: onnx.FunctionProto, opset: int) -> int:
    """Import ``n`` as the nodes of the model's own function ``fn`` (onnxscript's and torch's
    dynamo exporter's ``model.functions``), at the opsets ``fn`` imports (the caller's default
    opset when it imports none); its attributes are the node's, with the defaults ``fn``
    declares. Returns the version the model imports of ``fn``'s domain (1 when none)."""
    qualified = f"{fn.domain}.{fn.name}" + (f":{fn.overload}" if fn.overload else "")
    expanding = _EXPANDING.get()
    if qualified in expanding:
        chain = " -> ".join(expanding[expanding.index(qualified):] + (qualified,))
        raise CompileError(f"{label}: the model's function '{qualified}' calls itself ({chain}); ONNX functions "
                           f"cannot recurse")
    for what, given, formal in (("inputs", n.input, fn.input), ("outputs", n.output, fn.output)):
        if len(given) > len(formal):
            raise CompileError(f"{label}: {len(given)} {what} given; the model's function '{qualified}' takes "
                               f"{len(formal)}")
    declared = {a: None for a in fn.attribute} | {a.name: a for a in fn.attribute_proto}
    given = {a.name: a for a in n.attribute}
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise CompileError(f"{label}: '{unknown[0]}' is not an attribute of the model's function '{qualified}' "
                           f"(it has: {', '.join(sorted(declared)) or 'none'})")
    given |= {a: default for a, default in declared.items() if a not in given and default is not None}
    imports = {o.domain: o.version for o in fn.opset_import}
    fn_opset = imports.get("", imports.get("ai.onnx", opset))
    if not MIN_OPSET <= fn_opset <= MAX_OPSET:
        raise CompileError(f"{label}: the model's function '{qualified}' imports opset {fn_opset}; symwasm reads "
                           f"{MIN_OPSET} to {MAX_OPSET}")
    token = _EXPANDING.set(expanding + (qualified,))
    domains = _DOMAIN_OPSETS.set(imports)
    try:
        _expand_function(graph, reg, n, name, f"{label}, expanded from the model's function '{qualified}'", fn,
                         fn_opset, given)
    finally:
        _DOMAIN_OPSETS.reset(domains)
        _EXPANDING.reset(token)
    return _DOMAIN_OPSETS.get().get(n.domain, 1)


def _expand_function(graph: Graph, reg, n: onnx.NodeProto, name: str, within: str,
                     fn: onnx.FunctionProto, fn_opset: int, given: dict) -> None:
    """Import ``n`` as the nodes of the function ``fn`` (an ONNX schema's or the model's own):
    the function's inputs and outputs are the node's, its own values get names under the
    node's, and attributes that refer to the function's (``ref_attr_name``) take ``given``'s
    values, in the subgraphs of its nodes too (:func:`.subgraphs.bind_subgraph`). ``within``
    starts the message of an error inside the body."""
    rename = {f: (n.input[k] if k < len(n.input) else "") for k, f in enumerate(fn.input)}
    rename.update({f: n.output[k] for k, f in enumerate(fn.output) if k < len(n.output) and n.output[k]})
    prefix = f"{name}/"

    def new_name(x: str) -> str:
        return rename.get(x, prefix + x if x else "")

    # the subgraphs of the function's nodes are imported at graph.opset (import_region):
    # it is the function's while its nodes are
    model_opset, graph.opset = graph.opset, fn_opset
    try:
        for k, sub in enumerate(fn.node):
            m = bound_node(sub, k, prefix, new_name, given)
            try:
                _import_node(graph, reg, m, k, fn_opset)
            except CompileError as e:
                raise CompileError(f"{within}: {e}") from None
    finally:
        graph.opset = model_opset
    for o in n.output:
        if o and o not in graph.values:
            raise CompileError(f"{within}: output '{o}' is not produced by it")


def import_region(graph: Graph, gp: onnx.GraphProto, bound: list[Value], label: str) -> Region:
    """Import a subgraph (an If branch, a Loop body) into ``graph``: its values join the
    graph's, its nodes go into the returned :class:`Region` (not ``graph.nodes``). ``bound``
    are its inputs' values, named as ``gp``'s inputs (after renaming: a subgraph whose
    names clash with the graph's gets fresh names); they are added to the graph here."""
    gp = rename_clashes(gp, set(graph.values))
    if len(bound) != len(gp.input):
        raise CompileError(f"{label}: the subgraph '{gp.name}' takes {len(gp.input)} inputs, "
                           f"{len(bound)} are given")
    region = Region([i.name for i in gp.input], [], [o.name for o in gp.output])
    for v, inp in zip(bound, gp.input):
        v.name = inp.name
        graph.add_value(v)
    for init in gp.initializer:
        try:
            arr = numpy_helper.to_array(init)
        except Exception as e:
            raise CompileError(f"{label}: initializer '{init.name}' of subgraph '{gp.name}' cannot be read ({e})") \
                from None
        dt = _dtype(init.data_type, f"{label}: initializer '{init.name}'")
        graph.add_value(Value(init.name, dt, tuple(arr.shape), const=arr.astype(dt.np),
                              sym=promote_sym(Value(init.name, dt, (), const=arr))))
    outer_nodes = graph.nodes
    graph.nodes = region.nodes
    try:
        for _ in _import_nodes(graph, registry(), in_order(gp.node), region.outputs, graph.opset):
            pass
    finally:
        region.nodes = graph.nodes
        graph.nodes = outer_nodes
    for o in region.outputs:
        if o not in graph.values:
            raise CompileError(f"{label}: output '{o}' of subgraph '{gp.name}' is not produced by any node")
        if sequence.is_held(graph.values[o]):
            raise CompileError(f"{label}: output '{o}' of subgraph '{gp.name}' is {graph.values[o].describe()}; "
                               f"subgraphs that yield sequences or optionals are not supported (symwasm resolves "
                               f"those at compile time, and If and Loop carry tensors)")
    return region


def _adopt_output_names(graph: Graph, g: onnx.GraphProto) -> None:
    """A data-dependent dim the model declares with a name (``idx: [count, 2]``) takes that
    name instead of the generated one (``nonzero_0``), so messages and inspect use it."""
    renames: dict[D.Sym, D.Expr] = {}
    for out in g.output:
        declared = out.type.tensor_type.shape.dim if out.type.tensor_type.HasField("shape") else []
        inferred = graph.values[out.name].shape
        if len(declared) != len(inferred):
            continue
        for d, dim in zip(declared, inferred):
            atom = dim.atom() if isinstance(dim, D.Expr) else None
            if (d.dim_param and isinstance(atom, D.Sym) and atom.kind == "data" and atom not in renames
                    and d.dim_param not in graph.scope.symbols):
                renames[atom] = graph.scope.get(d.dim_param, kind="data", lo=atom.lo, hi=atom.hi)
    if not renames:
        return
    for name in renames:
        del graph.scope.symbols[name.name]

    def sub(d):
        return D.substitute(d, renames.get)

    for v in graph.values.values():
        v.shape = tuple(sub(d) for d in v.shape)
        if v.sym is not None:
            v.sym = tuple(sub(d) for d in v.sym)
    for node in graph.all_nodes():
        for c in node.checks:
            c.a, c.b = sub(c.a), sub(c.b)
        node.info = _substitute_info(node.info, sub)


def _substitute_info(info, sub):
    """Renamed symbols inside what a shape function derived (a Conv's window pads...)."""
    import dataclasses

    if isinstance(info, D.Expr):
        return sub(info)
    if isinstance(info, (tuple, list)):
        return type(info)(_substitute_info(x, sub) for x in info)
    if dataclasses.is_dataclass(info) and not isinstance(info, type):
        return dataclasses.replace(info, **{f.name: _substitute_info(getattr(info, f.name), sub)
                                            for f in dataclasses.fields(info) if f.init})
    return info


def weight_names(g: onnx.GraphProto) -> frozenset[str]:
    """The values ``g``'s nodes read as weights (:data:`WEIGHT_INPUTS`)."""
    return frozenset(n.input[k] for n in g.node if n.domain in ("", "ai.onnx")
                     for k in WEIGHT_INPUTS.get(n.op_type, ()) if k < len(n.input) and n.input[k])


def _fold(graph: Graph, ctx: TranslateContext, proto: onnx.NodeProto, opset: int) -> None:
    """Replace the outputs of a node whose inputs are all constant by their values (its
    core nodes go: nothing is left to run)."""
    ins = [graph.values[i] if i else None for i in proto.input]
    outs = [graph.values[o] for o in proto.output if o]
    if any(v is not None and v.const is None for v in ins) or all(v.const is not None for v in outs):
        return
    # a dim that is not static may only be one of the node's own data-dependent symbols (a
    # Unique or TopK of constants): the folded value fixes it
    given = set().union(*[D.free_symbols(d) for v in ins if v is not None for d in v.shape])
    for v in outs:
        for d in v.shape:
            atom = d.atom() if isinstance(d, D.Expr) else None
            if not isinstance(d, int) and not (isinstance(atom, D.Sym) and atom.kind == "data" and atom not in given):
                return
    weights = {v.name for v in outs} <= _WEIGHTS.get()

    def too_big(elements: int, dt) -> bool:
        return elements * dt.itemsize > ARENA_LIMIT if weights else elements > FOLD_LIMIT

    for v in outs:
        if v.is_static and too_big(int(np.prod([int(d) for d in v.shape])), v.dtype):
            return
    from onnx.reference import ReferenceEvaluator

    feeds = {v.name: v.const for v in ins if v is not None}
    inputs = [onnx.helper.make_tensor_value_info(k, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
              for k, a in feeds.items()]
    outputs = [onnx.helper.make_tensor_value_info(o, 0, None) for o in proto.output if o]
    model = onnx.helper.make_model(
        onnx.helper.make_graph([proto], "fold", inputs, outputs),
        opset_imports=[onnx.helper.make_opsetid("", opset)])
    try:
        results = ReferenceEvaluator(model).run(None, feeds)
    except Exception:  # noqa: BLE001 - any failure leaves the node to run time
        return  # where its errors carry run-time context
    if any(too_big(np.asarray(r).size, v.dtype) for v, r in zip(outs, results)):
        return
    fixed: dict = {}
    for v, r in zip(outs, results):
        r = np.asarray(r).astype(v.dtype.np)
        ok = len(r.shape) == v.rank
        for d, n in zip(v.shape, r.shape) if ok else ():
            if isinstance(d, int):
                ok = ok and d == n
            else:
                ok = ok and fixed.setdefault(d, n) == n
        if not ok:
            raise CompileError(f"{ctx.label()}: folded output '{v.name}' has shape {r.shape}, "
                               f"inferred {D.fmt_shape(v.shape)} (a shape function bug)")
    for v, r in zip(outs, results):
        r = np.asarray(r).astype(v.dtype.np)
        v.shape = tuple(r.shape)
        v.const = r
        if v.sym is None:
            v.sym = promote_sym(v)
    dropped = set(map(id, ctx.nodes))
    graph.nodes = [nd for nd in graph.nodes if id(nd) not in dropped]
