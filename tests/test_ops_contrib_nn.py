"""onnxruntime's transformer-fusion contrib ops (com.microsoft) on both targets against
onnxruntime's CPU kernels: each model compiled once and run at two or more bindings of its
symbolic dims (batch, seq)."""
import numpy as np
import pytest
from onnx import helper

from toolkit.compiler import compile_model
from toolkit.ir.graph import CompileError
from util import _TMP, check_model, const, ort_reference, rand, vinfo

F32 = np.float32
I32 = np.int32
I64 = np.int64
MS = "com.microsoft"
SEQS = [dict(b=2, s=5), dict(b=1, s=1), dict(b=3, s=17)]


def ms_model(nodes, inputs, outputs, initializers=(), opset=17):
    g = helper.make_graph(list(nodes), "test", list(inputs), list(outputs), initializer=list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    return m


def node(op, inputs, outputs, domain=MS, **attrs):
    return helper.make_node(op, inputs, outputs, name="n", domain=domain, **attrs)


def shape_of(shape, binding):
    return [binding.get(d, d) for d in shape]


def check(model, target, feeds, rtol=1e-5, atol=1e-5):
    return check_model(model, target, feeds, rtol=rtol, atol=atol, ref=ort_reference)


def run_op(op, inputs, target, outputs=("y",), initializers=(), bindings=SEQS, seed=0, rtol=1e-5, atol=1e-5,
           domain=MS, out_types=None, **attrs):
    """One ``op`` node; ``inputs``: (name, dtype, symbolic shape) graph inputs (a name "" is
    an absent optional input), then the initializers."""
    rng = np.random.default_rng(seed)
    names = [n for n, _, _ in inputs] + [i.name for i in initializers]
    model = ms_model([node(op, names, list(outputs), domain, **attrs)],
                     [vinfo(n, dt, list(s)) for n, dt, s in inputs if n],
                     [vinfo(o, (out_types or {}).get(o, F32), None) for o in outputs if o], initializers)
    feeds = [{n: rand(rng, shape_of(s, b), dt) for n, dt, s in inputs if n} for b in bindings]
    return check(model, target, feeds, rtol, atol)


def weight(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(F32)


# ----------------------------------------------------------------------------- Gelu family, BiasAdd


def test_gelu(target):
    run_op("Gelu", [("x", F32, ["b", "s", 8])], target)


@pytest.mark.parametrize("with_bias", [False, True])
def test_fast_gelu(with_bias, target):
    rng = np.random.default_rng(1)
    inits = [const("bias", weight(rng, 8))] if with_bias else []
    run_op("FastGelu", [("x", F32, ["b", "s", 8])], target, initializers=inits)


def test_bias_gelu(target):
    run_op("BiasGelu", [("x", F32, ["b", "s", 12])], target, initializers=[const("bias", weight(np.random.default_rng(2), 12))])


@pytest.mark.parametrize("alpha", [None, 1.0, -0.5])
def test_quick_gelu(alpha, target):
    attrs = {} if alpha is None else {"alpha": alpha}
    run_op("QuickGelu", [("x", F32, ["b", "s", 7])], target, **attrs)


def test_bias_add(target):
    """onnxruntime has BiasAdd for CUDA and ROCm only: numpy is the reference."""
    rng = np.random.default_rng(3)
    model = ms_model([node("BiasAdd", ["x", "bias", "skip"], ["y"])],
                     [vinfo("x", F32, ["b", "s", 8]), vinfo("bias", F32, [8]), vinfo("skip", F32, ["b", "s", 8])],
                     [vinfo("y", F32, None)])
    feeds = [{"x": rand(rng, (b, s, 8)), "bias": rand(rng, (8,)), "skip": rand(rng, (b, s, 8))}
             for b, s in [(2, 5), (1, 1), (3, 17)]]
    check_model(model, target, feeds, rtol=1e-6, atol=1e-6, ref=lambda m, f: {"y": f["x"] + f["bias"] + f["skip"]})


# ----------------------------------------------------------------------------- FusedMatMul

FUSED_MATMUL = [
    # (a shape, b shape, attributes)
    (["b", "s", 6], [6, 5], {}),
    (["b", "s", 6], [5, 6], dict(transB=1, alpha=0.125)),
    (["b", 6, "s"], ["b", 6, 4], dict(transA=1)),
    (["b", 6, "s"], ["b", 5, 6], dict(transA=1, transB=1, alpha=-2.0)),
    (["s", "b", 6], ["b", 6, 3], dict(transBatchA=1)),
    (["s", "b", 6], ["b", 3, 6], dict(transBatchA=1, transB=1)),
    (["b", "s", 6], [6, "b", 4], dict(transBatchB=1)),
    (["b", "s", 6], [4, "b", 6], dict(transBatchB=1, transB=1, alpha=0.5)),
    ([6, "b", "s"], ["b", 6, 2], dict(transBatchA=1, transA=1)),
    ([2, "s", 3, 6], [6, "s", 3, 4], dict(transBatchA=1, transBatchB=1)),
]


@pytest.mark.parametrize("a_shape,b_shape,attrs", FUSED_MATMUL,
                         ids=[",".join(f"{k}={v}" for k, v in a.items()) or "plain" for _, _, a in FUSED_MATMUL])
def test_fused_matmul(a_shape, b_shape, attrs, target):
    run_op("FusedMatMul", [("a", F32, a_shape), ("b", F32, b_shape)], target, **attrs)


# ----------------------------------------------------------------------------- layer norms

HIDDEN = 16


@pytest.mark.parametrize("beta,bias", [(True, True), (False, False), (True, False), (False, True)])
@pytest.mark.parametrize("outputs", [("y",), ("y", "mean", "inv_std", "sum"), ("y", "", "", "sum"), ("y", "mean")])
def test_skip_layer_norm(beta, bias, outputs, target):
    rng = np.random.default_rng(3)
    inits = [const("gamma", weight(rng, HIDDEN)), const("beta", weight(rng, HIDDEN)), const("bias", weight(rng, HIDDEN))]
    names = ["x", "skip", "gamma", "beta" if beta else "", "bias" if bias else ""]
    model = ms_model([node("SkipLayerNormalization", names, list(outputs), epsilon=1e-5)],
                     [vinfo("x", F32, ["b", "s", HIDDEN]), vinfo("skip", F32, ["b", "s", HIDDEN])],
                     [vinfo(o, F32, None) for o in outputs if o], inits)
    check(model, target, [{"x": rand(rng, (b["b"], b["s"], HIDDEN)), "skip": rand(rng, (b["b"], b["s"], HIDDEN))}
                          for b in SEQS])


@pytest.mark.parametrize("skip_shape", [["s", HIDDEN], [1, "s", HIDDEN]])
def test_skip_layer_norm_broadcast_skip(skip_shape, target):
    """skip shared by the batch, as onnxruntime allows; epsilon its default."""
    rng = np.random.default_rng(4)
    run_op("SkipLayerNormalization", [("x", F32, ["b", "s", HIDDEN]), ("skip", F32, skip_shape)], target,
           initializers=[const("gamma", weight(rng, HIDDEN)), const("beta", weight(rng, HIDDEN))])


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("outputs", [("y",), ("y", "mean", "inv_std", "sum"), ("y", "", "inv_std")])
def test_skip_simplified_layer_norm(bias, outputs, target):
    rng = np.random.default_rng(5)
    inits = [const("gamma", weight(rng, HIDDEN))] + ([const("bias", weight(rng, HIDDEN))] if bias else [])
    run_op("SkipSimplifiedLayerNormalization", [("x", F32, ["b", "s", HIDDEN]), ("skip", F32, ["b", "s", HIDDEN])],
           target, outputs=outputs, initializers=inits, epsilon=1e-6)


@pytest.mark.parametrize("axis,outputs", [(None, ("y",)), (-1, ("y", "inv_std")), (1, ("y", "inv_std")),
                                          (2, ("y", "inv_std"))])
def test_simplified_layer_norm(axis, outputs, target):
    """onnxruntime's RMS norm, written into the default domain (it has no com.microsoft one)."""
    rng = np.random.default_rng(6)
    x_shape = ["b", "s", HIDDEN]
    scale_shape = {None: [HIDDEN], -1: [HIDDEN], 2: [HIDDEN], 1: [1, HIDDEN]}[axis]
    attrs = {} if axis is None else {"axis": axis, "epsilon": 1e-3}
    run_op("SimplifiedLayerNormalization", [("x", F32, x_shape)], target, outputs=outputs, domain="",
           initializers=[const("scale", weight(rng, *scale_shape))],
           bindings=[dict(b=2, s=5), dict(b=1, s=1), dict(b=3, s=17)] if axis != 1 else [dict(b=2, s=1), dict(b=3, s=1)],
           **attrs)


# ----------------------------------------------------------------------------- EmbedLayerNormalization

VOCAB, POSITIONS, SEGMENTS = 30, 24, 2


def _embed_model(segments: bool, mask: bool, position_ids: str | None, outputs, rng):
    inits = [const("word", weight(rng, VOCAB, HIDDEN)), const("pos", weight(rng, POSITIONS, HIDDEN)),
             const("seg", weight(rng, SEGMENTS, HIDDEN)), const("gamma", weight(rng, HIDDEN)),
             const("beta", weight(rng, HIDDEN))]
    names = ["ids", "segs" if segments else "", "word", "pos", "seg" if segments else "", "gamma", "beta",
             "mask" if mask else "", "pos_ids" if position_ids else ""]
    while not names[-1]:
        names.pop()
    inputs = [vinfo("ids", I32, ["b", "s"])]
    if segments:
        inputs.append(vinfo("segs", I32, ["b", "s"]))
    if mask:
        inputs.append(vinfo("mask", I32, ["b", "s"]))
    if position_ids:
        inputs.append(vinfo("pos_ids", I32, ["b" if position_ids == "batch" else 1, "s"]))
    outs = [vinfo(o, I32 if o == "mask_index" else F32, None) for o in outputs if o]
    return ms_model([node("EmbedLayerNormalization", names, list(outputs), epsilon=1e-5)], inputs, outs, inits)


def _embed_feeds(rng, b, s, segments, mask, position_ids):
    feeds = {"ids": rng.integers(0, VOCAB, (b, s)).astype(I32)}
    if segments:
        feeds["segs"] = rng.integers(0, SEGMENTS, (b, s)).astype(I32)
    if mask:
        feeds["mask"] = rng.integers(0, 3, (b, s)).astype(I32)  # 2 counts as masked too
    if position_ids:
        feeds["pos_ids"] = rng.integers(0, POSITIONS, (b if position_ids == "batch" else 1, s)).astype(I32)
    return feeds


@pytest.mark.parametrize("segments,mask,position_ids,outputs", [
    (True, True, None, ("y", "mask_index")),
    (False, False, None, ("y", "mask_index")),
    (True, False, None, ("y", "mask_index", "sum")),
    (False, True, "batch", ("y", "mask_index", "sum")),
    (True, True, "shared", ("y", "", "sum")),
])
def test_embed_layer_norm(segments, mask, position_ids, outputs, target):
    rng = np.random.default_rng(7)
    model = _embed_model(segments, mask, position_ids, outputs, rng)
    check(model, target, [_embed_feeds(rng, b, s, segments, mask, position_ids) for b, s in [(2, 5), (1, 1), (3, 24)]])


def test_embed_layer_norm_id_out_of_range_fails_the_run(target):
    import wasm_runtime
    from util import build
    rng = np.random.default_rng(18)
    m = build(_embed_model(True, False, None, ("y", "mask_index"), rng), target)
    feeds = _embed_feeds(rng, 2, 3, True, False, None)
    for name, bad, match in (("ids", -1, r"input_ids 'ids' has an id below 0"),
                             ("ids", VOCAB, r"index 30 is out of range for axis 0 of size 30"),
                             ("segs", -2, r"segment_ids 'segs' has an id below 0")):
        wrong = dict(feeds, **{name: feeds[name].copy()})
        wrong[name][1, 2] = bad
        with pytest.raises(wasm_runtime.ModelError, match=r"node 'n' \(EmbedLayerNormalization\): .*" + match):
            m.run(wrong)


# ----------------------------------------------------------------------------- refusals


def _refused(model, match):
    with pytest.raises(CompileError, match=match):
        compile_model(model, _TMP / "refused.wasm")


def test_fused_matmul_trans_batch_rank2_refused():
    model = ms_model([node("FusedMatMul", ["a", "b"], ["y"], transBatchA=1)],
                     [vinfo("a", F32, ["s", 6]), vinfo("b", F32, [6, 4])], [vinfo("y", F32, None)])
    _refused(model, r"node 'n' \(FusedMatMul\): transBatchA needs an input of rank 3 or more")


def test_simplified_layer_norm_stash_type_refused():
    model = ms_model([node("SimplifiedLayerNormalization", ["x", "g"], ["y"], domain="", stash_type=0)],
                     [vinfo("x", F32, ["s", 4]), vinfo("g", F32, [4])], [vinfo("y", F32, None)])
    _refused(model, r"node 'n' \(SimplifiedLayerNormalization\): stash_type 0 is not supported")


# ----------------------------------------------------------------------------- RotaryEmbedding

MAX_POS = 40


def _rotary_caches(rng, half):
    angles = rng.uniform(0, 6.3, (MAX_POS, half))
    return const("cos", np.cos(angles).astype(F32)), const("sin", np.sin(angles).astype(F32))


ROTARY = [
    # (input shape, position_ids form, attributes, cos half width)
    (["b", "s", 32], "batch", {}, 4),  # 4 heads of 8, all rotated
    (["b", "s", 32], "batch", dict(interleaved=1), 4),
    (["b", "s", 32], "offset", {}, 4),
    (["b", "s", 32], "offset", dict(interleaved=1), 4),
    (["b", "s", 32], "batch", dict(num_heads=2, rotary_embedding_dim=6), 3),  # heads of 16, 6 rotated
    (["b", "s", 32], "batch", dict(num_heads=2, rotary_embedding_dim=6, interleaved=1), 3),
    (["b", 2, "s", 16], "batch", {}, 8),
    (["b", 2, "s", 16], "offset", dict(interleaved=1), 8),
    (["b", 3, "s", 16], "batch", dict(num_heads=3, rotary_embedding_dim=4), 2),
    (["b", 3, "s", 16], "offset", dict(num_heads=3, rotary_embedding_dim=4, interleaved=1), 2),
]


@pytest.mark.parametrize("x_shape,positions,attrs,half", ROTARY,
                         ids=[f"{len(x)}d-{p}-" + (",".join(f"{k}={v}" for k, v in a.items()) or "plain")
                              for x, p, a, _ in ROTARY])
def test_rotary_embedding(x_shape, positions, attrs, half, target):
    rng = np.random.default_rng(8)
    cos, sin = _rotary_caches(rng, half)
    pos_shape = ["b", "s"] if positions == "batch" else [1]
    model = ms_model([node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], **attrs)],
                     [vinfo("x", F32, x_shape), vinfo("pos", I64, pos_shape)], [vinfo("y", F32, None)], [cos, sin])
    feeds = []
    for b in [dict(b=2, s=5), dict(b=1, s=1), dict(b=3, s=17)]:
        s = b["s"]
        pos = (rng.integers(0, MAX_POS, (b["b"], s)) if positions == "batch"
               else rng.integers(0, MAX_POS - s + 1, (1,)))
        feeds.append({"x": rand(rng, shape_of(x_shape, b)), "pos": pos.astype(I64)})
    check(model, target, feeds)


