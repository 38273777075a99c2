"""Subgraphs as protos, before they are imported: a function body's subgraphs bound to one
expansion (their names under the node's, their attribute references resolved), and names
renamed throughout a subgraph and the subgraphs inside it. No import here: the importer
(and translations that import subgraphs, through ``TranslateContext.import_region``) use these."""
from __future__ import annotations

import onnx


def bind_attributes(attrs, given: dict, outer, scope: str) -> list[onnx.AttributeProto]:
    """The attributes of a function body's node (named ``scope`` once expanded): each that
    refers to a function attribute takes ``given``'s value (and is left out when the node
    gives none and it has no default); each subgraph is bound by :func:`bind_subgraph`, its
    own values named under ``scope/<attribute>/``, the function's through ``outer``."""
    out = []
    for a in attrs:
        b = onnx.AttributeProto()
        if a.ref_attr_name:
            if a.ref_attr_name not in given:
                continue
            b.CopyFrom(given[a.ref_attr_name])
            b.name = a.name
        else:
            b.CopyFrom(a)
            if a.type == onnx.AttributeProto.GRAPH:
                b.g.CopyFrom(bind_subgraph(a.g, given, outer, f"{scope}/{a.name}/"))
            elif a.type == onnx.AttributeProto.GRAPHS:
                b.ClearField("graphs")
                b.graphs.extend(bind_subgraph(g, given, outer, f"{scope}/{a.name}.{j}/")
                                for j, g in enumerate(a.graphs))
        out.append(b)
    return out


def bind_subgraph(gp: onnx.GraphProto, given: dict, outer, prefix: str) -> onnx.GraphProto:
    """A copy of ``gp``, a subgraph inside a function body, for its expansion: the names it
    defines (inputs, initializers, node outputs) go under ``prefix``, so they cannot meet
    the model's; a name it uses without defining is the enclosing scope's, renamed by
    ``outer`` (a name the subgraph defines shadows the enclosing one). Its nodes' references
    to the function's attributes take ``given``'s values, in nested subgraphs too."""
    defined = {i.name for i in gp.input} | {t.name for t in gp.initializer} | \
        {o for nd in gp.node for o in nd.output if o}

    def name(x: str) -> str:
        if not x:
            return ""
        return prefix + x if x in defined else outer(x)

    gp = onnx.GraphProto.FromString(gp.SerializeToString())
    for coll in (gp.input, gp.output, gp.initializer, gp.value_info):
        for x in coll:
            x.name = name(x.name)
    nodes = [bound_node(nd, k, prefix, name, given) for k, nd in enumerate(gp.node)]
    del gp.node[:]
    gp.node.extend(nodes)
    return gp


def bound_node(nd: onnx.NodeProto, k: int, prefix: str, name, given: dict) -> onnx.NodeProto:
    """A copy of ``nd``, node ``k`` of a function body or of a subgraph inside one, for its
    expansion: named under ``prefix``, its values renamed by ``name``, its attributes bound
    by :func:`bind_attributes`."""
    m = onnx.NodeProto()
    m.CopyFrom(nd)
    m.name = f"{prefix}{nd.name or nd.op_type + '_' + str(k)}"
    m.input[:] = [name(x) for x in nd.input]
    m.output[:] = [name(x) for x in nd.output]
    m.ClearField("attribute")
    m.attribute.extend(bind_attributes(nd.attribute, given, name, m.name))
    return m


def rename_clashes(gp: onnx.GraphProto, taken: set[str]) -> onnx.GraphProto:
    """``gp`` with every name it defines that is already ``taken`` renamed (throughout it and
    the subgraphs inside it)."""
    defined = [i.name for i in gp.input] + [i.name for i in gp.initializer] + \
        [o for n in gp.node for o in n.output if o]
    clash = {d for d in defined if d in taken}
    if not clash:
        return gp
    new = {}
    used = set(taken) | set(defined)
    for d in sorted(clash):
        k, name = 1, f"{d}.1"
        while name in used:
            k += 1
            name = f"{d}.{k}"
        used.add(name)
        new[d] = name
    gp = onnx.GraphProto.FromString(gp.SerializeToString())
    rename_in(gp, new)
    return gp


def rename_in(gp: onnx.GraphProto, new: dict[str, str]) -> None:
    for coll in (gp.input, gp.output, gp.initializer, gp.value_info):
        for x in coll:
            x.name = new.get(x.name, x.name)
    for n in gp.node:
        n.input[:] = [new.get(i, i) for i in n.input]
        n.output[:] = [new.get(o, o) for o in n.output]
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                rename_in(a.g, new)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sub in a.graphs:
                    rename_in(sub, new)
