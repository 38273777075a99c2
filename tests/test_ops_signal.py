"""Signal and vision ops (toolkit/frontend/onnx/ops/signal.py): DFT, STFT, TensorScatter,
RoiAlign, MaxRoiPool, AffineGrid, TfIdfVectorizer, MelWeightMatrix — against onnx.reference
(numpy where noted), each module compiled once per target and run with several bindings of
its symbolic dims (power-of-two and other transform lengths from one module)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from util import build, check_model, const, make_model, ort_reference, rand, reference, vinfo
from toolkit.ir.graph import CompileError

RNG = np.random.default_rng(53)
F32, F64, F16, I32, I64 = np.float32, np.float64, np.float16, np.int32, np.int64


def node(op: str, ins: list[str], outs: list[str], **attrs):
    return helper.make_node(op, ins, outs, name=outs[0], **attrs)


# ----------------------------------------------------------------------------- DFT


@pytest.mark.parametrize("opset,axis,inverse,onesided,c", [
    (17, 1, 0, 0, 1), (17, 1, 0, 0, 2), (17, 1, 1, 0, 2), (17, 1, 0, 1, 1), (17, 1, 1, 1, 2),
    (20, -2, 0, 0, 2), (20, 0, 0, 1, 1), (20, -3, 1, 0, 1), (20, 1, 1, 1, 2), (20, -2, 1, 1, 2),
])
def test_dft(target, opset, axis, inverse, onesided, c):
    attrs = dict(inverse=inverse, onesided=onesided)
    inits = []
    ins = ["x"]
    if opset == 17:
        attrs["axis"] = axis
    else:
        inits.append(const("axis", np.array(axis, I64)))
        ins += ["", "axis"]
    model = make_model([node("DFT", ins, ["y"], **attrs)], [vinfo("x", F32, ["a", "b", c])],
                       [vinfo("y", F32, None)], inits, opset=opset)
    # lengths: powers of two (radix-2) and others (Bluestein), and 1
    shapes = [(8, 4), (5, 3), (12, 16), (1, 7), (6, 1), (31, 2)]
    if inverse and onesided:  # the IRFFT's default length 2 * (dim - 1) must be positive
        shapes = [(a, b) for a, b in shapes if (a, b)[axis % 3] > 1]
    check_model(model, target, [{"x": rand(RNG, (a, b, c))} for a, b in shapes], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [F64, F16])
def test_dft_dtypes(target, dtype):
    model = make_model([node("DFT", ["x"], ["y"], axis=1)], [vinfo("x", dtype, [2, "n", 2])],
                       [vinfo("y", dtype, None)], opset=17)
    tol = 1e-10 if dtype == F64 else 2e-2
    check_model(model, target, [{"x": rand(RNG, (2, n, 2), dtype)} for n in (16, 10, 3)], rtol=tol, atol=tol)


def test_dft_length_and_axis_at_run_time(target):
    """dft_length and axis as graph inputs: the output's signal dims are computed at run time
    (truncating and zero-padding the signal)."""
    model = make_model([node("DFT", ["x", "len", "axis"], ["y"], onesided=1)],
                       [vinfo("x", F32, ["a", "b", 1]), vinfo("len", I64, []), vinfo("axis", I64, [])],
                       [vinfo("y", F32, None)], opset=20)
    feeds = [{"x": rand(RNG, (a, b, 1)), "len": np.array(n, I64), "axis": np.array(ax, I64)}
             for a, b, n, ax in ((4, 6, 8, 0), (4, 6, 3, 1), (7, 2, 7, -2), (5, 5, 16, -3))]
    m = check_model(model, target, feeds, rtol=1e-4, atol=1e-4)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'y' \(DFT\): dft_length is 0"):
        m.run({"x": rand(RNG, (2, 2, 1)), "len": np.array(0, I64), "axis": np.array(0, I64)})
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'y' \(DFT\): axis 2 is out of range"):
        m.run({"x": rand(RNG, (2, 2, 1)), "len": np.array(2, I64), "axis": np.array(2, I64)})


def test_dft_irfft_default_length(target):
    """IRFFT's default length 2 * (n - 1) from a symbolic dim; the inverse of an RFFT."""
    nodes = [node("DFT", ["x"], ["spec"], axis=1, onesided=1), node("DFT", ["spec"], ["y"], axis=1, onesided=1,
                                                                     inverse=1)]
    model = make_model(nodes, [vinfo("x", F64, [3, "n", 1])], [vinfo("y", F64, None)], opset=17)
    m = check_model(model, target, [{"x": rand(RNG, (3, n, 1), F64)} for n in (8, 6, 10)], rtol=1e-9, atol=1e-9)
    x = rand(RNG, (3, 12, 1), F64)
    np.testing.assert_allclose(m.run({"x": x})["y"], x, atol=1e-12)


