"""Convolution through the GEMM microkernel (toolkit/codegen/conv.py build_conv2d_gemm,
im2col.Im2col) and elementwise ops fused into GEMM epilogues (toolkit/passes/fuse.py), on
both targets against onnx.reference (or numpy in float64), one module per model run at
several bindings of its symbolic dims.

The conv cases reach each path of the patch packing: a panel of pixels inside one output
row (packed by vectors) and one that wraps to the next row or passes the last pixel
(gathered on wasm32, copied by segments natively); stride phases, dilation, asymmetric padding, no staging at all (no padding,
unit strides) and the pointwise view; the depth over several cache blocks of k; more
output channels than a block of rows; a batch of images. The fusion cases check both that
the graph fused (the activation node is gone, the producer's op carries it) and that the
values are right, including a depth of several k blocks, where applying the activation to
a block's partial sums would be wrong."""
import numpy as np
import pytest
from onnx import helper

from toolkit.codegen.gemm import PACKED_HERE_MC
from util import build, check_model, const, kernel_targets, lower_model, make_model, ort_reference, vinfo

F32 = np.float32


@pytest.fixture(params=kernel_targets())
def target(request) -> str:
    """The GEMM kernels run on both targets and in wasm32's relaxed-SIMD variant (FMA)."""
    return request.param


N = helper.make_node


def _rand(rng, shape):
    return rng.uniform(-1, 1, shape).astype(F32)


def _conv_model(c, m, k, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), bias=True, post=(), seed=0):
    rng = np.random.default_rng(seed)
    inits = [const("w", _rand(rng, (m, c) + k))] + ([const("b", _rand(rng, (m,)))] if bias else [])
    nodes = [N("Conv", ["x", "w"] + (["b"] if bias else []), ["t0"], kernel_shape=list(k), strides=list(strides),
               pads=list(pads), dilations=list(dilations))]
    for i, (op, attrs) in enumerate(post):
        nodes.append(N(op, [f"t{i}"], [f"t{i + 1}"], **attrs))
    nodes[-1].output[0] = "y"
    return make_model(nodes, [vinfo("x", F32, ["n", c, "h", "w"])], [vinfo("y", F32, None)], inits)


CONV_CASES = {
    # name: (channels in, out, kernel, strides, pads, dilations, bindings (n, h, w))
    "3x3_pad1": (3, 5, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), [(1, 9, 9), (2, 4, 13)]),
    # 7 pixels a row: every panel wraps rows (wasm32 gathers it, native copies it by segments
    # with a masked tail); 16 x 16: wasm32's 16-column panels fit in rows, AVX-512's 32 are two
    # whole-vector segments; 40 a row: panels in a row and panels that wrap, alternately
    "3x3_wrap": (4, 6, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), [(1, 7, 7), (1, 16, 16), (1, 3, 2), (1, 5, 40)]),
    "stride2_asym": (3, 7, (3, 3), (2, 2), (0, 1, 2, 1), (1, 1), [(1, 11, 12), (2, 6, 9)]),
    "stride_2x3_dil": (2, 4, (3, 2), (2, 3), (1, 2, 1, 0), (2, 3), [(1, 12, 17), (1, 9, 25)]),
    "7x7_stride2": (3, 8, (7, 7), (2, 2), (3, 3, 3, 3), (1, 1), [(1, 20, 20), (1, 33, 17)]),
    "no_staging": (3, 6, (3, 2), (1, 1), (0, 0, 0, 0), (1, 1), [(1, 6, 9), (2, 3, 2)]),
    "pointwise": (5, 9, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), [(1, 5, 5), (2, 1, 19)]),
    "pointwise_stride2": (5, 4, (1, 1), (2, 2), (0, 0, 0, 0), (1, 1), [(1, 9, 8), (1, 2, 2)]),
    # depth 40 * 9 = 360: two k blocks of 256, the second partial
    "deep": (40, 13, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), [(1, 6, 6), (1, 3, 10)]),
}


@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv_paths(target, case):
    c, m, k, strides, pads, dil, bindings = CONV_CASES[case]
    model = _conv_model(c, m, k, strides, pads, dil, seed=len(case))
    rng = np.random.default_rng(1)
    feeds = [{"x": _rand(rng, (n, c, h, w))} for n, h, w in bindings]
    check_model(model, target, feeds, rtol=1e-4, atol=1e-5)


