"""Fuse elementwise ops into the GEMM kernel that produces their input: a Conv, MatMul or
Gemm followed by a chain of float32 elementwise ops becomes one node whose op carries the
chain in ``post`` (:class:`toolkit.codegen.fused.PostOp`), and the kernel applies it as
each output element is stored (the GEMM's epilogue), so the chain costs no pass over
memory and its tensors no buffers. A chain link is a one-input op (Relu, Clip, Sigmoid,
...) or a two-input one (Add, Sub, Mul, Div, Max, Min) whose other input is a constant
scalar, or a tensor of the output's shape (a residual) or, after MatMul and Gemm, one value
per column (a bias); that tensor becomes an input of the fused node, which moves to the
chain's end. An elementwise op producing float32 takes a chain of one-input and
constant-scalar links the same way: the chain runs in its loop.

The erf form of GELU that exporters write, ``x * 0.5 * (1 + erf(x / sqrt(2)))`` (five
nodes, in any operand order; the scaling by 0.5 on either side, ``x * (1/sqrt 2)`` for the
division), becomes one Gelu first (:func:`gelu`), which then fuses like any one-input op;
so do ``x * sigmoid(x)`` (one swish) and ``x * hard_sigmoid(x)`` with HardSwish's
constants (one hard_swish).

A producer fuses when its op says its kernel can (``fusable(graph, node)``: for Conv, MatMul
and Gemm, whether their kernel plan's route has an epilogue, :mod:`toolkit.passes.kernels`), the
intermediate value has no other reader (no other node, region or graph output reads it),
and the consumer is in the same node list (not inside a region).

Before that (before ``simplify``), an inference
BatchNormalization of a Conv's output is folded into the Conv when the weights, the bias
and the normalization's parameters are constants: ``w' = w * s`` per output channel and
``b' = (b - mean) * s + beta`` with ``s = gamma / sqrt(var + epsilon)``, computed in
float64 (:func:`fold_batch_norm`)."""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np

from ..codegen.fused import PostOp
from ..ir.dtypes import FLOAT32, FLOAT64
from ..ir.graph import Graph, Node, Value, regions
from ..ops.base import run_infer
from ..ops.conv import BatchNorm, Conv
from ..ops.elementwise import HARD_SWISH_GATE, Elementwise


def _uses(graph: Graph) -> Counter:
    """How many times each value is read: by nodes (regions' too), region outputs and the
    graph's outputs."""
    uses: Counter[str] = Counter(graph.outputs)
    for node in graph.all_nodes():
        uses.update(i for i in node.inputs if i)
        for r in regions(node):
            uses.update(r.outputs)
    return uses


def fold_batch_norm(graph: Graph) -> Graph:
    uses = _uses(graph)

    def fold(nodes: list[Node]) -> list[Node]:
        out: list[Node] = []
        convs: dict[str, Node] = {}
        for node in nodes:
            for r in regions(node):
                r.nodes = fold(r.nodes)
            if isinstance(node.op, BatchNorm) and node.inputs[0] in convs and uses[node.inputs[0]] == 1:
                conv = convs.pop(node.inputs[0])
                if _fold_into(graph, conv, node):
                    continue
            out.append(node)
            if isinstance(node.op, Conv) and len(node.outputs) == 1:
                convs[node.outputs[0]] = node
        return out

    graph.nodes = fold(graph.nodes)
    return graph


def _fold_into(graph: Graph, conv: Node, bn: Node) -> bool:
    """Fold BatchNormalization ``bn`` into ``conv`` (which makes its input), if everything
    is a float32 constant."""
    w = graph.values[conv.inputs[1]]
    bias = graph.values[conv.inputs[2]] if len(conv.inputs) > 2 and conv.inputs[2] else None
    params = [graph.values[i] for i in bn.inputs[1:5]]
    if any(v.dtype != FLOAT32 or v.const is None for v in [w] + params + ([bias] if bias is not None else [])):
        return False
    gamma, beta, mean, var = (v.const.astype(np.float64).reshape(-1) for v in params)
    s = gamma / np.sqrt(var + bn.op.epsilon)
    b0 = bias.const.astype(np.float64).reshape(-1) if bias is not None else np.zeros_like(s)
    w2 = (w.const.astype(np.float64) * s.reshape((-1,) + (1,) * (w.rank - 1))).astype(np.float32)
    b2 = ((b0 - mean) * s + beta).astype(np.float32)
    wn, bn_ = graph.fresh_name(f"{w.name}.bn"), graph.fresh_name(f"{bn.outputs[0]}.bias")
    graph.add_value(Value(wn, FLOAT32, w.shape, const=w2))
    graph.add_value(Value(bn_, FLOAT32, (w.shape[0],), const=b2))
    del graph.values[conv.outputs[0]]
    conv.inputs = [conv.inputs[0], wn, bn_]
    conv.outputs = [bn.outputs[0]]
    run_infer(graph, conv)
    return True