# ----------------------------------------------------------------------------- FusedConv

FUSED_CONV = [
    ("Relu", None), ("Tanh", None), ("Sigmoid", None), ("LeakyRelu", [0.2]), ("Clip", [-0.5, 1.5]),
    ("HardSigmoid", [0.3, 0.4]),
]


# each activation with bias and Z (a Conv compiles slowly: the other forms with Relu only)
FUSED_CONV_CASES = [(a, p, True, True) for a, p in FUSED_CONV] + [("Relu", None, True, False),
                                                                   ("Relu", None, False, True)]


@pytest.mark.parametrize("activation,params,with_bias,with_sum", FUSED_CONV_CASES,
                         ids=[f"{a}-bias{int(b)}-z{int(z)}" for a, _, b, z in FUSED_CONV_CASES])
def test_fused_conv(activation, params, with_bias, with_sum, target):
    rng = np.random.default_rng(9)
    attrs = dict(activation=activation, pads=[1, 1, 1, 1], strides=[1, 1])
    if params is not None:
        attrs["activation_params"] = params
    inits = [const("w", weight(rng, 6, 4, 3, 3, scale=0.3))] + ([const("bias", weight(rng, 6))] if with_bias else [])
    names = ["x", "w", "bias" if with_bias else ""] + (["z"] if with_sum else [])
    inputs = [vinfo("x", F32, ["b", 4, "h", "w"])] + ([vinfo("z", F32, ["b", 6, "h", "w"])] if with_sum else [])
    model = ms_model([node("FusedConv", names, ["y"], **attrs)], inputs, [vinfo("y", F32, None)], inits)
    feeds = []
    for b, h, w in [(1, 5, 7), (2, 1, 3), (3, 9, 4)]:
        f = {"x": rand(rng, (b, 4, h, w))}
        if with_sum:
            f["z"] = rand(rng, (b, 6, h, w))
        feeds.append(f)
    check(model, target, feeds)