def test_conv_more_channels_than_a_row_block(target):
    """More output channels than the rows the kernel packs B for at once: the patches are
    packed again for the second block of rows."""
    m = PACKED_HERE_MC + 9
    model = _conv_model(3, m, (3, 3), pads=(1, 1, 1, 1), bias=False)
    rng = np.random.default_rng(2)
    check_model(model, target, [{"x": _rand(rng, (1, 3, 5, 4))}, {"x": _rand(rng, (1, 3, 2, 9))}],
                rtol=1e-4, atol=1e-5)


def _ops(graph):
    return [type(n.op).__name__ for n in graph.nodes]


FUSED = [
    ("Relu", {}),
    ("Clip", {}),  # no bounds: the identity
    ("LeakyRelu", {"alpha": 0.1}),
    ("Sigmoid", {}),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
    ("Gelu", {}),
    ("Tanh", {}),
    ("Softplus", {}),
    ("Elu", {"alpha": 0.7}),
    ("Selu", {}),
    ("Softsign", {}),
    ("Floor", {}),
    ("Cos", {}),  # lane by lane
]


def test_conv_fuses_an_activation_chain(target):
    """Conv -> Relu -> Sigmoid -> LeakyRelu is one node, and right; a depth of two k blocks."""
    post = [("Relu", {}), ("Sigmoid", {}), ("LeakyRelu", {"alpha": 0.1})]
    model = _conv_model(30, 6, (3, 3), pads=(1, 1, 1, 1), post=post)
    graph, _, _ = lower_model(model, target)
    assert _ops(graph) == ["Conv"]
    assert [p.op.fn for p in graph.nodes[0].op.post] == ["relu", "sigmoid", "leaky_relu"]
    rng = np.random.default_rng(3)
    check_model(model, target, [{"x": _rand(rng, (1, 30, 5, 5))}, {"x": _rand(rng, (2, 30, 3, 8))}],
                rtol=1e-4, atol=1e-5)