def fuse(graph: Graph) -> Graph:
    uses = _uses(graph)
    graph.nodes = _fuse(graph, graph.nodes, uses)
    return graph


def _per_tensor(graph: Graph, node: Node) -> tuple[float, int] | None:
    """The float32 scale and the zero point (0 when absent) of a per-tensor Quantize or
    Dequantize whose scale and zero point are constants, else None."""
    scale = graph.values[node.inputs[1]]
    zp = graph.values[node.inputs[2]] if len(node.inputs) > 2 and node.inputs[2] else None
    if scale.const is None or scale.dtype != FLOAT32 or scale.const.size != 1 or node.info[0].mode != "tensor":
        return None
    if zp is not None and (zp.const is None or zp.const.size != 1):
        return None
    return float(scale.const.reshape(-1)[0]), int(zp.const.reshape(-1)[0]) if zp is not None else 0


def fake_quantize(graph: Graph) -> Graph:
    """A per-tensor DequantizeLinear of a per-tensor QuantizeLinear of float32 x (constant
    scales and zero points, 8- or 16-bit integers) becomes one elementwise ``fake_quantize``
    of x (:func:`toolkit.ops.elementwise._fake_quantize`, the same values bit for bit),
    which then fuses into the convolution or GEMM that makes x: a QDQ model's activations
    pass through no integer tensor and no extra loop. The QuantizeLinear stays while
    something else reads its output (dead-code removes it otherwise)."""
    from ..ir.dtypes import INT8, INT16, UINT8, UINT16
    from ..ops.quant import Dequantize, Quantize

    def rewrite(nodes: list[Node]) -> list[Node]:
        for node in nodes:
            for r in regions(node):
                r.nodes = rewrite(r.nodes)
        quantized: dict[str, tuple[Node, tuple[float, int]]] = {}
        out: list[Node] = []
        for node in nodes:
            op = node.op
            if isinstance(op, Quantize) and not op.multiply and op.out in (INT8, UINT8, INT16, UINT16):
                x = graph.values[node.inputs[0]]
                plan, pre, compute = node.info[:3]
                q = _per_tensor(graph, node)
                if x.dtype == FLOAT32 and pre == compute == FLOAT32 and q is not None:
                    quantized[node.outputs[0]] = (node, q)
            elif isinstance(op, Dequantize) and node.inputs[0] in quantized:
                quant, (scale, zero) = quantized[node.inputs[0]]
                dq = _per_tensor(graph, node)
                if dq is not None and node.info[1] == FLOAT32 and graph.values[node.outputs[0]].dtype == FLOAT32:
                    info = np.iinfo(quant.op.out.np)
                    new = Node(Elementwise("fake_quantize", (scale, zero, int(info.min), int(info.max)) + dq),
                               node.name, node.source, [quant.inputs[0]], list(node.outputs))
                    run_infer(graph, new)
                    out.append(new)
                    continue
            out.append(node)
        return out

    graph.nodes = rewrite(graph.nodes)
    return graph


def gelu(graph: Graph) -> Graph:
    """Each erf-form GELU written as five nodes becomes one Gelu node, and each x * sigmoid(x)
    or x * hard_sigmoid(x) one swish or hard_swish node (see the module doc)."""
    uses = _uses(graph)

    def rewrite(nodes: list[Node]) -> list[Node]:
        for node in nodes:
            for r in regions(node):
                r.nodes = rewrite(r.nodes)
        made = {o: n for n in nodes for o in n.outputs if o}
        readers: dict[str, list[Node]] = {}
        for n in nodes:
            for i in n.inputs:
                readers.setdefault(i, []).append(n)
        drop: set[int] = set()
        at: dict[int, Node] = {}  # the Gelu replacing the pattern's last node
        for node in nodes:
            found, op, source = None, None, None
            if _fn(node) == "erf":
                found = _match_gelu(graph, node, made, readers, uses)
                op, source = Elementwise("gelu", (False,)), "Gelu (erf form)"
            elif _fn(node) in SWISH_OF:
                found = _match_swish(graph, node, readers, uses)
                op, source = SWISH_OF[_fn(node)], f"{SWISH_OF[_fn(node)].fn} (x * {node.op.fn}(x))"
            if found is not None and not any(id(n) in drop for n in found[0]):
                matched, x, out = found
                drop.update(id(n) for n in matched)
                last = max(matched, key=nodes.index)
                at[id(last)] = Node(op, node.name, source, [x], [out])
                graph.values[out].producer = at[id(last)]
        out_nodes = []
        for n in nodes:
            if id(n) in at:
                out_nodes.append(at[id(n)])
            elif id(n) not in drop:
                out_nodes.append(n)
        return out_nodes

    graph.nodes = rewrite(graph.nodes)
    return graph