def test_fused_conv_unsupported_activation_refused():
    model = ms_model([node("FusedConv", ["x", "w"], ["y"], activation="Gelu")],
                     [vinfo("x", F32, ["b", 2, "h", "w"]), vinfo("w", F32, [3, 2, 1, 1])], [vinfo("y", F32, None)])
    _refused(model, r"node 'n' \(FusedConv\): activation 'Gelu' is not supported \(supported: Relu, Tanh")


def test_rotary_packed_batching_refused():
    rng = np.random.default_rng(10)
    model = ms_model([node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], is_packed_batching=1)],
                     [vinfo("x", F32, ["b", "s", 8]), vinfo("pos", I64, ["b", "s"])], [vinfo("y", F32, None)],
                     _rotary_caches(rng, 4))
    _refused(model, r"node 'n' \(RotaryEmbedding\): is_packed_batching=1 .* is not supported")


# ----------------------------------------------------------------------------- Attention, MultiHeadAttention

ATTN_SEQS = [dict(b=2, s=5), dict(b=1, s=1), dict(b=3, s=13)]


def _mask(rng, b, s, padded_row=False):
    """A (batch, seq) int32 mask of 0s and 1s (2 counts as 1), with row 2 all 0 when
    ``padded_row`` and batch > 2."""
    m = rng.choice(np.array([0, 1, 1, 2], I32), (b, s))
    if padded_row and b > 2:
        m[2] = 0
    return m


