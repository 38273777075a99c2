"""Recurrent ops (toolkit/frontend/onnx/ops/rnn.py): RNN, GRU, LSTM, each model compiled once
per target and run at several (seq, batch) bindings.

References: onnx.reference where it implements what a test uses, onnxruntime elsewhere.
onnx.reference's RNN, GRU and LSTM ignore sequence_lens, clip and input_forget; GRU and LSTM
ignore the activations attribute (always sigmoid/tanh); RNN knows only Tanh and Affine and
reads activation_alpha by position, requiring one value per direction; and a sequence of
length 0 fails in it (np.stack of no steps). So sequence lengths, activations, clip,
input_forget and float16 (which onnxruntime's CPU kernels lack: it runs on the float32
values) are checked against onnxruntime, and since onnxruntime refuses layout 1, batch-major
layers against it on transposed inputs and outputs.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import onnx
from onnx import helper, numpy_helper

import wasm_runtime
from util import build, check_model, const, lower_model, make_model, ort_reference, vinfo
from toolkit.frontend.onnx.importer import import_model
from toolkit.ir import dims as D
from toolkit.ir.graph import CompileError

RNG = np.random.default_rng(31)
F32, F16 = np.float32, np.float16
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
SIZE = 3  # input features


class Layer:
    """One recurrent node of a test model: its ONNX node, its weights (initializers, or
    graph inputs when ``const`` is False), its run-time inputs and its outputs."""

    def __init__(self, name: str, op: str, hidden: int = 4, direction: str = "forward", layout: int = 0,
                 bias: bool = True, h0: bool = False, c0: bool = False, peepholes: bool = False,
                 lens: bool = False, outputs=("Y", "Y_h"), const: bool = True, dtype=F32, hidden_attr: bool = True,
                 **attrs):
        self.name, self.op, self.layout, self.dtype = name, op, layout, dtype
        dirs = 2 if direction == "bidirectional" else 1
        g = GATES[op]
        self.dirs, self.hidden = dirs, hidden
        self.weights = {"W": RNG.uniform(-0.7, 0.7, (dirs, g * hidden, SIZE)),
                        "R": RNG.uniform(-0.7, 0.7, (dirs, g * hidden, hidden))}
        if bias:
            self.weights["B"] = RNG.uniform(-0.5, 0.5, (dirs, 2 * g * hidden))
        if peepholes:
            self.weights["P"] = RNG.uniform(-0.5, 0.5, (dirs, 3 * hidden))
        self.weights = {k: v.astype(dtype) for k, v in self.weights.items()}
        self.states = [s for s, on in (("initial_h", h0), ("initial_c", c0)) if on]
        self.lens = lens
        names = {k: f"{name}_{k}" for k in ("W", "R", "B", "initial_h", "initial_c", "P")}
        ins = ["x", names["W"], names["R"], names["B"] if bias else "", "lens" if lens else "",
               names["initial_h"] if h0 else ""]
        if op == "LSTM":
            ins += [names["initial_c"] if c0 else "", names["P"] if peepholes else ""]
        while not ins[-1]:
            ins.pop()
        self.out_names = [f"{name}_{o}" if o in outputs else "" for o in ("Y", "Y_h", "Y_c")[:2 + (op == "LSTM")]]
        while not self.out_names[-1]:
            self.out_names.pop()
        if hidden_attr:
            attrs["hidden_size"] = hidden
        self.node = helper.make_node(op, ins, self.out_names, name=name, direction=direction,
                                     **({"layout": layout} if layout else {}), **attrs)
        self.const = const

    def initializers(self):
        return [const(f"{self.name}_{k}", v) for k, v in self.weights.items()] if self.const else []

    def inputs(self):
        out = [] if self.const else [vinfo(f"{self.name}_{k}", self.dtype, v.shape) for k, v in self.weights.items()]
        state = ["batch", self.dirs, self.hidden] if self.layout else [self.dirs, "batch", self.hidden]
        return out + [vinfo(f"{self.name}_{s}", self.dtype, state) for s in self.states]

    def outputs(self):
        return [vinfo(o, self.dtype, None) for o in self.out_names if o]

    def feeds(self, seq: int, batch: int) -> dict:
        out = {} if self.const else {f"{self.name}_{k}": v for k, v in self.weights.items()}
        shape = (batch, self.dirs, self.hidden) if self.layout else (self.dirs, batch, self.hidden)
        for s in self.states:
            out[f"{self.name}_{s}"] = RNG.uniform(-1, 1, shape).astype(self.dtype)
        return out


def model_of(layers, layout: int = 0, lens: bool = False, opset: int = 17, dtype=F32):
    """One model running every layer on the same X [seq, batch, SIZE] (or batch-major)."""
    x = vinfo("x", dtype, ["batch", "seq", SIZE] if layout else ["seq", "batch", SIZE])
    inputs = [x] + ([vinfo("lens", np.int32, ["batch"])] if lens else [])
    for layer in layers:
        inputs += layer.inputs()
    return make_model([layer.node for layer in layers], inputs, [o for layer in layers for o in layer.outputs()],
                      [i for layer in layers for i in layer.initializers()], opset=opset)


def feeds_of(layers, seq: int, batch: int, layout: int = 0, lens: bool = False, dtype=F32) -> dict:
    feeds = {"x": RNG.uniform(-2, 2, (batch, seq, SIZE) if layout else (seq, batch, SIZE)).astype(dtype)}
    if lens:
        # every length from 0 to seq shows up across the bindings; the first entry is full
        lengths = RNG.integers(0, seq + 1, size=batch)
        lengths[0] = seq
        if batch > 1:
            lengths[1] = 0
        feeds["lens"] = lengths.astype(np.int32)
    for layer in layers:
        feeds.update(layer.feeds(seq, batch))
    return feeds


BINDINGS = [(5, 3), (1, 1), (3, 2)]


def ort_time_major(model, feeds):
    """onnxruntime's outputs for a model of batch-major (layout 1) layers, which it does not
    implement: the same layers time-major on transposed inputs, their outputs transposed
    back (names as :class:`Layer` gives them)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for n in m.graph.node:
        kept = [a for a in n.attribute if a.name != "layout"]
        del n.attribute[:]
        n.attribute.extend(kept)
    def batch_major(name: str) -> bool:
        return name == "x" or name.endswith(("initial_h", "initial_c"))

    for v in m.graph.input:
        if batch_major(v.name):
            dims = v.type.tensor_type.shape.dim
            first, second = onnx.TensorShapeProto.Dimension(), onnx.TensorShapeProto.Dimension()
            first.CopyFrom(dims[1])
            second.CopyFrom(dims[0])
            dims[0].CopyFrom(first)
            dims[1].CopyFrom(second)
    swapped = {k: np.swapaxes(v, 0, 1) if batch_major(k) else v for k, v in feeds.items()}
    out = ort_reference(m, swapped)
    return {k: v.transpose(2, 0, 1, 3) if k.endswith("_Y") else np.swapaxes(v, 0, 1) for k, v in out.items()}