def _fn(node: Node) -> str | None:
    return node.op.fn if isinstance(node.op, Elementwise) and not node.op.post else None


def _scalar(graph: Graph, name: str) -> float | None:
    v = graph.values.get(name)
    if v is None or v.const is None or v.const.size != 1 or v.dtype != FLOAT32:
        return None
    return float(v.const.reshape(-1)[0])


def _other(node: Node, name: str) -> str | None:
    """The input of a two-input ``node`` that is not ``name`` (None if neither or both are)."""
    if len(node.inputs) != 2 or node.inputs.count(name) != 1:
        return None
    return node.inputs[1] if node.inputs[0] == name else node.inputs[0]


# a gate g with x * g(x) an op of its own: Sigmoid (SiLU, EfficientNet's activation) and
# HardSigmoid with HardSwish's constants (MobileNetV3 exported before opset 14)
SWISH_OF = {"sigmoid": Elementwise("swish", (1.0,)), "hard_sigmoid": Elementwise("hard_swish")}


def _match_swish(graph: Graph, gate: Node, readers, uses):
    """([gate, the Mul], x, the Mul's output) if ``gate``'s output is read only by a Mul of
    it and its own input x (no broadcast: both are x's shape; float32 or float64): ``x * sigmoid(x)`` is swish
    with alpha 1 (sigmoid(1 * x) is sigmoid(x)), ``x * hard_sigmoid(x)`` with alpha 1/6 and
    beta 0.5 (as float32, as the attributes hold them) is hard_swish. Each computes the same
    operations as the two nodes, so the results are the same."""
    x, g = gate.inputs[0], gate.outputs[0]
    if (gate.op.fn == "hard_sigmoid"
            and tuple(np.float32(gate.op.params)) != tuple(np.float32(HARD_SWISH_GATE))):
        return None
    mul = _only_reader(g, readers, uses)
    if mul is None or _fn(mul) != "mul" or _other(mul, g) != x:
        return None
    if graph.values[x].shape != graph.values[mul.outputs[0]].shape or graph.values[x].dtype not in (FLOAT32, FLOAT64):
        return None  # (float16's gate would be rounded to float16 between the two nodes)
    return [gate, mul], x, mul.outputs[0]


def _only_reader(name: str, readers, uses) -> Node | None:
    """The one node that reads ``name``, if nothing else (no other node, region or graph
    output) does."""
    rs = readers.get(name, [])
    return rs[0] if len(rs) == 1 and uses[name] == 1 else None


def _match_gelu(graph: Graph, erf: Node, made, readers, uses):
    """(the matched nodes, x, the output) if ``erf`` is the middle of an erf-form GELU."""
    def near(v: float | None, want: float) -> bool:
        return v is not None and abs(v - want) <= 1e-4 * abs(want)

    def only_reader(name: str) -> Node | None:
        return _only_reader(name, readers, uses)

    scale = made.get(erf.inputs[0])
    if scale is None or uses[erf.inputs[0]] != 1:
        return None
    if _fn(scale) == "div" and near(_scalar(graph, scale.inputs[1]), 2 ** 0.5):
        x = scale.inputs[0]
    elif _fn(scale) == "mul":
        x = next((i for i in scale.inputs if near(_scalar(graph, _other(scale, i) or ""), 0.5 ** 0.5)), None)
        if x is None:
            return None
    else:
        return None
    plus = only_reader(erf.outputs[0])
    if plus is None or _fn(plus) != "add" or not near(_scalar(graph, _other(plus, erf.outputs[0]) or ""), 1.0):
        return None
    p = plus.outputs[0]
    m1 = only_reader(p)
    if m1 is None or _fn(m1) != "mul":
        return None
    a = _other(m1, p)
    if a is None:
        return None
    if a == x:  # (x * (1 + erf)) * 0.5
        m2 = only_reader(m1.outputs[0])
        if m2 is None or _fn(m2) != "mul" or not near(_scalar(graph, _other(m2, m1.outputs[0]) or ""), 0.5):
            return None
        return [scale, erf, plus, m1, m2], x, m2.outputs[0]
    if near(_scalar(graph, a), 0.5):  # x * ((1 + erf) * 0.5)
        m2 = only_reader(m1.outputs[0])
        if m2 is None or _fn(m2) != "mul" or _other(m2, m1.outputs[0]) != x:
            return None
        return [scale, erf, plus, m1, m2], x, m2.outputs[0]
    half = made.get(a)  # (x * 0.5) * (1 + erf)
    if (half is not None and _fn(half) == "mul" and uses[a] == 1 and x in half.inputs
            and near(_scalar(graph, _other(half, x) or ""), 0.5)):
        return [scale, erf, plus, half, m1], x, m1.outputs[0]
    return None