ATTENTION = [
    # (attributes, mask, attention_bias, present, bias)
    (dict(num_heads=2), False, False, False, True),
    (dict(num_heads=4), True, False, False, True),
    (dict(num_heads=2, unidirectional=1), False, False, True, True),
    (dict(num_heads=2, unidirectional=1, mask_filter_value=-1e4 * 3), True, False, False, True),
    (dict(num_heads=2, qkv_hidden_sizes=[8, 8, 12], scale=0.3), True, True, False, True),
    (dict(num_heads=1), False, True, True, False),
]


@pytest.mark.parametrize("attrs,mask,attn_bias,present,bias", ATTENTION,
                         ids=[",".join(f"{k}={v}" for k, v in a[0].items()) + f"-m{int(a[1])}b{int(a[2])}p{int(a[3])}"
                              for a in ATTENTION])
def test_attention(attrs, mask, attn_bias, present, bias, target, padded_row=False, atol=1e-5):
    rng = np.random.default_rng(11)
    d_in = 12
    total = sum(attrs.get("qkv_hidden_sizes", [8, 8, 8]))
    inits = [const("w", weight(rng, d_in, total, scale=0.4))] + ([const("bias", weight(rng, total))] if bias else [])
    names = ["x", "w", "bias" if bias else "", "mask" if mask else "", "", "ab" if attn_bias else ""]
    while not names[-1]:
        names.pop()
    inputs = [vinfo("x", F32, ["b", "s", d_in])]
    if mask:
        inputs.append(vinfo("mask", I32, ["b", "s"]))
    if attn_bias:
        inputs.append(vinfo("ab", F32, [1, attrs["num_heads"], "s", "s"]))
    outputs = ["y", "present"] if present else ["y"]
    model = ms_model([node("Attention", names, outputs, **attrs)], inputs, [vinfo(o, F32, None) for o in outputs],
                     inits)
    feeds = []
    for bnd in ATTN_SEQS:
        b, s = bnd["b"], bnd["s"]
        f = {"x": rand(rng, (b, s, d_in))}
        if mask:
            f["mask"] = _mask(rng, b, s, padded_row)
        if attn_bias:
            f["ab"] = rand(rng, (1, attrs["num_heads"], s, s))
        feeds.append(f)
    check(model, target, feeds, atol=atol)


