"""BatchNormalization in training mode (14, 15) and Scan-8 (batched, no sequence_lens).

Each model is compiled once per target and run at two or more bindings of its symbols.
BatchNormalization's reference is onnx.reference, except where it departs from the spec
(the running statistics' dtype when it differs from X's: numpy, said where). onnx.reference
cannot run Scan-8 (it reads the empty sequence_lens as a state and ignores the batch axis),
so Scan-8's reference is the spec's pseudo-code in numpy, cross-checked with onnxruntime."""
import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from toolkit.ir.graph import CompileError
from util import build, check_model, const, make_model, ort_reference, rand, vinfo

F32, F16 = np.float32, np.float16

# ----------------------------------------------------------------------------- BatchNormalization


def _bn_model(opset, x_shape, outputs=("y", "rm", "rv"), x_dtype=F32, p_dtype=F32, **attrs):
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], list(outputs), name="bn",
                            **{"training_mode": 1, **attrs})
    c = x_shape[1]
    dtypes = {"y": x_dtype, "rm": p_dtype, "rv": p_dtype}
    return make_model([node], [vinfo("x", x_dtype, x_shape)] + [vinfo(p, p_dtype, [c]) for p in "sbmv"],
                      [vinfo(o, dtypes[o], None) for o in outputs], opset=opset)


def _bn_feeds(rng, shapes, c, x_dtype=F32, p_dtype=F32):
    feeds = []
    for shape in shapes:
        f = {"x": rand(rng, shape, x_dtype)}
        f.update({p: rand(rng, (c,), p_dtype, lo=0.1 if p == "v" else -3) for p in "sbmv"})
        feeds.append(f)
    return feeds


@pytest.mark.parametrize("opset", [14, 15])
def test_batch_norm_training(target, opset):
    """Y by the batch's mean and population variance over N and the spatial axes; the
    running statistics blended by momentum. A batch of one element per channel has
    variance 0."""
    rng = np.random.default_rng(1)
    model = _bn_model(opset, ["N", 3, "H", "W"], epsilon=1e-3, momentum=0.7)
    feeds = _bn_feeds(rng, [(2, 3, 4, 5), (1, 3, 1, 1), (5, 3, 2, 7)], 3)
    check_model(model, target, feeds, rtol=1e-5, atol=1e-5)


def test_batch_norm_training_rank_2_and_y_alone(target):
    """(N, C) input: the statistics are over N alone; only Y asked for; default momentum."""
    rng = np.random.default_rng(2)
    model = _bn_model(15, ["N", "C"], outputs=("y",))
    check_model(model, target, [_bn_feeds(rng, [(n, c)], c)[0] for n, c in ((6, 4), (3, 1))],
                rtol=1e-5, atol=1e-5)


def _bn_training_numpy(feeds, epsilon=1e-5, momentum=0.9):
    """The BatchNormalization-15 spec: statistics of a float16 X in float32, running
    statistics in input_mean's dtype (onnx.reference gives them X's dtype)."""
    x = feeds["x"].astype(F32)
    axes = (0,) + tuple(range(2, x.ndim))
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    shape = (-1,) + (1,) * (x.ndim - 2)
    s, b = (feeds[p].astype(F32).reshape(shape) for p in "sb")
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + epsilon) * s + b
    pt = feeds["m"].dtype
    return {"y": y.astype(feeds["x"].dtype),
            "rm": (feeds["m"] * pt.type(momentum) + mean.astype(pt) * pt.type(1 - momentum)).astype(pt),
            "rv": (feeds["v"] * pt.type(momentum) + var.astype(pt) * pt.type(1 - momentum)).astype(pt)}


def test_batch_norm_training_float16_with_float32_statistics(target):
    """X float16, scale, bias and statistics float32 (BatchNormalization-15's T, T1, T2):
    the running statistics are float32, as T2 says."""
    rng = np.random.default_rng(4)
    model = _bn_model(15, ["N", 3, "L"], x_dtype=F16, p_dtype=F32)
    mod = build(model, target)
    for feeds in _bn_feeds(rng, [(2, 3, 8), (4, 3, 1)], 3, x_dtype=F16, p_dtype=F32):
        got, want = mod.run(feeds), _bn_training_numpy(feeds)
        for name, w in want.items():
            assert got[name].dtype == w.dtype, name
            # Y is rounded to float16 once at the end (a ULP is 2**-10 relative)
            tol = 2e-3 if name == "y" else 1e-5
            np.testing.assert_allclose(got[name], w, rtol=tol, atol=tol, err_msg=name)