def run_layers(target, layers, layout=0, lens=False, ref=None, bindings=BINDINGS, opset=17, **tol):
    model = model_of(layers, layout, lens, opset)
    feeds = [feeds_of(layers, s, b, layout, lens) for s, b in bindings]
    kw = {"ref": ref} if ref is not None else {}
    return check_model(model, target, feeds, rtol=tol.get("rtol", 1e-4), atol=tol.get("atol", 1e-5), **kw)


# ----------------------------------------------------------------------------- onnx.reference


@pytest.mark.parametrize("layout", [0, 1])
def test_against_onnx_reference(target, layout):
    layers = [
        Layer("rnn_f", "RNN", h0=True, layout=layout),
        Layer("rnn_r", "RNN", direction="reverse", bias=False, layout=layout),
        Layer("rnn_b", "RNN", direction="bidirectional", h0=True, layout=layout),
        Layer("gru_f", "GRU", h0=True, layout=layout),
        Layer("gru_r", "GRU", direction="reverse", linear_before_reset=1, layout=layout),
        Layer("gru_b", "GRU", direction="bidirectional", h0=True, linear_before_reset=1, layout=layout),
        Layer("gru_nb", "GRU", direction="bidirectional", bias=False, layout=layout),
        Layer("lstm_f", "LSTM", h0=True, c0=True, peepholes=True, outputs=("Y", "Y_h", "Y_c"), layout=layout),
        Layer("lstm_r", "LSTM", direction="reverse", outputs=("Y", "Y_c"), layout=layout),
        Layer("lstm_b", "LSTM", direction="bidirectional", h0=True, c0=True, peepholes=True,
              outputs=("Y", "Y_h", "Y_c"), layout=layout, hidden=5),
    ]
    run_layers(target, layers, layout)