def test_attention_padded_row(target):
    """A row whose keys are all padded: onnxruntime adds -10000 to each score, so they keep
    about 10 bits and the softmax follows the scores only roughly (wasm32 differs by 2e-5 from
    onnxruntime, natively by less); the order of the sums (bias first, then the mask)
    decides which bits, and is checked here with a bias."""
    test_attention(dict(num_heads=2, scale=0.3), True, True, False, True, target, padded_row=True, atol=1e-4)


MHA = [
    # (attributes, bias, key_padding_mask, attention_bias, present outputs, cross (kv of its own length))
    (dict(num_heads=2), False, False, False, False, False),
    (dict(num_heads=2), True, True, False, True, False),
    (dict(num_heads=4, scale=0.25), True, True, True, False, True),
    (dict(num_heads=2, unidirectional=1), True, False, False, False, False),
    (dict(num_heads=1), False, True, False, True, True),
]


@pytest.mark.parametrize("attrs,bias,mask,attn_bias,present,cross", MHA,
                         ids=[",".join(f"{k}={v}" for k, v in a[0].items())
                              + "-" + "".join(c for c, on in zip("bmapx", a[1:]) if on) for a in MHA])
def test_multi_head_attention(attrs, bias, mask, attn_bias, present, cross, target):
    rng = np.random.default_rng(12)
    hidden, v_hidden, heads = 8, 12, attrs["num_heads"]
    kv = "l" if cross else "s"
    names = ["q", "k", "v", "bias" if bias else "", "mask" if mask else "", "ab" if attn_bias else ""]
    while not names[-1]:
        names.pop()
    inputs = [vinfo("q", F32, ["b", "s", hidden]), vinfo("k", F32, ["b", kv, hidden]),
              vinfo("v", F32, ["b", kv, v_hidden])]
    if mask:
        inputs.append(vinfo("mask", I32, ["b", kv]))
    if attn_bias:
        inputs.append(vinfo("ab", F32, ["b", heads, "s", kv]))
    inits = [const("bias", weight(rng, 2 * hidden + v_hidden))] if bias else []
    outputs = ["y", "present_k", "present_v"] if present else ["y"]
    model = ms_model([node("MultiHeadAttention", names, outputs, **attrs)], inputs,
                     [vinfo(o, F32, None) for o in outputs], inits)
    feeds = []
    for b, s, l in [(2, 5, 7), (1, 1, 1), (3, 13, 4)]:
        l = l if cross else s
        f = {"q": rand(rng, (b, s, hidden)), "k": rand(rng, (b, l, hidden)), "v": rand(rng, (b, l, v_hidden))}
        if mask:
            f["mask"] = _mask(rng, b, l)
        if attn_bias:
            f["ab"] = rand(rng, (b, heads, s, l))
        feeds.append(f)
    check(model, target, feeds)


def test_attention_shared_buffer_refused():
    model = ms_model([node("Attention", ["x", "w", "bias", "", "past"], ["y", "present"], num_heads=2,
                           past_present_share_buffer=1)],
                     [vinfo("x", F32, ["b", "s", 4]), vinfo("past", F32, [2, "b", 2, "p", 2])],
                     [vinfo("y", F32, None), vinfo("present", F32, None)],
                     [const("w", np.ones((4, 12), F32)), const("bias", np.ones(12, F32))])
    _refused(model, r"node 'n' \(Attention\): Attention with a shared past/present buffer .* is not supported")