def test_dft_large_lengths(target):
    """Long lines, where the FFT paths matter (numpy's FFT as reference: the same as
    onnx.reference's, which calls it)."""
    model = make_model([node("DFT", ["x"], ["y"], axis=1)], [vinfo("x", F64, [1, "n", 2])], [vinfo("y", F64, None)],
                       opset=17)
    m = build(model, target)
    for n in (1024, 1000, 997):
        x = rand(RNG, (1, n, 2), F64)
        want = np.fft.fft(x[..., 0] + 1j * x[..., 1], axis=1)
        got = m.run({"x": x})["y"]
        np.testing.assert_allclose(got[..., 0] + 1j * got[..., 1], want, atol=1e-9)


def test_dft_errors(target):
    def model(axis):
        return make_model([node("DFT", ["x"], ["y"], axis=axis)], [vinfo("x", F32, [2, 3, 1])],
                          [vinfo("y", F32, None)], opset=17)

    with pytest.raises(CompileError, match=r"node 'y' \(DFT\): axis 2 is out of range for rank 3"):
        build(model(2), target)
    bad = make_model([node("DFT", ["x"], ["y"], axis=1)], [vinfo("x", F32, [2, 3, 3])], [vinfo("y", F32, None)],
                     opset=17)
    with pytest.raises(CompileError, match=r"must end in a dim of 1 \(real\) or 2 \(complex\)"):
        build(bad, target)
    ints = make_model([node("DFT", ["x"], ["y"], axis=1)], [vinfo("x", I32, [2, 3, 1])], [vinfo("y", I32, None)],
                      opset=17)
    with pytest.raises(CompileError, match=r"has dtype int32; DFT takes float16, float32, float64"):
        build(ints, target)


# ----------------------------------------------------------------------------- STFT


@pytest.mark.parametrize("onesided,c,window,frame_length", [
    (1, 1, True, False), (0, 2, True, True), (1, 1, False, True), (0, 1, False, False),
])
def test_stft(target, onesided, c, window, frame_length):
    fl = 12
    ins = ["x", "step", "win" if window else "", "fl" if frame_length else ""]
    inits = [const("step", np.array(5, I64))]
    if window:
        inits.append(const("win", (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(fl) / fl)).astype(F32)))
    if frame_length:
        inits.append(const("fl", np.array(fl, I64)))
    model = make_model([node("STFT", ins, ["y"], onesided=onesided)], [vinfo("x", F32, ["b", "n", c])],
                       [vinfo("y", F32, None)], inits, opset=17)
    lengths = (40, 12, 33) if window or frame_length else (16, 9, 1)
    check_model(model, target, [{"x": rand(RNG, (b, n, c))} for b, n in zip((2, 1, 3), lengths)], rtol=1e-4,
                atol=1e-4)