def test_wide_layers(target):
    """Hidden sizes whose gate rows fill several of linalg's register chunks (ROW_CHUNK_VECTORS
    vectors), then single vectors, then single columns: 21 units make GRU's three gates 63
    columns (wasm32: 3 chunks of 16, 3 vectors and 3 columns; AVX-512: 3 vectors of 16 and 15
    columns), LSTM's 48 make 192."""
    layers = [Layer("gru_w", "GRU", h0=True, hidden=21),
              Layer("gru_wl", "GRU", direction="bidirectional", linear_before_reset=1, hidden=21),
              Layer("lstm_w", "LSTM", h0=True, c0=True, outputs=("Y", "Y_h", "Y_c"), hidden=48),
              Layer("rnn_w", "RNN", direction="reverse", h0=True, hidden=21)]
    run_layers(target, layers)


def test_optional_outputs(target):
    """Every combination of Y, Y_h, Y_c present or absent."""
    layers = []
    for k, outs in enumerate(o for n in (1, 2, 3) for o in itertools.combinations(("Y", "Y_h", "Y_c"), n)):
        layers.append(Layer(f"lstm{k}", "LSTM", direction="bidirectional" if k % 2 else "forward", outputs=outs,
                            h0=True, c0=True))
    for k, outs in enumerate((("Y",), ("Y_h",))):
        layers.append(Layer(f"gru{k}", "GRU", outputs=outs, h0=True))
        layers.append(Layer(f"rnn{k}", "RNN", outputs=outs, h0=True))
    run_layers(target, layers)


def test_weights_known_at_run_time(target):
    """W, R, B, P as inputs: the kernel reads W and R untransposed (dot products)."""
    layers = [Layer("rnn", "RNN", const=False, direction="bidirectional", h0=True),
              Layer("gru", "GRU", const=False, h0=True, hidden_attr=False),
              Layer("gru_l", "GRU", const=False, linear_before_reset=1, direction="reverse"),
              Layer("lstm", "LSTM", const=False, peepholes=True, direction="bidirectional", h0=True, c0=True,
                    outputs=("Y", "Y_h", "Y_c"))]
    run_layers(target, layers)


def test_float64(target):
    layers = [Layer("rnn", "RNN", direction="bidirectional", h0=True, dtype=np.float64),
              Layer("gru", "GRU", direction="reverse", linear_before_reset=1, dtype=np.float64),
              Layer("lstm", "LSTM", peepholes=True, h0=True, c0=True, outputs=("Y", "Y_h", "Y_c"), dtype=np.float64)]
    model = model_of(layers, dtype=np.float64)
    check_model(model, target, [feeds_of(layers, s, b, dtype=np.float64) for s, b in BINDINGS], rtol=1e-12,
                atol=1e-12)


def test_empty_batch(target):
    layers = [Layer("gru", "GRU", direction="bidirectional", h0=True),
              Layer("lstm", "LSTM", h0=True, c0=True, outputs=("Y", "Y_h", "Y_c"))]
    run_layers(target, layers, bindings=[(4, 0), (2, 3)])


def test_empty_sequence(target):
    """seq_length 0: Y is empty and Y_h, Y_c are zero, as for a sequence_lens entry of 0.
    Against numpy: onnx.reference fails on no steps; onnxruntime gives this for RNN but
    aborts the process for GRU."""
    layers = [Layer("rnn", "RNN", h0=True, direction="bidirectional"), Layer("gru", "GRU", h0=True),
              Layer("lstm", "LSTM", h0=True, c0=True, outputs=("Y", "Y_h", "Y_c"), layout=1)]
    m = build(model_of(layers[:2]), target)
    got = m.run(feeds_of(layers[:2], 0, 3))
    assert got["rnn_Y"].shape == (0, 2, 3, 4) and got["gru_Y"].shape == (0, 1, 3, 4)
    assert not got["rnn_Y_h"].any() and got["rnn_Y_h"].shape == (2, 3, 4) and not got["gru_Y_h"].any()
    m = build(model_of(layers[2:], layout=1), target)
    got = m.run(feeds_of(layers[2:], 0, 2, layout=1))
    assert got["lstm_Y"].shape == (2, 0, 1, 4)
    assert got["lstm_Y_c"].shape == (2, 1, 4) and not got["lstm_Y_c"].any() and not got["lstm_Y_h"].any()


# ----------------------------------------------------------------------------- onnxruntime