@pytest.mark.parametrize("unidirectional,mask", [(True, False), (False, True), (True, True)])
def test_attention_past(unidirectional, mask, target):
    """GPT-2's form: past (2, batch, heads, past, head) before the new keys, present out."""
    rng = np.random.default_rng(16)
    d_in, heads, hidden = 12, 2, 8
    names = ["x", "w", "bias", "mask" if mask else "", "past"]
    inputs = [vinfo("x", F32, ["b", "s", d_in]), vinfo("past", F32, [2, "b", heads, "p", hidden // heads])]
    if mask:
        inputs.insert(1, vinfo("mask", I32, ["b", "t"]))
    model = ms_model([node("Attention", names, ["y", "present"], num_heads=heads, unidirectional=int(unidirectional))],
                     inputs, [vinfo("y", F32, None), vinfo("present", F32, None)],
                     [const("w", weight(rng, d_in, 3 * hidden, scale=0.4)), const("bias", weight(rng, 3 * hidden))])
    feeds = []
    for b, s, p in [(2, 1, 6), (1, 4, 3), (3, 2, 0)]:
        f = {"x": rand(rng, (b, s, d_in)), "past": rand(rng, (2, b, heads, p, hidden // heads))}
        if mask:
            f["mask"] = _mask(rng, b, p + s)
        feeds.append(f)
    check(model, target, feeds)


@pytest.mark.parametrize("unidirectional", [False, True])
def test_multi_head_attention_past(unidirectional, target):
    rng = np.random.default_rng(17)
    hidden, heads = 8, 2
    model = ms_model([node("MultiHeadAttention", ["q", "k", "v", "bias", "", "", "past_k", "past_v"],
                           ["y", "present_k", "present_v"], num_heads=heads, unidirectional=int(unidirectional))],
                     [vinfo("q", F32, ["b", "s", hidden]), vinfo("k", F32, ["b", "s", hidden]),
                      vinfo("v", F32, ["b", "s", hidden]), vinfo("past_k", F32, ["b", heads, "p", hidden // heads]),
                      vinfo("past_v", F32, ["b", heads, "p", hidden // heads])],
                     [vinfo(o, F32, None) for o in ("y", "present_k", "present_v")],
                     [const("bias", weight(rng, 3 * hidden))])
    feeds = []
    for b, s, p in [(2, 1, 6), (1, 4, 3), (3, 2, 0)]:
        feeds.append({"q": rand(rng, (b, s, hidden)), "k": rand(rng, (b, s, hidden)), "v": rand(rng, (b, s, hidden)),
                      "past_k": rand(rng, (b, heads, p, hidden // heads)),
                      "past_v": rand(rng, (b, heads, p, hidden // heads))})
    check(model, target, feeds)


def test_attention_mask_start_end_refused():
    """(2 * batch) start/end indices: a mask whose one dim is not the batch's."""
    model = ms_model([node("Attention", ["x", "w", "bias", "ends"], ["y"], num_heads=2)],
                     [vinfo("x", F32, ["b", "s", 4]), vinfo("ends", I32, ["n"])], [vinfo("y", F32, None)],
                     [const("w", np.ones((4, 12), F32)), const("bias", np.ones(12, F32))])
    _refused(model, r"node 'n' \(Attention\): mask_index 'ends' is int32\(n,\); the forms supported are \(batch\) "
                    r"lengths, \(batch, kv_sequence\), \(batch, sequence, kv_sequence\)")


@pytest.mark.parametrize("form", ["lengths", "3d"])
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_attention_mask_forms(form, unidirectional, target):
    """mask_index as (batch) lengths (what EmbedLayerNormalization's mask_index gives) or
    (batch, seq, seq)."""
    rng = np.random.default_rng(19)
    d_in, heads = 12, 2
    mask_shape = ["b"] if form == "lengths" else ["b", "s", "s"]
    model = ms_model([node("Attention", ["x", "w", "bias", "mask"], ["y"], num_heads=heads,
                           unidirectional=unidirectional)],
                     [vinfo("x", F32, ["b", "s", d_in]), vinfo("mask", I32, mask_shape)], [vinfo("y", F32, None)],
                     [const("w", weight(rng, d_in, 24, scale=0.4)), const("bias", weight(rng, 24))])
    feeds = []
    for b, s in [(2, 5), (1, 1), (3, 9)]:
        mask = (rng.integers(1, s + 1, b) if form == "lengths" else rng.choice(np.array([0, 1, 1]), (b, s, s)))
        if form == "3d":
            mask[..., 0] = 1  # no row all masked (its scores near -10000 keep 10 bits)
        feeds.append({"x": rand(rng, (b, s, d_in)), "mask": mask.astype(I32)})
    check(model, target, feeds)


def test_multi_head_attention_lengths(target):
    rng = np.random.default_rng(20)
    model = ms_model([node("MultiHeadAttention", ["q", "k", "v", "", "lengths"], ["y"], num_heads=2)],
                     [vinfo("q", F32, ["b", "s", 8]), vinfo("k", F32, ["b", "l", 8]), vinfo("v", F32, ["b", "l", 8]),
                      vinfo("lengths", I32, ["b"])], [vinfo("y", F32, None)])
    check(model, target, [{"q": rand(rng, (b, s, 8)), "k": rand(rng, (b, l, 8)), "v": rand(rng, (b, l, 8)),
                           "lengths": rng.integers(1, l + 1, b).astype(I32)} for b, s, l in [(2, 3, 5), (1, 1, 1),
                                                                                             (3, 4, 7)]])


# ----------------------------------------------------------------------------- GroupQueryAttention

HEAD = 8
ROTARY_HEAD = 32


def _gqa_model(heads, kv_heads, packed, past, scale=None, rotary=None):
    """``rotary``: None, or (cos half width, interleaved, position_ids given); heads of
    HEAD elements, or of ROTARY_HEAD with rotary (onnxruntime's rotary takes heads of a
    multiple of 16 and a cos half width of a multiple of 8)."""
    head = ROTARY_HEAD if rotary else HEAD
    names = (["q"] + (["", ""] if packed else ["k", "v"]) + (["past_k", "past_v"] if past else ["", ""])
             + ["seqlens_k", "total"])
    inits = []
    if rotary:
        half, interleaved, with_ids = rotary
        inits = list(_rotary_caches(np.random.default_rng(15), half))
        names += ["cos", "sin"] + (["pos"] if with_ids else [])
    q_width = (heads + 2 * kv_heads) * head if packed else heads * head
    inputs = [vinfo("q", F32, ["b", "s", q_width])]
    if not packed:
        inputs += [vinfo("k", F32, ["b", "s", kv_heads * head]), vinfo("v", F32, ["b", "s", kv_heads * head])]
    if past:
        inputs += [vinfo("past_k", F32, ["b", kv_heads, "p", head]), vinfo("past_v", F32, ["b", kv_heads, "p", head])]
    inputs += [vinfo("seqlens_k", I32, ["b"]), vinfo("total", I32, [])]
    attrs = dict(num_heads=heads, kv_num_heads=kv_heads) | ({} if scale is None else {"scale": scale})
    if rotary:
        attrs |= dict(do_rotary=1, rotary_interleaved=int(interleaved))
        if with_ids:
            inputs.append(vinfo("pos", I64, ["b", "s"]))
    outputs = ["y", "present_k", "present_v"]
    return ms_model([node("GroupQueryAttention", names, outputs, **attrs)], inputs,
                    [vinfo(o, F32, None) for o in outputs], inits)


def _gqa_feeds(rng, model, b, s, p):
    feeds = {}
    for vi in model.graph.input:
        dims = [{"b": b, "s": s, "p": p}.get(d.dim_param, d.dim_value) for d in vi.type.tensor_type.shape.dim]
        if vi.name == "pos":
            feeds["pos"] = (p + np.arange(s) + rng.integers(0, 3, (b, 1))).astype(I64)
        elif vi.name not in ("seqlens_k", "total"):
            feeds[vi.name] = rand(rng, dims)
    feeds["seqlens_k"] = np.full(b, p + s - 1, I32)
    feeds["total"] = np.array(p + s, I32)
    return feeds


GQA = [
    # (heads, kv_heads, packed, past, scale, rotary: (cos half width, interleaved, position_ids))
    (4, 2, False, False, None, None),
    (4, 2, True, False, None, None),
    (6, 2, False, True, None, None),
    (2, 2, False, True, 0.7, None),
    (4, 1, True, True, None, None),
    (4, 2, False, True, None, (16, False, False)),
    (4, 2, True, False, None, (8, True, False)),
    (4, 2, False, True, None, (8, False, True)),
    (2, 1, False, True, None, (16, True, True)),
]


@pytest.mark.parametrize("heads,kv_heads,packed,past,scale,rotary", GQA,
                         ids=[f"h{h}kv{k}" + ("-packed" if pk else "") + ("-past" if p else "") + (f"-scale{s}" if s else "")
                              + (f"-rotary{r[0]}" + "-interleaved" * r[1] + "-ids" * r[2] if r else "")
                              for h, k, pk, p, s, r in GQA])
def test_group_query_attention(heads, kv_heads, packed, past, scale, rotary, target):
    rng = np.random.default_rng(13)
    model = _gqa_model(heads, kv_heads, packed, past, scale, rotary)
    # prompts without past; with past, tokens, a later prompt (onnxruntime takes it at batch
    # 1 only) and a first prompt over an empty past
    shapes = [(2, 5, 0), (1, 1, 0), (3, 9, 0)] if not past else [(2, 1, 6), (1, 3, 1), (3, 1, 9), (2, 4, 0)]
    check(model, target, [_gqa_feeds(rng, model, b, s, p) for b, s, p in shapes])


def test_group_query_attention_padded_batch_refused_at_run_time(target):
    import wasm_runtime
    from util import build
    rng = np.random.default_rng(14)
    model = _gqa_model(4, 2, False, True)
    m = build(model, target)
    feeds = _gqa_feeds(rng, model, 2, 1, 4)
    feeds["seqlens_k"] = np.array([4, 2], I32)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'n' \(GroupQueryAttention\): seqlens_k 'seqlens_k' \+ 1 "
                                                      r"differs from past \+ new sequence length; padded batches"):
        m.run(feeds)


def test_group_query_attention_local_window_refused():
    model = _gqa_model(4, 2, False, False)
    model.graph.node[0].attribute.append(helper.make_attribute("local_window_size", 16))
    _refused(model, r"node 'n' \(GroupQueryAttention\): local_window_size 16 \(sliding-window attention\) "
                    r"is not supported")


# ----------------------------------------------------------------------------- a fused BERT layer


def test_bert_layer_as_fused(target):
    """One BERT encoder layer as onnxruntime's transformer optimizer writes it:
    EmbedLayerNormalization's mask_index into Attention, SkipLayerNormalization around the
    projection and the feed-forward (MatMul, FastGelu with bias, MatMul)."""
    rng = np.random.default_rng(21)
    h, ff = 16, 32
    w = {"word": weight(rng, VOCAB, h), "pos": weight(rng, POSITIONS, h), "seg": weight(rng, SEGMENTS, h),
         "g0": 1 + weight(rng, h, scale=0.1), "b0": weight(rng, h, scale=0.1),
         "w_qkv": weight(rng, h, 3 * h, scale=0.3), "b_qkv": weight(rng, 3 * h, scale=0.1),
         "w_o": weight(rng, h, h, scale=0.3), "b_o": weight(rng, h, scale=0.1),
         "g1": 1 + weight(rng, h, scale=0.1), "b1": weight(rng, h, scale=0.1),
         "w_1": weight(rng, h, ff, scale=0.3), "b_1": weight(rng, ff, scale=0.1),
         "w_2": weight(rng, ff, h, scale=0.3), "b_2": weight(rng, h, scale=0.1),
         "g2": 1 + weight(rng, h, scale=0.1), "b2": weight(rng, h, scale=0.1)}
    nodes = [
        helper.make_node("EmbedLayerNormalization", ["ids", "segs", "word", "pos", "seg", "g0", "b0", "mask"],
                         ["emb", "mask_index"], name="embed", domain=MS, epsilon=1e-12),
        helper.make_node("Attention", ["emb", "w_qkv", "b_qkv", "mask_index"], ["attn"], name="attention",
                         domain=MS, num_heads=4),
        helper.make_node("MatMul", ["attn", "w_o"], ["proj"], name="proj"),
        helper.make_node("SkipLayerNormalization", ["proj", "emb", "g1", "b1", "b_o"], ["h1"], name="ln1",
                         domain=MS, epsilon=1e-12),
        helper.make_node("MatMul", ["h1", "w_1"], ["up"], name="up"),
        helper.make_node("FastGelu", ["up", "b_1"], ["act"], name="gelu", domain=MS),
        helper.make_node("MatMul", ["act", "w_2"], ["down"], name="down"),
        helper.make_node("SkipLayerNormalization", ["down", "h1", "g2", "b2", "b_2"], ["y"], name="ln2",
                         domain=MS, epsilon=1e-12),
    ]
    model = ms_model(nodes, [vinfo("ids", I32, ["b", "s"]), vinfo("segs", I32, ["b", "s"]),
                             vinfo("mask", I32, ["b", "s"])], [vinfo("y", F32, None)],
                     [const(k, v) for k, v in w.items()])
    feeds = []
    for b, s in [(2, 7), (1, 1), (3, 16)]:
        lengths = rng.integers(1, s + 1, b)
        feeds.append({"ids": rng.integers(0, VOCAB, (b, s)).astype(I32),
                      "segs": rng.integers(0, SEGMENTS, (b, s)).astype(I32),
                      "mask": (np.arange(s) < lengths[:, None]).astype(I32)})
    check(model, target, feeds)


@pytest.mark.parametrize("past", [False, True])
def test_group_query_attention_padded_first_prompt(past, target):
    """A right-padded first prompt (seqlens_k + 1 below seq; with past, an empty one): the
    rows of real tokens and the presents match onnxruntime, whose rows of padding tokens are
    unspecified (symwasm computes them as if real)."""
    from util import build
    rng = np.random.default_rng(22)
    model = _gqa_model(4, 2, False, past)
    m = build(model, target)
    for b, s in [(3, 6), (2, 9)]:
        feeds = _gqa_feeds(rng, model, b, s, 0)
        lengths = rng.integers(1, s + 1, b)
        lengths[0] = s
        feeds["seqlens_k"] = (lengths - 1).astype(I32)
        got, want = m.run(feeds), ort_reference(model, feeds)
        for name in ("present_k", "present_v"):
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5, err_msg=name)
        for i, n in enumerate(lengths):
            np.testing.assert_allclose(got["y"][i, :n], want["y"][i, :n], rtol=1e-5, atol=1e-5)