def test_batch_norm_training_float16_large_values(target):
    """float16 values whose squares overflow float16 (300 ** 2 > 65504): the variance is
    computed in float32, so Y stays finite."""
    x = np.array([[[-300.0, 300.0]], [[100.0, -100.0]]], F16)  # (2, 1, 2)
    feeds = {"x": x, "s": np.ones(1, F16), "b": np.zeros(1, F16), "m": np.zeros(1, F16), "v": np.ones(1, F16)}
    got = build(_bn_model(15, ["N", 1, "L"], x_dtype=F16, p_dtype=F16), target).run(feeds)
    want = _bn_training_numpy(feeds)
    assert np.isfinite(got["y"]).all() and np.isfinite(got["rv"]).all()
    for name, w in want.items():
        np.testing.assert_allclose(got[name].astype(F32), w.astype(F32), rtol=2e-3, err_msg=name)


def test_batch_norm_training_input_of_rank_1_is_refused():
    model = _bn_model(15, [3, 3], outputs=("y",))
    del model.graph.input[0].type.tensor_type.shape.dim[1]
    with pytest.raises(CompileError, match=r"node 'bn' \(BatchNormalization\): input 'x' has shape float32\(3,\); "
                                           r"expected \(N, C, ...\)"):
        build(model, "native")


def test_batch_norm_inference_with_training_outputs_is_refused():
    model = _bn_model(15, ["N", 2], training_mode=0)
    with pytest.raises(CompileError, match=r"node 'bn' \(BatchNormalization\): outputs 'rm', 'rv' exist only in "
                                           r"training mode; inference computes Y alone"):
        build(model, "native")


def test_batch_norm_9_training_outputs_are_refused():
    """BatchNormalization-9's mean, var, saved_mean and saved_var have no settled meaning."""
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "mean", "var"], name="bn")
    model = make_model([node], [vinfo("x", F32, ["N", 2])] + [vinfo(p, F32, [2]) for p in "sbmv"],
                       [vinfo(o, F32, None) for o in ("y", "mean", "var")], opset=9)
    with pytest.raises(CompileError, match=r"node 'bn' \(BatchNormalization\): outputs 'mean', 'var' are "
                                           r"BatchNormalization-9's training outputs, which are not supported"):
        build(model, "native")


# ----------------------------------------------------------------------------- Scan-8


def _scan8_model(directions=(0, 1), seq_lens=False):
    """Per batch element: a running sum of x (scaled by the outer 'w', read through both
    loops) as the state and its stacked values, and the second scan input (x again, maybe
    reversed) doubled."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["a_t", "w"], ["aw"]),
         helper.make_node("Add", ["s_in", "aw"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["y_t"]),
         helper.make_node("Add", ["b_t", "b_t"], ["z_t"])],
        "body", [vinfo("s_in", F32, None), vinfo("a_t", F32, None), vinfo("b_t", F32, None)],
        [vinfo("s_out", F32, None), vinfo("y_t", F32, None), vinfo("z_t", F32, None)])
    node = helper.make_node("Scan", ["lens" if seq_lens else "", "s0", "x", "x"], ["s", "ys", "zs"], name="scan",
                            body=body, num_scan_inputs=2, directions=list(directions))
    inputs = [vinfo("s0", F32, ["B", "n"]), vinfo("x", F32, ["B", "T", "n"])]
    if seq_lens:
        inputs.append(vinfo("lens", np.int32, ["B"]))
    return make_model([node], inputs, [vinfo(o, F32, None) for o in ("s", "ys", "zs")],
                      [const("w", np.array(0.5, F32))], opset=8)


def _scan8_numpy(feeds, directions=(0, 1)):
    """The Scan-8 pseudo-code: for each batch element, the Scan over axis 1."""
    s0, x = feeds["s0"], feeds["x"]
    batch, steps = x.shape[:2]
    s, ys, zs = np.empty_like(s0), np.empty_like(x), np.empty_like(x)
    for b in range(batch):
        state = s0[b]
        for t in range(steps):
            a_t = x[b, steps - 1 - t] if directions[0] else x[b, t]
            b_t = x[b, steps - 1 - t] if directions[1] else x[b, t]
            state = state + a_t * F32(0.5)
            ys[b, t], zs[b, t] = state, b_t + b_t
        s[b] = state
    return {"s": s, "ys": ys, "zs": zs}


@pytest.mark.parametrize("directions", [(0, 1), (1, 0)])
def test_scan_8(target, directions):
    rng = np.random.default_rng(5)
    model = _scan8_model(directions)
    mod = build(model, target)
    for b, t, n in ((2, 4, 3), (3, 1, 2), (1, 5, 1)):
        feeds = {"s0": rand(rng, (b, n)), "x": rand(rng, (b, t, n))}
        got, want = mod.run(feeds), _scan8_numpy(feeds, directions)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6, err_msg=name)
        for name, w in ort_reference(model, feeds).items():  # the numpy reading, confirmed
            np.testing.assert_allclose(w, want[name], rtol=1e-6, atol=1e-6, err_msg=name)


def test_scan_8_the_onnx_case(target):
    """onnx's test_scan_sum, at batch 1 and then at batch 3."""
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "next"], ["sum_out"]),
         helper.make_node("Identity", ["sum_out"], ["scan_out"])],
        "scan_body", [vinfo("sum_in", F32, [2]), vinfo("next", F32, [2])],
        [vinfo("sum_out", F32, [2]), vinfo("scan_out", F32, [2])])
    node = helper.make_node("Scan", ["", "initial", "x"], ["y", "z"], body=body, num_scan_inputs=1)
    model = make_model([node], [vinfo("initial", F32, ["B", 2]), vinfo("x", F32, ["B", "T", 2])],
                       [vinfo("y", F32, None), vinfo("z", F32, None)], opset=8)
    rng = np.random.default_rng(6)
    feeds = [{"initial": np.zeros((1, 2), F32), "x": np.arange(1, 7, dtype=F32).reshape(1, 3, 2)},
             {"initial": rand(rng, (3, 2)), "x": rand(rng, (3, 4, 2))}]
    mod = check_model(model, target, feeds, ref=ort_reference)
    got = mod.run(feeds[0])
    np.testing.assert_array_equal(got["y"], np.array([[9, 12]], F32))  # onnx's own expectation
    np.testing.assert_array_equal(got["z"], np.array([[[1, 2], [4, 6], [9, 12]]], F32))