def test_stft_sizes_at_run_time(target):
    """frame_step and frame_length as graph inputs (frames and bins computed at run time)."""
    model = make_model([node("STFT", ["x", "step", "", "fl"], ["y"])],
                       [vinfo("x", F32, [1, "n", 1]), vinfo("step", I64, []), vinfo("fl", I64, [])],
                       [vinfo("y", F32, None)], opset=17)
    feeds = [{"x": rand(RNG, (1, n, 1)), "step": np.array(s, I64), "fl": np.array(f, I64)}
             for n, s, f in ((64, 16, 32), (50, 7, 20), (10, 3, 10))]
    m = check_model(model, target, feeds, rtol=1e-4, atol=1e-4)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'y' \(STFT\): frame_length 20 exceeds the signal "
                                                      r"length 10"):
        m.run({"x": rand(RNG, (1, 10, 1)), "step": np.array(2, I64), "fl": np.array(20, I64)})
    with pytest.raises(wasm_runtime.ModelError, match=r"frame_step is 0"):
        m.run({"x": rand(RNG, (1, 10, 1)), "step": np.array(0, I64), "fl": np.array(4, I64)})


def test_stft_frame_longer_than_signal(target):
    model = make_model([node("STFT", ["x", "step", "win"], ["y"])], [vinfo("x", F32, [1, "n", 1])],
                       [vinfo("y", F32, None)], [const("step", np.array(2, I64)), const("win", np.ones(8, F32))],
                       opset=17)
    m = build(model, target)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'y' \(STFT\)"):
        m.run({"x": rand(RNG, (1, 5, 1))})


# ----------------------------------------------------------------------------- TensorScatter


@pytest.mark.parametrize("mode,axis,indices", [("linear", -2, True), ("circular", 2, True), ("linear", 1, False),
                                                ("circular", -3, True)])
def test_tensor_scatter(target, mode, axis, indices):
    shape: list = ["b", 2, 2, 3]
    shape[axis % 4] = "max"
    ushape = list(shape)
    ushape[axis % 4] = "seq"
    ins = ["past", "upd"] + (["idx"] if indices else [])
    model = make_model([node("TensorScatter", ins, ["out"], mode=mode, axis=axis)],
                       [vinfo("past", F32, shape), vinfo("upd", F32, ushape)] +
                       ([vinfo("idx", I64, ["b"])] if indices else []), [vinfo("out", F32, None)], opset=24)

    def feeds(b, mx, seq):
        sizes = {"b": b, "max": mx, "seq": seq}
        full = [sizes.get(d, d) for d in shape]
        up = list(full)
        up[axis % 4] = seq
        f = {"past": rand(RNG, full), "upd": rand(RNG, up)}
        if indices:
            hi = full[axis % 4] - seq
            f["idx"] = RNG.integers(0, hi + 1 if mode == "linear" else 3 * hi + 5, size=b).astype(I64)
        return f

    m = check_model(model, target, [feeds(2, 6, 3), feeds(1, 4, 4), feeds(3, 5, 1)])
    if mode == "linear" and indices:
        bad = feeds(2, 6, 3)
        bad["idx"] = np.array([0, 4], I64)
        with pytest.raises(wasm_runtime.ModelError, match=r"node 'out' \(TensorScatter\): write index 4 plus the "
                                                          r"update's 3 rows does not fit the cache \(batch entry 1\)"):
            m.run(bad)


def test_tensor_scatter_int_and_errors(target):
    model = make_model([node("TensorScatter", ["past", "upd", "idx"], ["out"])],
                       [vinfo("past", I64, ["b", "m", 2]), vinfo("upd", I64, ["b", "s", 2]), vinfo("idx", I64, ["b"])],
                       [vinfo("out", I64, None)], opset=24)
    m = check_model(model, target, [{"past": rand(RNG, (2, 5, 2), I64), "upd": rand(RNG, (2, 2, 2), I64),
                                     "idx": np.array([1, 3], I64)}])
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'out' \(TensorScatter\)"):
        m.run({"past": rand(RNG, (2, 2, 2), I64), "upd": rand(RNG, (2, 3, 2), I64), "idx": np.array([0, 0], I64)})
    bad = make_model([node("TensorScatter", ["past", "upd"], ["out"], axis=0)],
                     [vinfo("past", F32, [2, 3]), vinfo("upd", F32, [2, 3])], [vinfo("out", F32, None)], opset=24)
    with pytest.raises(CompileError, match=r"node 'out' \(TensorScatter\): axis is the batch axis"):
        build(bad, target)


