"""Ops symwasm has no translation for but ONNX defines as functions (RMSNormalization,
SoftmaxCrossEntropyLoss, Attention...) import as their function's nodes. Each is checked on
both targets, at several bindings of its symbolic dims from one module, against
onnx.reference (which runs its own implementation of the op, not the function)."""
import numpy as np
import pytest
from onnx import helper, parser

from toolkit.compiler import compile_model
from toolkit.ir.graph import CompileError
from util import check_model, make_model, rand, reference, vinfo


def test_rms_normalization(target):
    rng = np.random.default_rng(0)
    m = make_model([helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=-1, epsilon=1e-5)],
                   [vinfo("x", np.float32, ["b", "t", 8]), vinfo("s", np.float32, [8])],
                   [vinfo("y", np.float32, None)], opset=23)
    check_model(m, target, [{"x": rand(rng, (b, t, 8)), "s": rand(rng, (8,))} for b, t in [(1, 3), (2, 5), (3, 1)]],
                rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_softmax_cross_entropy_loss(reduction, target):
    rng = np.random.default_rng(1)
    m = make_model([helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t"], ["loss"], reduction=reduction)],
                   [vinfo("x", np.float32, ["n", 5]), vinfo("t", np.int64, ["n"])],
                   [vinfo("loss", np.float32, None)], opset=13)
    check_model(m, target, [{"x": rand(rng, (n, 5)), "t": rng.integers(0, 5, n).astype(np.int64)} for n in (1, 4, 9)],
                rtol=1e-4, atol=1e-5)


def test_mean_variance_normalization(target):
    rng = np.random.default_rng(2)
    m = make_model([helper.make_node("MeanVarianceNormalization", ["x"], ["y"], axes=[0, 2, 3])],
                   [vinfo("x", np.float32, ["n", 3, "h", 2])], [vinfo("y", np.float32, None)], opset=13)
    check_model(m, target, [{"x": rand(rng, (n, 3, h, 2))} for n, h in [(2, 2), (3, 1), (1, 4)]],
                rtol=1e-4, atol=1e-5)


def test_attention_gqa_symbolic_sequence(target):
    """Attention-23 with grouped heads (4 query heads, 2 key/value heads) and a causal mask."""
    rng = np.random.default_rng(3)
    m = make_model([helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=1)],
                   [vinfo("q", np.float32, ["b", 4, "s", 8]), vinfo("k", np.float32, ["b", 2, "s", 8]),
                    vinfo("v", np.float32, ["b", 2, "s", 8])],
                   [vinfo("y", np.float32, None)], opset=23)
    check_model(m, target, [{"q": rand(rng, (b, 4, s, 8)), "k": rand(rng, (b, 2, s, 8)),
                             "v": rand(rng, (b, 2, s, 8))} for b, s in [(1, 3), (2, 6)]], rtol=1e-4, atol=1e-5)


def test_error_inside_a_function_names_the_node(tmp_path):
    """A node of the function that cannot compile is reported under the node the user wrote."""
    m = make_model([helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=5, name="rms")],
                   [vinfo("x", np.float32, ["n", 4]), vinfo("s", np.float32, [4])],
                   [vinfo("y", np.float32, None)], opset=23)
    with pytest.raises(CompileError) as e:
        compile_model(m, tmp_path / "m.wasm")
    assert "node 'rms' (RMSNormalization)" in str(e.value)


def _linear_attention_feeds(rng, b: int, t: int) -> dict:
    h_q, h_kv, d_k, d_v = 4, 2, 4, 3
    key = rand(rng, (b, t, h_kv, d_k))
    key /= np.linalg.norm(key, axis=-1, keepdims=True)  # the delta rule is stable for unit keys
    return {"q": rand(rng, (b, t, h_q * d_k)), "k": key.reshape(b, t, h_kv * d_k), "v": rand(rng, (b, t, h_kv * d_v)),
            "past": rand(rng, (b, h_kv, d_k, d_v), lo=-1, hi=1),
            "decay": rand(rng, (b, t, h_kv * d_k), lo=-0.3, hi=0), "beta": rand(rng, (b, t, h_kv), lo=0, hi=1)}


