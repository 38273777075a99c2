"""onnxruntime's DynamicQuantizeLSTM (domain com.microsoft; toolkit/frontend/onnx/ops/contrib_quant.py,
the quantized mode of toolkit/codegen/rnn.py) against onnxruntime's CPU kernel: models made by
onnxruntime's own quantize_dynamic from float LSTMs (that is how real models get the op) and by
hand (uint8 weights, zero points, attributes), each compiled once per target and run at several
bindings of the symbolic seq and batch dims.

onnxruntime quantizes X and, at every step, the previous hidden state to uint8 over their own
ranges; the kernel does the same, so outputs agree to float32 rounding (measured: below 3e-7)
where dequantizing the weights would miss by about 5e-3. onnxruntime's result depends on its
thread count (it slices the batch of the recurrent GEMM per thread, each slice quantized over
its own range), so the reference runs on one thread."""
from __future__ import annotations

import zlib

import numpy as np
import onnx
import pytest
from onnx import helper

from util import build, const, vinfo
from toolkit.ir.graph import CompileError

RNG = np.random.default_rng(2027)  # reseeded for each test (_seeded)
F32, U8, I8, I32 = np.float32, np.uint8, np.int8, np.int32
MS = "com.microsoft"
DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}
# float32 rounding of sums in another order; one hidden value quantized to the next uint8
# step would move an output by about 1e-3
ATOL = 2e-6


@pytest.fixture(autouse=True, scope="module")
def _in_a_scratch_folder(tmp_path_factory):
    """onnxruntime's quantizer writes scratch files into the working directory."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path_factory.mktemp("quantizer_scratch"))
        yield


@pytest.fixture(autouse=True)
def _seeded(request):
    """Each test draws its data from a seed of its own name and parameters (the target
    aside), the same whichever tests run. Quantization makes the outputs discontinuous: a
    value within float32 rounding of a rounding tie, which another order of float32 sums
    may put on the other side, moves them by a step (about 1e-3 here), and over long
    sequences of a layer that amplifies differences (seq 100, hidden 256, weights in
    [-0.6, 0.6]) even an exact numpy model of onnxruntime's arithmetic drifts 0.09 from it."""
    global RNG
    params = getattr(request.node, "callspec", None)
    key = sorted((k, repr(v)) for k, v in (params.params.items() if params else ()) if k != "target")
    RNG = np.random.default_rng(zlib.crc32(f"{request.node.originalname} {key}".encode()))


def ort_one_thread(model: onnx.ModelProto, feeds: dict) -> dict:
    import onnxruntime

    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = 1
    sess = onnxruntime.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    return dict(zip(names, sess.run(None, feeds)))


def check(model: onnx.ModelProto, target: str, feeds_list: list[dict]) -> None:
    m = build(model, target)
    for feeds in feeds_list:
        got, want = m.run(feeds), ort_one_thread(model, feeds)
        assert set(got) == set(want)
        for name, w in want.items():
            assert got[name].shape == w.shape and got[name].dtype == w.dtype, (name, got[name].shape, w.shape)
            np.testing.assert_allclose(got[name], w, rtol=0, atol=ATOL, err_msg=f"{name} at X {feeds['X'].shape}")


def feeds(seq: int, batch: int, size: int, hidden: int, dirs: int, lens: bool = True, states: bool = False,
          empty: bool = True, longest: int | None = None) -> dict:
    """X in [-2, 2]; sequence lengths from 0 (``empty``, else 1) to ``longest`` (default seq),
    the first entry's the longest, and X three times larger past it (onnxruntime quantizes X
    over its first ``longest`` steps only); initial states."""
    f = {"X": RNG.uniform(-2, 2, (seq, batch, size)).astype(F32)}
    if lens:
        longest = seq if longest is None else longest
        n = RNG.integers(0 if empty else 1, longest + 1, batch).astype(I32)
        n[0] = longest
        f["L"] = n
        f["X"][longest:] *= 3
    if states:
        f["h0"] = RNG.uniform(-1, 1, (dirs, batch, hidden)).astype(F32)
        f["c0"] = RNG.uniform(-1, 1, (dirs, batch, hidden)).astype(F32)
    return f


def _lstm_inputs(size: int, hidden: int, dirs: int, lens: bool, states: bool, peepholes: bool):
    """The graph inputs and the LSTM's first eight input names (X, W, R, B, sequence_lens,
    initial_h, initial_c, P)."""
    inputs = [vinfo("X", F32, ["seq", "batch", size])]
    names = ["X", "W", "R", "B", "", "", "", ""]
    if lens:
        inputs.append(vinfo("L", I32, ["batch"]))
        names[4] = "L"
    if states:
        inputs += [vinfo("h0", F32, [dirs, "batch", hidden]), vinfo("c0", F32, [dirs, "batch", hidden])]
        names[5:7] = ["h0", "c0"]
    if peepholes:
        names[7] = "P"
    return inputs, names


def _outputs(names: list[str]) -> list:
    return [vinfo(n, F32, None) for n in names]