@pytest.mark.parametrize("layout", [0, 1])
def test_sequence_lens(target, layout):
    """Per-entry lengths (0 and seq among them): Y is zero past a length, Y_h and Y_c hold
    the last valid step's states (zero for length 0); reverse runs within each length."""
    layers = []
    for direction in ("forward", "reverse", "bidirectional"):
        d = direction[0]
        layers += [Layer(f"rnn_{d}", "RNN", direction=direction, lens=True, h0=True, layout=layout),
                   Layer(f"gru_{d}", "GRU", direction=direction, lens=True, h0=direction != "reverse",
                         layout=layout),
                   Layer(f"grul_{d}", "GRU", direction=direction, lens=True, linear_before_reset=1, layout=layout),
                   Layer(f"lstm_{d}", "LSTM", direction=direction, lens=True, h0=True, c0=True,
                         peepholes=direction == "bidirectional", outputs=("Y", "Y_h", "Y_c"), layout=layout)]
    run_layers(target, layers, layout, lens=True, ref=ort_time_major if layout else ort_reference,
               bindings=[(5, 4), (1, 3), (3, 2)])


ALL_ACTIVATIONS = [
    ("Relu", (), ()), ("Tanh", (), ()), ("Sigmoid", (), ()), ("Affine", (0.7,), (0.2,)),
    ("LeakyRelu", (0.2,), ()), ("ThresholdedRelu", (0.3,), ()), ("ScaledTanh", (1.5,), (0.8,)),
    ("HardSigmoid", (0.3,), (0.4,)), ("Elu", (0.9,), ()), ("Softsign", (), ()), ("Softplus", (), ()),
]


def test_activations_and_clip(target):
    """Each activation with its alpha and beta (explicit: onnxruntime defaults Affine's,
    ThresholdedRelu's and ScaledTanh's to 0, the ONNX ops' defaults are 1), as RNN's f and
    in GRU and LSTM combinations, with and without clip."""
    layers = []
    for k, (name, alpha, beta) in enumerate(ALL_ACTIVATIONS):
        attrs = {"activations": [name]}
        if alpha:
            attrs["activation_alpha"] = list(alpha)
        if beta:
            attrs["activation_beta"] = list(beta)
        layers.append(Layer(f"rnn{k}", "RNN", h0=True, **attrs))
    layers.append(Layer("rnn_clip", "RNN", direction="bidirectional", clip=0.5,
                        activations=["LeakyRelu", "Affine"], activation_alpha=[0.1, 0.5], activation_beta=[0.25]))
    layers.append(Layer("gru_acts", "GRU", direction="bidirectional", h0=True, clip=1.2,
                        activations=["HardSigmoid", "Softsign", "Sigmoid", "Elu"], activation_alpha=[0.25, 0.6],
                        activation_beta=[0.45]))
    layers.append(Layer("grul_acts", "GRU", linear_before_reset=1, clip=0.8,
                        activations=["Sigmoid", "Relu"]))
    layers.append(Layer("lstm_acts", "LSTM", h0=True, c0=True, peepholes=True, clip=0.9,
                        activations=["HardSigmoid", "Softsign", "ScaledTanh"], activation_alpha=[0.2, 0.9],
                        activation_beta=[0.5, 1.1], outputs=("Y", "Y_h", "Y_c")))
    layers.append(Layer("lstm_b", "LSTM", direction="bidirectional", clip=2.0, outputs=("Y", "Y_h", "Y_c"),
                        activations=["Sigmoid", "Tanh", "Tanh", "Sigmoid", "LeakyRelu", "Softplus"],
                        activation_alpha=[0.3]))
    run_layers(target, layers, ref=ort_reference)


def test_input_forget(target):
    layers = [Layer("lstm", "LSTM", input_forget=1, h0=True, c0=True, peepholes=True, outputs=("Y", "Y_h", "Y_c")),
              Layer("lstm_b", "LSTM", input_forget=1, direction="bidirectional", outputs=("Y", "Y_h", "Y_c"))]
    run_layers(target, layers, lens=True, ref=ort_reference)