# two-input elementwise ops that fuse with a tensor operand
BINARY = ("add", "sub", "mul", "div", "max", "min")


def _float_elementwise(graph: Graph, node: Node, arity: int) -> bool:
    """An elementwise op of ``arity`` float32 inputs and a float32 output."""
    if not isinstance(node.op, Elementwise) or len(node.outputs) != 1:
        return False
    ins = [i for i in node.inputs if i]
    spec = node.op.spec
    return (len(ins) == arity == len(node.inputs) and spec.typing == "same" and not spec.to_bool
            and all(graph.values[i].dtype == FLOAT32 for i in ins) and graph.values[node.outputs[0]].dtype == FLOAT32)


def _post_op(graph: Graph, node: Node, producer: Node, src: str) -> tuple[PostOp, str | None] | None:
    """How ``node`` fuses after ``producer`` (which makes ``src``): the PostOp and the
    operand it reads (None for a one-input op), or None if it does not fuse."""
    if _float_elementwise(graph, node, 1):
        return PostOp(node.op), None
    if not _float_elementwise(graph, node, 2) or node.op.fn not in BINARY or node.inputs[0] == node.inputs[1]:
        return None
    left = node.inputs[0] == src
    other = graph.values[node.inputs[1] if left else node.inputs[0]]
    y = graph.values[src]
    if tuple(graph.values[node.outputs[0]].shape) != tuple(y.shape):
        return None  # the GEMM's value would broadcast
    if other.const is not None and other.const.size == 1:
        return PostOp(node.op, "const", left, float(other.const.reshape(-1)[0])), None
    if not hasattr(producer.op, "operands_at"):
        return None  # no tensor operands after an elementwise op
    if tuple(other.shape) == tuple(y.shape):
        return PostOp(node.op, "full", left), other.name
    # one value per column (MatMul's bias): [N] or [1, ..., 1, N]
    if (not isinstance(producer.op, Conv) and other.rank >= 1 and other.shape[-1] == y.shape[-1]
            and all(d == 1 for d in other.shape[:-1]) and other.rank <= y.rank):
        return PostOp(node.op, "row", left), other.name
    return None


def _fuse(graph: Graph, nodes: list[Node], uses: Counter) -> list[Node]:
    out: list[Node] = []
    producers: dict[str, Node] = {}  # output -> the fusable node that makes it
    for node in nodes:
        for r in regions(node):
            r.nodes = _fuse(graph, r.nodes, uses)
        fused = None
        for src in node.inputs[:2]:
            producer = producers.get(src)
            if producer is not None and uses[src] == 1:
                fused = _post_op(graph, node, producer, src)
                if fused is not None:
                    break
        if fused is not None:
            post, operand = fused
            producers.pop(src)
            # the producer moves here, after the operand's maker; nothing between read its output
            out.remove(producer)
            out.append(producer)
            inputs = list(producer.inputs)
            if operand is not None:
                inputs += [""] * (producer.op.operands_at - len(inputs)) + [operand]
            producer.op = replace(producer.op, post=producer.op.post + (post,))
            producer.inputs = inputs
            producer.outputs = [node.outputs[0]]
            graph.values[node.outputs[0]].producer = producer  # (reports name the node that makes it)
            producers[node.outputs[0]] = producer
            del graph.values[src]
            continue
        out.append(node)
        fusable = getattr(node.op, "fusable", None)
        if fusable is not None and len(node.outputs) == 1 and fusable(graph, node):
            producers[node.outputs[0]] = node
    return out