def float_lstm(size: int, hidden: int, direction: str, lens: bool = True, states: bool = False,
               peepholes: bool = False, outputs=("Y", "Y_h", "Y_c"), **attrs) -> onnx.ModelProto:
    dirs = DIRECTIONS[direction]
    inputs, names = _lstm_inputs(size, hidden, dirs, lens, states, peepholes)
    weights = [const("W", RNG.uniform(-0.6, 0.6, (dirs, 4 * hidden, size)).astype(F32)),
               const("R", RNG.uniform(-0.6, 0.6, (dirs, 4 * hidden, hidden)).astype(F32)),
               const("B", RNG.uniform(-0.5, 0.5, (dirs, 8 * hidden)).astype(F32))]
    if peepholes:
        weights.append(const("P", RNG.uniform(-0.5, 0.5, (dirs, 3 * hidden)).astype(F32)))
    while not names[-1]:
        names.pop()
    outs = [o if o in outputs else "" for o in ("Y", "Y_h", "Y_c")]
    node = helper.make_node("LSTM", names, outs, name="lstm", hidden_size=hidden, direction=direction, **attrs)
    g = helper.make_graph([node], "lstm", inputs, _outputs([o for o in outs if o]), initializer=weights)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def quantized(model: onnx.ModelProto, per_channel: bool, tmp_path) -> onnx.ModelProto:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    onnx.save(model, tmp_path / "f.onnx")
    quantize_dynamic(tmp_path / "f.onnx", tmp_path / "q.onnx", weight_type=QuantType.QInt8, per_channel=per_channel)
    q = onnx.load(tmp_path / "q.onnx")
    assert [(n.domain, n.op_type) for n in q.graph.node] == [(MS, "DynamicQuantizeLSTM")]
    return q


# ----------------------------------------------------------------------------- quantize_dynamic's models

BINDINGS = ((7, 3), (1, 1), (10, 6))  # (seq, batch)


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_quantize_dynamic_lstm(target, tmp_path, direction, per_channel):
    # sequence lengths from 0 to seq, initial states, every output
    size, hidden = 5, 8
    model = quantized(float_lstm(size, hidden, direction, states=True), per_channel, tmp_path)
    scale = next(t for t in model.graph.initializer if t.name == "W_scale")
    assert len(scale.dims) == (2 if per_channel else 1)
    dirs = DIRECTIONS[direction]
    check(model, target, [feeds(s, b, size, hidden, dirs, states=True) for s, b in BINDINGS]
          + [feeds(8, 4, size, hidden, dirs, states=True, longest=5)])


def test_quantize_dynamic_lstm_peepholes_no_lengths(target, tmp_path):
    size, hidden = 6, 4
    model = quantized(float_lstm(size, hidden, "bidirectional", lens=False, peepholes=True), True, tmp_path)
    check(model, target, [feeds(s, b, size, hidden, 2, lens=False) for s, b in BINDINGS])


@pytest.mark.parametrize("outputs", [("Y_h", "Y_c"), ("Y_c",), ("Y",)])
def test_quantize_dynamic_lstm_outputs(target, tmp_path, outputs):
    # without Y, onnxruntime quantizes a finished entry's last hidden state at later steps
    # (zero when Y is an output): uneven lengths show the difference. (An entry of length 0
    # without Y is left out: onnxruntime then quantizes memory it never wrote.)
    size, hidden = 5, 8
    model = quantized(float_lstm(size, hidden, "bidirectional", outputs=outputs), False, tmp_path)
    check(model, target, [feeds(s, b, size, hidden, 2, empty=False) for s, b in BINDINGS])


def test_quantize_dynamic_lstm_larger(target, tmp_path):
    # wider layers: the int32 sums over more terms, hidden 40 (gates 160 columns)
    size, hidden = 48, 40
    model = quantized(float_lstm(size, hidden, "bidirectional"), True, tmp_path)
    check(model, target, [feeds(s, b, size, hidden, 2) for s, b in ((12, 5), (3, 2))])


# ----------------------------------------------------------------------------- written by hand