def test_float16(target):
    """float16 in and out, computed in float32; against onnxruntime on the float32 values."""
    layers = [Layer("gru", "GRU", direction="bidirectional", h0=True, dtype=F16),
              Layer("lstm", "LSTM", h0=True, c0=True, peepholes=True, dtype=F16, outputs=("Y", "Y_h", "Y_c")),
              Layer("rnn", "RNN", direction="reverse", dtype=F16, lens=True)]
    model = model_of(layers, lens=True, dtype=F16)
    m = build(model, target)
    as32 = onnx.ModelProto()
    as32.CopyFrom(model)
    for v in list(as32.graph.input) + list(as32.graph.output):
        if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16:
            v.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    for t in as32.graph.initializer:
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(F32), t.name))
    for seq, batch in [(4, 3), (2, 1)]:
        feeds = feeds_of(layers, seq, batch, lens=True, dtype=F16)
        got = m.run(feeds)
        want = ort_reference(as32, {k: v.astype(F32) if v.dtype == F16 else v for k, v in feeds.items()})
        for name, w in want.items():
            assert got[name].dtype == F16 and got[name].shape == w.shape
            np.testing.assert_allclose(got[name].astype(F32), w, rtol=1e-2, atol=4e-3, err_msg=name)


# ----------------------------------------------------------------------------- models