def test_no_fusion_when_the_value_has_another_reader(target):
    """A Conv output that is also a graph output keeps its own buffer; the Relu stays."""
    rng = np.random.default_rng(4)
    model = make_model([N("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), N("Relu", ["c"], ["y"])],
                       [vinfo("x", F32, ["n", 2, "h", "w"])], [vinfo("c", F32, None), vinfo("y", F32, None)],
                       [const("w", _rand(rng, (3, 2, 3, 3)))])
    graph, _, _ = lower_model(model, target)
    assert _ops(graph) == ["Conv", "Elementwise"]
    check_model(model, target, [{"x": _rand(rng, (1, 2, 4, 5))}, {"x": _rand(rng, (1, 2, 7, 3))}],
                rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op,attrs", FUSED)
def test_matmul_fuses(target, op, attrs):
    """MatMul -> activation over a constant B (packed at compile time) and a run-time one,
    with K over two blocks, against onnxruntime."""
    rng = np.random.default_rng(5)
    k = 300
    for b_const in (True, False):
        inits = [const("b", _rand(rng, (k, 20)))] if b_const else []
        ins = [vinfo("a", F32, ["m", k])] + ([] if b_const else [vinfo("b", F32, [k, 20])])
        model = make_model([N("MatMul", ["a", "b"], ["t"]), N(op, ["t"], ["y"], **attrs)], ins,
                           [vinfo("y", F32, None)], inits, opset=20)
        graph, _, _ = lower_model(model, target)
        assert _ops(graph) == ["MatMul"], (b_const, _ops(graph))
        feeds = []
        for m in (1, 7, 13):
            f = {"a": _rand(rng, (m, k))}
            if not b_const:
                f["b"] = _rand(rng, (k, 20))
            feeds.append(f)
        check_model(model, target, feeds, rtol=1e-4, atol=1e-5, ref=ort_reference)


def test_gemm_epilogue(target):
    """Gemm's alpha, beta * C (a row of C broadcast over the rows) and a fused Relu in one
    epilogue, over three k blocks (the epilogue must only see whole sums), against numpy."""
    rng = np.random.default_rng(6)
    k, n = 600, 21
    w, c = _rand(rng, (n, k)), _rand(rng, (n,))
    model = make_model([N("Gemm", ["a", "w", "c"], ["t"], alpha=0.5, beta=2.0, transB=1), N("Relu", ["t"], ["y"])],
                       [vinfo("a", F32, ["m", k])], [vinfo("y", F32, None)], [const("w", w), const("c", c)])
    graph, _, _ = lower_model(model, target)
    assert _ops(graph) == ["Gemm"]
    mod = build(model, target)
    for m in (1, 6, 11):
        a = _rand(rng, (m, k))
        want = np.maximum(0.5 * (a.astype(np.float64) @ w.T.astype(np.float64)) + 2.0 * c, 0)
        np.testing.assert_allclose(mod.run({"a": a})["y"], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("group,bias", [(1, True), (1, False), (3, True)])
def test_batch_norm_folds_into_conv(target, group, bias):
    """Conv -> BatchNormalization -> Relu with constant parameters is one Conv node (the
    normalization folded into its weights and bias, the Relu into its epilogue on the GEMM
    route; a grouped Conv keeps its Relu), against onnxruntime."""
    rng = np.random.default_rng(7 + group)
    c, m = 6, 9
    inits = [const("w", _rand(rng, (m, c // group, 3, 3))), const("gamma", _rand(rng, (m,))),
             const("beta", _rand(rng, (m,))), const("mean", _rand(rng, (m,))),
             const("var", rng.uniform(0.2, 2, (m,)).astype(F32))] + ([const("b", _rand(rng, (m,)))] if bias else [])
    model = make_model([N("Conv", ["x", "w"] + (["b"] if bias else []), ["c"], pads=[1, 1, 1, 1], group=group),
                        N("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["n"], epsilon=1e-3),
                        N("Relu", ["n"], ["y"])],
                       [vinfo("x", F32, ["n", c, "h", "w"])], [vinfo("y", F32, None)], inits)
    graph, _, _ = lower_model(model, target)
    assert _ops(graph) == (["Conv"] if group == 1 else ["Conv", "Elementwise"])
    check_model(model, target, [{"x": _rand(rng, (1, c, 5, 6))}, {"x": _rand(rng, (2, c, 3, 9))}],
                rtol=1e-4, atol=1e-5, ref=ort_reference)


def test_batch_norm_with_runtime_parameters_is_not_folded(target):
    rng = np.random.default_rng(9)
    model = make_model([N("Conv", ["x", "w"], ["c"]), N("BatchNormalization", ["c", "g", "b", "mean", "var"], ["y"])],
                       [vinfo("x", F32, ["n", 2, "h", "w"]), vinfo("g", F32, [3])], [vinfo("y", F32, None)],
                       [const("w", _rand(rng, (3, 2, 1, 1))), const("b", _rand(rng, (3,))),
                        const("mean", _rand(rng, (3,))), const("var", rng.uniform(0.5, 1, (3,)).astype(F32))])
    graph, _, _ = lower_model(model, target)
    assert _ops(graph) == ["Conv", "BatchNorm"]
    check_model(model, target, [{"x": _rand(rng, (1, 2, 3, 4)), "g": _rand(rng, (3,))},
                                {"x": _rand(rng, (1, 2, 5, 1)), "g": _rand(rng, (3,))}],
                rtol=1e-4, atol=1e-5, ref=ort_reference)


def test_conv_fuses_a_residual_sum(target):
    """Conv -> Sum(., r) -> Relu, r a tensor of the output's shape made after the Conv (the
    fused node moves after it): one Conv node reading r at each output's position."""
    rng = np.random.default_rng(10)
    model = make_model([N("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), N("Neg", ["r0"], ["r"]),
                        N("Sum", ["c", "r"], ["s"]), N("Relu", ["s"], ["y"])],
                       [vinfo("x", F32, ["n", 6, "h", "w"]), vinfo("r0", F32, ["n", 5, "h", "w"])],
                       [vinfo("y", F32, None)], [const("w", _rand(rng, (5, 6, 3, 3))), const("b", _rand(rng, (5,)))])
    graph, _, _ = lower_model(model, target)
    assert _ops(graph) == ["Elementwise", "Conv"]
    assert [(p.op.fn, p.operand) for p in graph.nodes[1].op.post] == [("add", "full"), ("relu", "")]
    feeds = [{"x": _rand(rng, (n, 6, h, w)), "r0": _rand(rng, (n, 5, h, w))} for n, h, w in [(1, 4, 6), (2, 9, 3)]]
    check_model(model, target, feeds, rtol=1e-4, atol=1e-5)


def test_matmul_fuses_bias_and_residual(target):
    """MatMul -> Add(bias, .) -> Sub(r, .) -> Relu, bias [N] on the left and the residual
    on the left of a Sub (operand order kept), batched with a run-time B and with a
    constant B, against onnx.reference."""
    rng = np.random.default_rng(11)
    k, n = 270, 19
    for b_const in (True, False):
        inits = [const("bias", _rand(rng, (n,)))] + ([const("b", _rand(rng, (k, n)))] if b_const else [])
        ins = [vinfo("a", F32, ["s", "m", k]), vinfo("r", F32, ["s", "m", n])]
        if not b_const:
            ins.append(vinfo("b", F32, ["s", k, n]))
        model = make_model([N("MatMul", ["a", "b"], ["t"]), N("Add", ["bias", "t"], ["u"]), N("Sub", ["r", "u"], ["v"]),
                            N("Relu", ["v"], ["y"])], ins, [vinfo("y", F32, None)], inits)
        graph, _, _ = lower_model(model, target)
        assert _ops(graph) == ["MatMul"], (b_const, _ops(graph))
        assert [(p.op.fn, p.operand, p.left) for p in graph.nodes[0].op.post] == [
            ("add", "row", False), ("sub", "full", False), ("relu", "", True)]
        feeds = []
        for s_, m in ((1, 1), (2, 7), (3, 13)):
            f = {"a": _rand(rng, (s_, m, k)), "r": _rand(rng, (s_, m, n))}
            if not b_const:
                f["b"] = _rand(rng, (s_, k, n))
            feeds.append(f)
        check_model(model, target, feeds, rtol=1e-4, atol=1e-4)


def test_no_fusion_of_a_broadcasting_operand(target):
    """Add of a [M, 1] column to a MatMul's [M, N] output is not a per-column bias: not
    fused, and right."""
    rng = np.random.default_rng(12)
    model = make_model([N("MatMul", ["a", "b"], ["t"]), N("Add", ["t", "c"], ["y"])],
                       [vinfo("a", F32, [6, 10]), vinfo("c", F32, [6, 1])], [vinfo("y", F32, None)],
                       [const("b", _rand(rng, (10, 9)))])
    graph, _, _ = lower_model(model, target)
    assert _ops(graph) == ["MatMul", "Elementwise"]
    check_model(model, target, [{"a": _rand(rng, (6, 10)), "c": _rand(rng, (6, 1))}], rtol=1e-4, atol=1e-5)


def test_elementwise_chain_runs_in_one_loop(target):
    """Add -> Exp -> Mul(2) -> Relu -> Sub(1 - .): one elementwise node, broadcasting kept."""
    rng = np.random.default_rng(13)
    model = make_model([N("Add", ["a", "b"], ["s"]), N("Exp", ["s"], ["e"]), N("Mul", ["e", "two"], ["m"]),
                        N("Relu", ["m"], ["r"]), N("Sub", ["one", "r"], ["y"])],
                       [vinfo("a", F32, ["n", 4]), vinfo("b", F32, [4])], [vinfo("y", F32, None)],
                       [const("two", np.array(2.0, F32)), const("one", np.array([1.0], F32))])
    graph, _, _ = lower_model(model, target)
    assert _ops(graph) == ["Elementwise"]
    assert str(graph.nodes[0].op) == "add+exp+mul(., 2)+relu+sub(1, .)"
    check_model(model, target, [{"a": _rand(rng, (n, 4)), "b": _rand(rng, (4,))} for n in (1, 5, 33)],
                rtol=1e-5, atol=1e-6)


def _gelu_nodes(variant):
    """The erf-form GELU of x as exporters write it, in one of four arrangements."""
    scale = (N("Div", ["x", "sqrt2"], ["d"]) if variant != "mul_inv" else N("Mul", ["inv_sqrt2", "x"], ["d"]))
    nodes = [scale, N("Erf", ["d"], ["e"]), N("Add", ["one", "e"], ["p"])]
    if variant in ("half_last", "mul_inv"):
        nodes += [N("Mul", ["x", "p"], ["m"]), N("Mul", ["m", "half"], ["g"])]
    elif variant == "half_inner":
        nodes += [N("Mul", ["p", "half"], ["m"]), N("Mul", ["x", "m"], ["g"])]
    else:  # half_first
        nodes += [N("Mul", ["x", "half"], ["h"]), N("Mul", ["h", "p"], ["g"])]
    return nodes


GELU_CONSTS = [const("sqrt2", np.array(2 ** 0.5, F32)), const("inv_sqrt2", np.array(0.5 ** 0.5, F32)),
               const("one", np.array(1.0, F32)), const("half", np.array(0.5, F32))]


@pytest.mark.parametrize("variant", ["half_last", "half_inner", "half_first", "mul_inv"])
def test_gelu_pattern_fuses_into_matmul(target, variant):
    """MatMul -> Add(bias) -> the five-node erf GELU: one Gelu, fused into the MatMul."""
    rng = np.random.default_rng(14)
    nodes = [N("MatMul", ["a", "w"], ["t"]), N("Add", ["t", "bias"], ["x"])] + _gelu_nodes(variant)
    nodes[-1].output[0] = "y"
    model = make_model(nodes, [vinfo("a", F32, ["m", 12])], [vinfo("y", F32, None)],
                       [const("w", _rand(rng, (12, 10)) * 3), const("bias", _rand(rng, (10,)))] + GELU_CONSTS)
    graph, _, _ = lower_model(model, target)
    assert _ops(graph) == ["MatMul"]
    assert [str(p) for p in graph.nodes[0].op.post] == ["add(., row)", "gelu(False,)"]
    check_model(model, target, [{"a": _rand(rng, (m, 12))} for m in (1, 9)], rtol=1e-5, atol=1e-5)


def test_gelu_pattern_with_a_shared_intermediate_is_left_alone(target):
    """The erf's output is also a graph output: the five nodes stay (and are right)."""
    rng = np.random.default_rng(15)
    model = make_model(_gelu_nodes("half_last"), [vinfo("x", F32, ["n"])],
                       [vinfo("g", F32, None), vinfo("e", F32, None)], GELU_CONSTS)
    graph, _, _ = lower_model(model, target)
    assert not any(str(n.op).startswith("gelu") for n in graph.nodes)
    check_model(model, target, [{"x": _rand(rng, (n,)) * 3} for n in (1, 17)], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("gate", ["Sigmoid", "HardSigmoid"])
def test_swish_pattern_fuses_into_conv(target, gate):
    """Conv -> gate -> Mul(x, gate(x)) in either operand order: one swish (hard_swish)
    fused into the Conv, as EfficientNet's SiLU and opset-13 MobileNetV3's hard-swish are
    exported; computed as the two nodes compute it."""
    rng = np.random.default_rng(21)
    attrs = dict(alpha=1 / 6, beta=0.5) if gate == "HardSigmoid" else {}
    for order in (["x", "g"], ["g", "x"]):
        model = make_model([N("Conv", ["a", "w"], ["x"], pads=[1, 1, 1, 1]), N(gate, ["x"], ["g"], **attrs),
                            N("Mul", order, ["y"])],
                           [vinfo("a", F32, ["n", 6, "h", "w"])], [vinfo("y", F32, None)],
                           [const("w", _rand(rng, (8, 6, 3, 3)))])
        graph, _, _ = lower_model(model, target)
        assert _ops(graph) == ["Conv"], _ops(graph)
        want = "swish(1.0,)" if gate == "Sigmoid" else "hard_swish"
        assert [str(p) for p in graph.nodes[0].op.post] == [want]
        check_model(model, target, [{"a": _rand(rng, (n, 6, 5, 6)) * 3} for n in (1, 2)], rtol=1e-5, atol=1e-6)


def test_swish_pattern_left_alone(target):
    """A gate read elsewhere, a Mul by something else, HardSigmoid with other constants and a
    broadcasting Mul keep their nodes (and are right)."""
    rng = np.random.default_rng(22)
    nodes = [N("Sigmoid", ["x"], ["g"]), N("Mul", ["x", "g"], ["y1"]),  # g is also an output
             N("Sigmoid", ["x"], ["g2"]), N("Mul", ["z", "g2"], ["y2"]),  # not x
             N("HardSigmoid", ["x"], ["h"], alpha=0.2, beta=0.5), N("Mul", ["h", "x"], ["y3"]),
             N("Sigmoid", ["b"], ["g4"]), N("Mul", ["x", "g4"], ["y4"]),
             N("Sigmoid", ["b"], ["g5"]), N("Mul", ["b", "g5"], ["y5"])]  # b broadcasts in y4 only
    model = make_model(nodes, [vinfo("x", F32, ["n", 4]), vinfo("z", F32, ["n", 4]), vinfo("b", F32, [4])],
                       [vinfo(o, F32, None) for o in ("y1", "g", "y2", "y3", "y4", "y5")])
    graph, _, _ = lower_model(model, target)
    fns = sorted(str(n.op) for n in graph.nodes)
    assert fns.count("swish(1.0,)") == 1 and "hard_swish" not in fns, fns  # only y5
    check_model(model, target, [{"x": _rand(rng, (n, 4)) * 3, "z": _rand(rng, (n, 4)), "b": _rand(rng, (4,))}
                                for n in (1, 3)], rtol=1e-5, atol=1e-6)