def hand_lstm(size: int, hidden: int, direction: str, w_dtype, r_dtype, per_column: tuple[bool, bool],
              zero_points: tuple, lens: bool = True, **attrs) -> onnx.ModelProto:
    """A DynamicQuantizeLSTM with random 8-bit W ([dirs, size, 4 * hidden]) and R, scales per
    direction or per column, and the given zero points (one value per direction, repeated
    over the columns when per column)."""
    dirs = DIRECTIONS[direction]
    inputs, names = _lstm_inputs(size, hidden, dirs, lens, False, False)
    inits = []
    for what, dtype, k, per_col, zps in (("W", w_dtype, size, per_column[0], zero_points[0]),
                                         ("R", r_dtype, hidden, per_column[1], zero_points[1])):
        info = np.iinfo(dtype)
        inits.append(const(what, RNG.integers(info.min, info.max + 1, (dirs, k, 4 * hidden)).astype(dtype)))
        shape = (dirs, 4 * hidden) if per_col else (dirs,)
        inits.append(const(f"{what}_scale", RNG.uniform(0.5, 1.5, shape).astype(F32) / (k * 64)))
        z = np.asarray(zps, dtype).reshape(dirs, 1)
        inits.append(const(f"{what}_zero_point", np.broadcast_to(z, (dirs, 4 * hidden)).copy() if per_col
                           else z.reshape(dirs)))
    inits.append(const("B", RNG.uniform(-0.5, 0.5, (dirs, 8 * hidden)).astype(F32)))
    node = helper.make_node("DynamicQuantizeLSTM", names + ["W_scale", "W_zero_point", "R_scale", "R_zero_point"],
                            ["Y", "Y_h", "Y_c"], name="qlstm", domain=MS, hidden_size=hidden, direction=direction,
                            **attrs)
    g = helper.make_graph([node], "qlstm", inputs, _outputs(["Y", "Y_h", "Y_c"]), initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("case", [
    # W dtype, R dtype, per column (W, R), zero points per direction (W, R)
    (U8, U8, (False, False), ((131, 120), (128, 97))),
    (U8, U8, (True, True), ((140, 140), (110, 110))),
    (U8, U8, (False, True), ((3, 250), (128, 128))),
    (I8, I8, (False, False), ((-3, 5), (4, -7))),
    (I8, I8, (True, False), ((0, 0), (4, -7))),
], ids=["u8_per_tensor", "u8_per_column", "u8_per_column_r", "i8_per_tensor", "i8_per_column_w"])
def test_hand_written(target, case):
    w_dtype, r_dtype, per_column, zps = case
    size, hidden = 7, 6
    model = hand_lstm(size, hidden, "bidirectional", w_dtype, r_dtype, per_column, zps)
    check(model, target, [feeds(s, b, size, hidden, 2) for s, b in BINDINGS])


@pytest.mark.parametrize("attrs", [
    {"clip": 0.7},
    {"input_forget": 1},
    {"activations": ["HardSigmoid", "Tanh", "Softsign", "Sigmoid", "Relu", "Tanh"],
     "activation_alpha": [0.3], "activation_beta": [0.4]},
], ids=["clip", "input_forget", "activations"])
def test_hand_written_attributes(target, attrs):
    size, hidden = 4, 5
    model = hand_lstm(size, hidden, "bidirectional", I8, I8, (False, False), ((0, 0), (0, 0)), **attrs)
    check(model, target, [feeds(s, b, size, hidden, 2) for s, b in BINDINGS])


def test_refusals():
    # what onnxruntime rejects, and what is not implemented, fails at compile time naming
    # node, op and reason
    def refused(match: str, **kw) -> None:
        model = kw.pop("model", None) or hand_lstm(3, 2, "forward", I8, I8, (False, False), ((0,), (0,)), **kw)
        with pytest.raises(CompileError, match=r"node 'qlstm' \(DynamicQuantizeLSTM\): " + match):
            build(model, "native")

    refused("layout is not an attribute", layout=1)
    refused("activations lists 2 functions", activations=["Sigmoid", "Tanh"])
    refused("clip -1.0 must be positive", clip=-1.0)

    def edited(dtype=I8, **changes) -> onnx.ModelProto:
        m = hand_lstm(3, 2, "forward", dtype, dtype, (True, False), ((0,), (0,)))
        for name, arr in changes.items():
            t = next(t for t in m.graph.initializer if t.name == name)
            t.CopyFrom(const(name, arr))
        return m

    refused("W_zero_point 'W_zero_point': per-column zero points of int8 weights must be 0", model=edited(W_zero_point=np.ones((1, 8), I8)))
    refused("W_zero_point 'W_zero_point': per-column zero points of uint8 weights must all be equal",
            model=edited(U8, W_zero_point=np.arange(8, dtype=U8).reshape(1, 8)))
    refused("W_zero_point 'W_zero_point' has dtype uint8; it must be W's, int8",
            model=edited(W_zero_point=np.zeros((1, 8), U8)))
    refused("W_scale 'W_scale' has shape .* both must be", model=edited(W_scale=np.ones(1, F32)))
    refused("R 'R' has dtype uint8; W and R must have one dtype",
            model=edited(R=np.zeros((1, 2, 8), U8), R_zero_point=np.zeros(1, U8)))
    runtime_zp = hand_lstm(3, 2, "forward", I8, I8, (False, False), ((0,), (0,)))
    runtime_zp.graph.initializer.remove(next(t for t in runtime_zp.graph.initializer if t.name == "R_zero_point"))
    runtime_zp.graph.input.append(vinfo("R_zero_point", I8, [1]))
    refused("R_zero_point 'R_zero_point' must be a constant", model=runtime_zp)
    int64_lens = hand_lstm(3, 2, "forward", I8, I8, (False, False), ((0,), (0,)))
    int64_lens.graph.input[1].CopyFrom(vinfo("L", np.int64, ["batch"]))
    refused("sequence_lens 'L' has dtype int64; DynamicQuantizeLSTM takes int32", model=int64_lens)