@pytest.mark.parametrize("opset", [11, 13, 17])
def test_speech_model(target, opset):
    """What torch.onnx exports for a small Conv + bidirectional LSTM speech model: features
    [batch, 1, feats, time] -> Conv -> Relu -> [time, batch, channels * feats] -> LSTM ->
    [time, batch, 2 * hidden] -> MatMul, batch and time symbolic (LSTM-7 at opsets 11 and 13,
    LSTM-14 at 17)."""
    feats, channels, hidden, classes = 6, 2, 5, 4
    h = hidden
    nodes = [
        helper.make_node("Conv", ["feat", "cw", "cb"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Transpose", ["r"], ["t"], name="t", perm=[3, 0, 1, 2]),
        helper.make_node("Reshape", ["t", "shape3"], ["seq_in"], name="flat"),
        helper.make_node("LSTM", ["seq_in", "W", "R", "B"], ["y", "y_h"], name="lstm", hidden_size=h,
                         direction="bidirectional"),
        helper.make_node("Transpose", ["y"], ["yt"], name="yt", perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["yt", "shape3"], ["yf"], name="yf"),
        helper.make_node("MatMul", ["yf", "proj"], ["logits"], name="proj"),
    ]
    inits = [const("cw", RNG.uniform(-0.5, 0.5, (channels, 1, 3, 3)).astype(F32)),
             const("cb", RNG.uniform(-0.1, 0.1, channels).astype(F32)),
             const("shape3", np.array([0, 0, -1], np.int64)),
             const("W", RNG.uniform(-0.4, 0.4, (2, 4 * h, channels * feats)).astype(F32)),
             const("R", RNG.uniform(-0.4, 0.4, (2, 4 * h, h)).astype(F32)),
             const("B", RNG.uniform(-0.2, 0.2, (2, 8 * h)).astype(F32)),
             const("proj", RNG.uniform(-0.5, 0.5, (2 * h, classes)).astype(F32))]
    model = make_model(nodes, [vinfo("feat", F32, ["batch", 1, feats, "time"])],
                       [vinfo("logits", F32, None), vinfo("y_h", F32, None)], inits, opset=opset)
    feeds = [{"feat": RNG.uniform(-1, 1, (b, 1, feats, t)).astype(F32)} for b, t in [(2, 7), (1, 3), (3, 12)]]
    check_model(model, target, feeds, rtol=1e-4, atol=1e-5)
    graph, _, _ = lower_model(model, target)
    lstm = next(n for n in graph.nodes if n.source == "LSTM")
    assert lstm.op.w_transposed and lstm.op.r_transposed  # constant weights: contiguous GEMM rows
    assert D.fmt_shape(graph.values["y"].shape) == "(time, 2, batch, 5)"


@pytest.mark.parametrize("opset", [11, 13, 17])
def test_gru_sequence_model(target, opset):
    """A GRU over [seq, batch, features] with an initial state input, its Y squeezed and fed
    to a second GRU layer, the way torch exports a 2-layer nn.GRU."""
    h = 6
    squeeze = (helper.make_node("Squeeze", ["y1"], ["s1"], name="sq", axes=[1]) if opset < 13 else
               helper.make_node("Squeeze", ["y1", "ax1"], ["s1"], name="sq"))
    nodes = [
        helper.make_node("GRU", ["x", "W1", "R1", "B1", "", "h1"], ["y1", "hn1"], name="gru1", hidden_size=h,
                         linear_before_reset=1),
        squeeze,
        helper.make_node("GRU", ["s1", "W2", "R2", "B2", "", "h2"], ["y2", "hn2"], name="gru2", hidden_size=h,
                         linear_before_reset=1),
    ]
    inits = [const("W1", RNG.uniform(-0.5, 0.5, (1, 3 * h, SIZE)).astype(F32)),
             const("R1", RNG.uniform(-0.5, 0.5, (1, 3 * h, h)).astype(F32)),
             const("B1", RNG.uniform(-0.2, 0.2, (1, 6 * h)).astype(F32)),
             const("W2", RNG.uniform(-0.5, 0.5, (1, 3 * h, h)).astype(F32)),
             const("R2", RNG.uniform(-0.5, 0.5, (1, 3 * h, h)).astype(F32)),
             const("B2", RNG.uniform(-0.2, 0.2, (1, 6 * h)).astype(F32)),
             const("ax1", np.array([1], np.int64))]
    if opset < 13:
        inits.pop()
    model = make_model(nodes, [vinfo("x", F32, ["seq", "batch", SIZE]), vinfo("h1", F32, [1, "batch", h]),
                               vinfo("h2", F32, [1, "batch", h])],
                       [vinfo("y2", F32, None), vinfo("hn1", F32, None), vinfo("hn2", F32, None)], inits, opset=opset)

    def feeds(seq, batch):
        return {"x": RNG.uniform(-1, 1, (seq, batch, SIZE)).astype(F32),
                "h1": RNG.uniform(-1, 1, (1, batch, h)).astype(F32),
                "h2": RNG.uniform(-1, 1, (1, batch, h)).astype(F32)}

    check_model(model, target, [feeds(6, 2), feeds(1, 1), feeds(9, 4)], rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------- errors


def test_sequence_lens_out_of_range(target):
    layer = Layer("lstm", "LSTM", lens=True, outputs=("Y", "Y_h", "Y_c"))
    m = build(model_of([layer], lens=True), target)
    feeds = feeds_of([layer], 4, 3, lens=True)
    feeds["lens"] = np.array([4, 5, 1], np.int32)
    with pytest.raises(wasm_runtime.ModelError,
                       match=r"node 'lstm' \(LSTM\): sequence_lens 'lens' element 1 is 5; it must be between 0 "
                             r"and the sequence length 4"):
        m.run(feeds)
    feeds["lens"] = np.array([2, 0, -1], np.int32)
    with pytest.raises(wasm_runtime.ModelError, match=r"sequence_lens 'lens' element 2 is -1"):
        m.run(feeds)
    feeds["lens"] = np.array([2, 0, 4], np.int32)
    m.run(feeds)


def test_shape_mismatch_at_run_time(target):
    layer = Layer("gru", "GRU", h0=True)
    m = build(model_of([layer]), target)
    feeds = feeds_of([layer], 3, 2)
    feeds["gru_initial_h"] = np.zeros((1, 3, 4), F32)
    with pytest.raises(wasm_runtime.ModelError, match=r"gru_initial_h"):
        m.run(feeds)


@pytest.mark.parametrize("attrs, dtype, message", [
    ({"activations": ["Tanh", "Swish"]}, F32, r"activation 'Swish' is not one of"),
    ({"activations": ["Sigmoid"]}, F32, r"activations lists 1 functions \(Sigmoid\); GRU with 1 direction\(s\) "
                                        r"takes 2"),
    ({"activations": ["Sigmoid", "Tanh"], "activation_alpha": [0.5]}, F32,
     r"activation_alpha has 1 value\(s\) more than the activations"),
    ({}, F16, r"input 'gru_W' has dtype float32; GRU takes float16"),
    ({}, np.int32, r"input 'x' has dtype int32; GRU takes float16, float32, float64"),
    ({"hidden_size": 5}, F32, r"W 'gru_W' dim 1 \(expected \[directions, gates\*hidden, input\] \(1, 15, 3\)\): "
                              r"12 != 15"),
    ({"direction": "bidirectional"}, F32, r"W 'gru_W' dim 0 .*: 1 != 2"),
    ({"direction": "sideways"}, F32, r"direction 'sideways' is not one of forward, reverse, bidirectional"),
    ({"layout": 2}, F32, r"layout 2 is not 0 or 1"),
])
def test_compile_errors(attrs, dtype, message):
    layer = Layer("gru", "GRU")
    node = helper.make_node("GRU", list(layer.node.input), list(layer.node.output), name="gru",
                            **{"hidden_size": 4, **attrs})
    model = make_model([node], [vinfo("x", dtype, ["seq", "batch", SIZE])], layer.outputs(), layer.initializers())
    with pytest.raises(CompileError, match=r"node 'gru' \(GRU\): " + message):
        import_model(model)