# ----------------------------------------------------------------------------- RoiAlign


def _rois(r, h, w, scale):
    lo = RNG.uniform(-2, 0.7, size=(r, 2)) * np.array([w, h]) / scale
    size = RNG.uniform(0.05, 0.8, size=(r, 2)) * np.array([w, h]) / scale
    return np.concatenate([lo, lo + size], axis=1)


@pytest.mark.parametrize("opset,mode,ctm,ratio", [(16, "avg", "half_pixel", 0), (16, "max", "half_pixel", 2),
                                                   (16, "avg", "output_half_pixel", 2), (10, "avg", None, 0),
                                                   (22, "max", "output_half_pixel", 0)])
def test_roi_align(target, opset, mode, ctm, ratio):
    attrs = dict(mode=mode, output_height=3, output_width=2, sampling_ratio=ratio, spatial_scale=0.5)
    if ctm:
        attrs["coordinate_transformation_mode"] = ctm
    model = make_model([node("RoiAlign", ["x", "rois", "idx"], ["y"], **attrs)],
                       [vinfo("x", F32, ["n", 3, "h", "w"]), vinfo("rois", F32, ["r", 4]), vinfo("idx", I64, ["r"])],
                       [vinfo("y", F32, None)], opset=opset)

    def feeds(n, h, w, r):
        return {"x": rand(RNG, (n, 3, h, w)), "rois": _rois(r, h, w, 0.5).astype(F32),
                "idx": RNG.integers(0, n, size=r).astype(I64)}

    # onnx.reference reads RoiAlign-10 as 16's default half_pixel; 10 is output_half_pixel (16's
    # "backward-compatible behavior"), as onnxruntime has it
    ref = ort_reference if opset == 10 else reference
    m = check_model(model, target, [feeds(2, 10, 8, 5), feeds(1, 5, 12, 1), feeds(3, 7, 7, 9)], rtol=1e-4,
                    atol=1e-5, ref=ref)
    bad = feeds(2, 6, 6, 2)
    bad["idx"] = np.array([0, 2], I64)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'y' \(RoiAlign\): batch index 2 is out of range for a "
                                                      r"batch of 2"):
        m.run(bad)


def test_roi_align_float64(target):
    model = make_model([node("RoiAlign", ["x", "rois", "idx"], ["y"], output_height=2, output_width=2)],
                       [vinfo("x", F64, [1, 2, "h", "w"]), vinfo("rois", F64, ["r", 4]), vinfo("idx", I64, ["r"])],
                       [vinfo("y", F64, None)], opset=16)
    check_model(model, target, [{"x": rand(RNG, (1, 2, h, w), F64), "rois": _rois(r, h, w, 1.0),
                                 "idx": np.zeros(r, I64)} for h, w, r in ((6, 6, 3), (9, 4, 2))], rtol=1e-9,
                atol=1e-9)


# ----------------------------------------------------------------------------- MaxRoiPool


def _max_roi_pool(x, rois, pooled, scale):
    """onnxruntime's MaxRoiPool (onnx.reference has none): ROI corners rounded half away
    from zero, bins floor/ceil of equal fractions clamped to the input, empty bins 0."""
    n_rois, (ph_n, pw_n) = rois.shape[0], pooled
    _, c, h, w = x.shape
    out = np.zeros((n_rois, c, ph_n, pw_n), x.dtype)

    def rnd(v):
        return int(np.sign(v) * np.floor(abs(v) + 0.5))

    for r in range(n_rois):
        b = int(rois[r, 0])
        x1, y1, x2, y2 = (rnd(float(v) * scale) for v in rois[r, 1:])
        rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        bh, bw = rh / ph_n, rw / pw_n
        for ph in range(ph_n):
            hs = min(max(int(np.floor(ph * bh)) + y1, 0), h)
            he = min(max(int(np.ceil((ph + 1) * bh)) + y1, 0), h)
            for pw in range(pw_n):
                ws = min(max(int(np.floor(pw * bw)) + x1, 0), w)
                we = min(max(int(np.ceil((pw + 1) * bw)) + x1, 0), w)
                if he > hs and we > ws:
                    out[r, :, ph, pw] = x[b, :, hs:he, ws:we].max(axis=(1, 2))
    return out