def test_linear_attention_symbolic_sequence(target):
    """LinearAttention-27 (gated delta rule, grouped heads, a past state): its function runs
    the recurrence as a Scan whose body reads values of the function (a constant, the scale),
    so they must keep their expanded names inside it. The model's own output is called
    'state_out', as a value of that body is: the body's values live under the node's name."""
    rng = np.random.default_rng(4)
    m = make_model([helper.make_node("LinearAttention", ["q", "k", "v", "past", "decay", "beta"], ["y", "state_out"],
                                     q_num_heads=4, kv_num_heads=2, name="la")],
                   [vinfo("q", np.float32, ["b", "t", 16]), vinfo("k", np.float32, ["b", "t", 8]),
                    vinfo("v", np.float32, ["b", "t", 6]), vinfo("past", np.float32, ["b", 2, 4, 3]),
                    vinfo("decay", np.float32, ["b", "t", 8]), vinfo("beta", np.float32, ["b", "t", 2])],
                   [vinfo("y", np.float32, None), vinfo("state_out", np.float32, None)], opset=27)
    check_model(m, target, [_linear_attention_feeds(rng, b, t) for b, t in [(1, 3), (2, 7)]], rtol=1e-4, atol=1e-5)


# A function whose Loop body (and the If nested in it) read the function's values (two, xs),
# shadow one of them (the body's carried input is called x, as the function's input is) and
# refer to the function's attribute (@scale). It is written for opset 12, and so is its
# body: Unsqueeze and Squeeze take their axes as attributes there (as inputs from opset 13).
# The Loop has a condition (always true) because onnx.reference runs no iteration without one.
CUSTOM = parser.parse_function('''
<domain: "local", opset_import: ["" : 12]>
Custom <scale> (x, n) => (y, trace)
{
   two = Constant <value_float: float = 2.0> ()
   one = Constant <value_int: int = 1> ()
   go = Constant <value: tensor = bool {1}> ()
   xs = Mul (x, two)
   y, trace = Loop (n, go, x) <body: graph = body (int64 i, bool c, float[N] x) => (bool c_out, float[N] x_out,
                                                                                      float[N] item) {
      c_out = Identity (c)
      s = Constant <value_float: float = @scale> ()
      sx = Mul (x, s)
      row = Unsqueeze <axes: ints = [0]> (sx)
      flat = Squeeze <axes: ints = [0]> (row)
      x_out = Add (flat, xs)
      later = Greater (i, one)
      item = If (later) <then_branch: graph = then_g () => (float[N] t) { t = Sub (x_out, two) },
                         else_branch: graph = else_g () => (float[N] e) { e = Mul (x, xs) }>
   }>
}
''')


def test_function_subgraph_reads_outer_values(target, monkeypatch):
    """Subgraphs inside a function body: names they do not define are the function's
    (renamed with it), names they define shadow the function's, and attribute references
    inside them take the node's attributes. The importer expands only the standard ops'
    functions, and LinearAttention is the one of those with a subgraph that symwasm does
    not translate itself: here its body is replaced by the hand-made one. The reference
    runs the same function as a model-local function in onnx.reference."""
    from toolkit.frontend.onnx import importer

    monkeypatch.setattr(importer, "_function_body", lambda graph, n, opset, label: (CUSTOM, 12))
    inputs = [vinfo("x", np.float32, ["m"]), vinfo("n", np.int64, [])]
    outputs = [vinfo("y", np.float32, None), vinfo("trace", np.float32, None)]
    m = make_model([helper.make_node("LinearAttention", ["x", "n"], ["y", "trace"], scale=0.5, q_num_heads=1,
                                     kv_num_heads=1, name="custom")], inputs, outputs, opset=27)
    ref = make_model([helper.make_node("Custom", ["x", "n"], ["y", "trace"], domain="local", scale=0.5)],
                     inputs, outputs, opset=12)
    ref.opset_import.append(helper.make_opsetid("local", 1))
    ref.functions.append(CUSTOM)
    rng = np.random.default_rng(5)
    feeds = [{"x": rand(rng, (k,)), "n": np.array(k + 1, np.int64)} for k in (2, 5)]
    check_model(m, target, feeds, ref=lambda _, f: reference(ref, f))