def test_scan_8_of_an_empty_batch_and_empty_sequences(target):
    """Zero batch elements: every output is empty along the batch axis. Zero steps: the
    states are the initial ones and the scan outputs are (B, 0, n)."""
    mod = build(_scan8_model(), target)
    out = mod.run({"s0": np.zeros((0, 3), F32), "x": np.zeros((0, 4, 3), F32)})
    assert out["s"].shape == (0, 3) and out["ys"].shape == (0, 4, 3) and out["zs"].shape == (0, 4, 3)
    s0 = np.arange(4, dtype=F32).reshape(2, 2)
    out = mod.run({"s0": s0, "x": np.zeros((2, 0, 2), F32)})
    np.testing.assert_array_equal(out["s"], s0)
    assert out["ys"].shape == (2, 0, 2) and out["zs"].shape == (2, 0, 2)


def test_scan_8_batch_sizes_must_agree(target):
    model = _scan8_model()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "B0"
    mod = build(model, target)
    np.testing.assert_array_equal(mod.run({"s0": np.zeros((2, 1), F32), "x": np.ones((2, 1, 1), F32)})["s"],
                                  np.full((2, 1), 0.5, F32))
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'scan' \(Scan\): 's0' batch size \(dim 0\) vs 'x': "
                                                      r"B0 = 3 does not equal B = 2"):
        mod.run({"s0": np.zeros((3, 1), F32), "x": np.ones((2, 1, 1), F32)})


def test_scan_8_static_batch_mismatch_fails_at_compile_time():
    model = _scan8_model()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 3
    model.graph.input[1].type.tensor_type.shape.dim[0].dim_value = 2
    with pytest.raises(CompileError, match=r"node 'scan' \(Scan\): 's0' batch size \(dim 0\) vs 'x': 3 != 2"):
        build(model, "native")


def test_scan_8_sequence_lens_is_refused():
    with pytest.raises(CompileError, match=r"node 'scan' \(Scan\): sequence_lens \('lens'\) is not supported"):
        build(_scan8_model(seq_lens=True), "native")


def test_scan_8_needs_the_batch_and_sequence_axes():
    model = _scan8_model()
    del model.graph.input[1].type.tensor_type.shape.dim[:2]
    with pytest.raises(CompileError, match=r"node 'scan' \(Scan\): scan input 'x' has shape \(n,\); Scan-8 "
                                           r"needs a leading batch axis and a sequence axis"):
        build(model, "native")