def test_max_roi_pool(target):
    model = make_model([node("MaxRoiPool", ["x", "rois"], ["y"], pooled_shape=[2, 3], spatial_scale=0.5)],
                       [vinfo("x", F32, ["n", 2, "h", "w"]), vinfo("rois", F32, ["r", 5])], [vinfo("y", F32, None)],
                       opset=1)
    m = build(model, target)
    for n, h, w, r in ((2, 8, 10, 4), (1, 5, 5, 1), (3, 12, 6, 6)):
        x = rand(RNG, (n, 2, h, w))
        rois = np.concatenate([RNG.integers(0, n, size=(r, 1)), _rois(r, h, w, 0.5)], axis=1).astype(F32)
        np.testing.assert_allclose(m.run({"x": x, "rois": rois})["y"], _max_roi_pool(x, rois, (2, 3), 0.5))
    bad = np.array([[5, 0, 0, 2, 2]], F32)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'y' \(MaxRoiPool\): batch index 5 is out of range"):
        m.run({"x": rand(RNG, (2, 2, 4, 4)), "rois": bad})


# ----------------------------------------------------------------------------- AffineGrid


@pytest.mark.parametrize("dims,align", [(2, 0), (2, 1), (3, 0), (3, 1)])
def test_affine_grid(target, dims, align):
    """size as a graph input: the grid's spatial dims are read at run time."""
    model = make_model([node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align)],
                       [vinfo("theta", F32, ["n", dims, dims + 1]), vinfo("size", I64, [dims + 2])],
                       [vinfo("grid", F32, None)], opset=20)
    spatial = [(4, 5), (1, 3), (6, 1)] if dims == 2 else [(2, 3, 4), (1, 1, 5), (3, 2, 1)]
    check_model(model, target, [{"theta": rand(RNG, (n, dims, dims + 1)), "size": np.array((n, 3) + s, I64)}
                                for n, s in zip((2, 1, 3), spatial)], rtol=1e-5, atol=1e-5)


def test_affine_grid_constant_size_float64(target):
    """float64: onnx.reference returns float32 whatever theta's dtype (the spec says theta's),
    so numpy computes the expected grid."""
    model = make_model([node("AffineGrid", ["theta", "size"], ["grid"])], [vinfo("theta", F64, ["n", 2, 3])],
                       [vinfo("grid", F64, None)], [const("size", np.array([1, 1, 3, 4], I64))], opset=20)
    m = build(model, target)
    for _ in range(2):
        theta = rand(RNG, (1, 2, 3), F64)
        got = m.run({"theta": theta})["grid"]
        ys, xs = -1 + (2 * np.arange(3) + 1) / 3, -1 + (2 * np.arange(4) + 1) / 4
        base = np.stack([np.broadcast_to(xs, (3, 4)), np.broadcast_to(ys[:, None], (3, 4)), np.ones((3, 4))], -1)
        np.testing.assert_allclose(got, np.einsum("nij,hwj->nhwi", theta, base), atol=1e-12)
        assert got.dtype == F64
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'grid' \(AffineGrid\): size\[0\] and the batch dim"):
        m.run({"theta": rand(RNG, (3, 2, 3), F64)})


# ----------------------------------------------------------------------------- TfIdfVectorizer


@pytest.mark.parametrize("mode,lo,hi,skip,weights", [("TF", 1, 2, 0, False), ("IDF", 2, 3, 2, True),
                                                      ("TFIDF", 1, 3, 1, True), ("IDF", 1, 1, 3, False),
                                                      ("TFIDF", 2, 2, 0, False)])