# FlexAttention's score_mod: a causal mask built from the scores' own shape (so it follows
# the symbolic sequence length), as exporters write it
CAUSAL = parser.parse_graph('''
causal (float[B,H,L,S] scores) => (float[B,H,L,S] out)
<int64 zero = {0}, int64 one = {1}, int64 two = {2}, int64 three = {3}, int64[4] q_shape = {1,1,-1,1},
 int64[4] k_shape = {1,1,1,-1}, float neg = {-1e9}>
{
   shape = Shape (scores)
   l = Gather <axis = 0> (shape, two)
   s = Gather <axis = 0> (shape, three)
   qr = Range (zero, l, one)
   qi = Reshape (qr, q_shape)
   kr = Range (zero, s, one)
   ki = Reshape (kr, k_shape)
   keep = GreaterOrEqual (qi, ki)
   out = Where (keep, scores, neg)
}
''')
HALVE = parser.parse_graph('''
halve (float[B,H,L,S] p) => (float[B,H,L,S] q) <float half = {0.5}> { q = Mul (p, half) }
''')


def _flex_model(**attrs):
    m = make_model([helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain="ai.onnx.preview", name="fa",
                                     **attrs)],
                   [vinfo("q", np.float32, ["b", 4, "s", 8]), vinfo("k", np.float32, ["b", 2, "s", 8]),
                    vinfo("v", np.float32, ["b", 2, "s", 5])], [vinfo("y", np.float32, None)], opset=26)
    m.opset_import.append(helper.make_opsetid("ai.onnx.preview", 1))
    return m


@pytest.mark.parametrize("attrs", [{}, dict(score_mod=CAUSAL, prob_mod=HALVE, scale=0.3)], ids=["plain", "mods"])
def test_flex_attention_symbolic_sequence(attrs, target):
    """FlexAttention (domain ai.onnx.preview) imports as its context-dependent ONNX function,
    which inlines the node's score_mod and prob_mod subgraphs; grouped heads (4 query, 2
    key/value) and a value head size of its own."""
    rng = np.random.default_rng(6)
    check_model(_flex_model(**attrs), target,
                [{"q": rand(rng, (b, 4, s, 8)), "k": rand(rng, (b, 2, s, 8)), "v": rand(rng, (b, 2, s, 5))}
                 for b, s in [(1, 3), (2, 6)]], rtol=1e-4, atol=1e-5)


def test_other_domains_refused(tmp_path):
    """Of the other domains only ai.onnx.preview ops with an ONNX function import, and only
    at a version of the domain the model imports."""
    m = _flex_model()
    del m.opset_import[1]
    with pytest.raises(CompileError, match=r"^node 'fa' \(FlexAttention\): the model imports no version of domain "
                                           r"'ai.onnx.preview'$"):
        compile_model(m, tmp_path / "m.wasm")
    m = _flex_model()
    m.graph.node[0].op_type = "Flex"
    with pytest.raises(CompileError, match=r"^node 'fa' \(Flex\): unsupported op 'ai.onnx.preview.Flex' \(there is "
                                           r"none at version 1 of the domain\)$"):
        compile_model(m, tmp_path / "m.wasm")
    m = _flex_model()
    m.graph.node[0].domain = "com.microsoft"  # imported since, as onnxruntime's contrib domain, which lacks it
    with pytest.raises(CompileError, match=r"^node 'fa' \(FlexAttention\): unsupported op 'FlexAttention' of domain "
                                           r"'com.microsoft'; symwasm implements these of it: "):
        compile_model(m, tmp_path / "m.wasm")


def test_preview_op_without_function_refused(tmp_path, monkeypatch):
    """A preview op ONNX defines no function for (none exists today: FlexAttention's body is
    taken away here) is refused by name."""
    from toolkit.frontend.onnx import importer

    monkeypatch.setattr(importer, "_function_body", lambda graph, n, opset, label: None)
    with pytest.raises(CompileError, match=r"^node 'fa' \(FlexAttention\): ai.onnx.preview.FlexAttention-1 is not "
                                           r"supported: symwasm imports the ops of domain 'ai.onnx.preview' that "
                                           r"ONNX defines by a function, and it has none$"):
        compile_model(_flex_model(), tmp_path / "m.wasm")