def test_tfidf(target, mode, lo, hi, skip, weights):
    # 4 unigrams, 3 bigrams, 2 trigrams; one bigram listed twice (the last number wins)
    pool = [2, 3, 5, 7, 2, 3, 3, 5, 2, 3, 2, 3, 5, 3, 5, 7]
    counts = [0, 4, 10]
    indexes = [0, 1, 2, 3, 4, 5, 6, 7, 8]
    attrs = dict(mode=mode, min_gram_length=lo, max_gram_length=hi, max_skip_count=skip, ngram_counts=counts,
                 ngram_indexes=indexes, pool_int64s=pool)
    if weights:
        attrs["weights"] = [0.5 + i for i in range(9)]
    for dtype, shape in ((I64, ["b", "c"]), (I32, ["c"])):
        model = make_model([node("TfIdfVectorizer", ["x"], ["y"], **attrs)], [vinfo("x", dtype, shape)],
                           [vinfo("y", F32, None)], opset=9)
        sizes = [(3, 12), (1, 1), (2, 30)]
        ref = reference
        if mode != "TF" and not weights:
            # onnx.reference fails on IDF and TFIDF without weights (len(None)); the spec's
            # meaning is the TF counts (TFIDF), or 1 where they are positive (IDF)
            tf = make_model([node("TfIdfVectorizer", ["x"], ["y"], **{**attrs, "mode": "TF"})],
                            [vinfo("x", dtype, shape)], [vinfo("y", F32, None)], opset=9)

            def ref(_, feeds):
                counts = reference(tf, feeds)["y"]
                return {"y": (counts > 0).astype(F32) if mode == "IDF" else counts}
        check_model(model, target, [{"x": RNG.integers(1, 8, size=(b, c)[2 - len(shape):]).astype(dtype)}
                                    for b, c in sizes], ref=ref)


def test_tfidf_errors(target):
    strings = make_model([node("TfIdfVectorizer", ["x"], ["y"], mode="TF", min_gram_length=1, max_gram_length=1,
                               max_skip_count=0, ngram_counts=[0], ngram_indexes=[0], pool_strings=["a"])],
                         [vinfo("x", I64, ["c"])], [vinfo("y", F32, None)], opset=9)
    with pytest.raises(CompileError, match=r"node 'y' \(TfIdfVectorizer\): pool_strings: string tensors are not "
                                           r"supported"):
        build(strings, target)


# ----------------------------------------------------------------------------- MelWeightMatrix


def test_mel_weight_matrix(target):
    """All five inputs at run time: the output's dims come from num_mel_bins and dft_length."""
    model = make_model([node("MelWeightMatrix", ["mels", "n", "rate", "lo", "hi"], ["w"])],
                       [vinfo("mels", I64, []), vinfo("n", I64, []), vinfo("rate", I64, []), vinfo("lo", F32, []),
                        vinfo("hi", F32, [])], [vinfo("w", F32, None)], opset=17)
    feeds = [{"mels": np.array(m, I64), "n": np.array(n, I64), "rate": np.array(r, I64), "lo": np.array(lo, F32),
              "hi": np.array(hi, F32)} for m, n, r, lo, hi in ((8, 16, 8192, 0, 4096), (40, 512, 16000, 20, 8000),
                                                               (3, 7, 100, 10, 50))]
    m = check_model(model, target, feeds)
    bad = dict(feeds[0], mels=np.array(0, I64))
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'w' \(MelWeightMatrix\): num_mel_bins is 0"):
        m.run(bad)


def test_mel_weight_matrix_constant_float64(target):
    """Constant inputs (the usual case) fold at compile time; float64 output."""
    inits = [const("mels", np.array(10, I64)), const("n", np.array(64, I64)), const("rate", np.array(16000, I64)),
             const("lo", np.array(0, F32)), const("hi", np.array(8000, F32))]
    model = make_model([node("MelWeightMatrix", ["mels", "n", "rate", "lo", "hi"], ["w"],
                             output_datatype=11), node("MatMul", ["x", "w"], ["y"])],
                       [vinfo("x", F64, ["t", 33])], [vinfo("y", F64, None)], inits, opset=17)
    check_model(model, target, [{"x": rand(RNG, (t, 33), F64)} for t in (2, 5)], rtol=1e-9)
