"""Resize (toolkit/ops/resize.py) against onnx.reference (onnxruntime for Resize-10 and
tf_half_pixel_for_nn, which the reference does not implement): every mode, coordinate
transformation mode and nearest mode, upsampling and downsampling, with scales and sizes
known at compile time or given at run time; each module compiled once with symbolic dims and
run with several bindings and several run-time scales or sizes."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from tests.test_ops_shape import compile_checked, shape_of
from util import _TMP, check_model, const, make_model, ort_reference, rand, reference, vinfo
from toolkit.compiler import compile_model
from toolkit.ir.graph import CompileError

RNG = np.random.default_rng(31)
F32, I64 = np.float32, np.int64
COORDS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric")


def resize(ins: list[str], out: str, **attrs):
    return helper.make_node("Resize", ins, [out], name=out, **attrs)


def floats(name: str, *values: float):
    return const(name, np.array(values, F32))


def ints(name: str, *values: int):
    return const(name, np.array(values, I64))


def compile_error(model, match: str) -> None:
    with pytest.raises(CompileError, match=match):
        compile_model(model, _TMP / "resize_error.so", target="native")


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_modes_and_coordinates(mode, target):
    """Each coordinate transformation mode with constant scales (up, down), run-time scales
    and run-time sizes."""
    nodes, names = [], []
    for c in COORDS:
        for kind, ins in (("up", ["x", "", "up"]), ("down", ["x", "", "down"]), ("rs", ["x", "", "s"]),
                          ("rz", ["x", "", "", "z"])):
            names.append(f"{c}_{kind}")
            nodes.append(resize(ins, names[-1], mode=mode, coordinate_transformation_mode=c))
    model = make_model(nodes, [vinfo("x", F32, ["n", "c", "h", "w"]), vinfo("s", F32, [4]), vinfo("z", I64, [4])],
                       [vinfo(k, F32, None) for k in names],
                       [floats("up", 1, 1, 2, 1.5), floats("down", 1, 1, 0.5, 0.75)], opset=19)

    def feeds(shape, scales, sizes):
        return {"x": rand(RNG, shape), "s": np.array(scales, F32), "z": np.array(sizes, I64)}

    r = compile_checked(model, target, [
        feeds((1, 2, 3, 5), [1, 1, 2, 0.5], [1, 2, 7, 2]),
        feeds((2, 1, 4, 4), [1, 1, 0.7, 1.7], [2, 1, 1, 9]),  # an output dim of 1
        feeds((1, 1, 5, 2), [1, 1, 1, 1.25], [1, 1, 5, 2]),  # h unchanged: copied through
        feeds((1, 2, 2, 3), [1, 2, 3, 0.34], [2, 3, 3, 1]),  # outer axes resized too
    ])
    assert shape_of(r, "half_pixel_up") == "(n, c, 2*h, (3*w // 2))"
    assert shape_of(r, "half_pixel_down") == "(n, c, (h // 2), (3*w // 4))"
    assert shape_of(r, "half_pixel_rs").startswith("(resize_")


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_long_last_axis(mode, target):
    """A last axis of more than TAP_CHUNK (1024) outputs takes its taps from tables filled a
    chunk at a time (codegen/resize.py): 2100 outputs are two whole chunks and a partial
    one, with run-time scales and sizes, and a scale of 1 that copies the axis through."""
    from toolkit.codegen.resize import TAP_CHUNK
    assert 2 * TAP_CHUNK < 2100 < 3 * TAP_CHUNK
    nodes = [resize(["x", "", "s"], "rs", mode=mode), resize(["x", "", "", "z"], "rz", mode=mode,
                                                             coordinate_transformation_mode="align_corners")]
    model = make_model(nodes, [vinfo("x", F32, ["n", "h", "w"]), vinfo("s", F32, [3]), vinfo("z", I64, [3])],
                       [vinfo("rs", F32, None), vinfo("rz", F32, None)], opset=19)
    feeds = [{"x": rand(RNG, (1, 2, 700)), "s": np.array([1, 1.5, 3], F32), "z": np.array([1, 3, 2100], I64)},
             {"x": rand(RNG, (2, 3, 2100)), "s": np.array([1, 1, 1], F32), "z": np.array([2, 1, 1500], I64)}]
    compile_checked(model, target, feeds)


@pytest.mark.parametrize("mode, coord, scales", [("linear", "half_pixel", (2, 2)),
                                                  ("linear", "align_corners", (0.6, 3.1)),
                                                  ("cubic", "asymmetric", (1.5, 0.75)),
                                                  ("cubic", "pytorch_half_pixel", (2, 2.5))])
def test_resize_rows_match_elementwise(mode, coord, scales, target):
    """Constant scales of the last two axes take the rows route (each output row's input rows
    interpolated once into a float64 scratch row, codegen/plan.py ``rows_route``); the same
    scales given at run time take the element-by-element one. The results are the same bits,
    and match onnx.reference; the last case's 1200 x 2.5 = 3000 outputs a row span three
    chunks of tap tables."""
    from util import build, plans

    extra = dict(exclude_outside=1) if mode == "cubic" and coord == "asymmetric" else {}
    const_s = make_model([resize(["x", "", "s"], "y", mode=mode, coordinate_transformation_mode=coord, **extra)],
                         [vinfo("x", F32, ["n", "c", "h", "w"])], [vinfo("y", F32, None)],
                         [floats("s", 1, 1, *scales)], opset=19)
    run_s = make_model([resize(["x", "", "s"], "y", mode=mode, coordinate_transformation_mode=coord, **extra)],
                       [vinfo("x", F32, ["n", "c", "h", "w"]), vinfo("s", F32, [4])], [vinfo("y", F32, None)], opset=19)
    assert [p.route for p in plans(const_s, target).values()] == ["rows"]
    assert [p.route for p in plans(run_s, target).values()] == ["elements"]
    a, b = build(const_s, target), build(run_s, target)
    widths = [(1, 2, 5, 7), (2, 3, 4, 9)] + ([(1, 1, 3, 1200)] if scales[1] == 2.5 else [])
    for shape in widths:
        x = rand(RNG, shape)
        got = a.run({"x": x})["y"]
        np.testing.assert_array_equal(got, b.run({"x": x, "s": np.array((1, 1) + scales, F32)})["y"])
        np.testing.assert_allclose(got, reference(const_s, {"x": x})["y"], rtol=1e-5, atol=1e-5)


def test_resize_nearest_modes(target):
    nodes, names = [], []
    for nm in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
        for c, ins in (("half_pixel", ["x", "", "s"]), ("asymmetric", ["x", "", "s"]),
                       ("align_corners", ["x", "", "", "z"]), ("half_pixel_symmetric", ["x", "", "half"])):
            names.append(f"{nm}_{c}")
            nodes.append(resize(ins, names[-1], coordinate_transformation_mode=c, nearest_mode=nm))
    model = make_model(nodes, [vinfo("x", I64, ["a", "b", "c"]), vinfo("s", F32, [3]), vinfo("z", I64, [3])],
                       [vinfo(k, I64, None) for k in names], [floats("half", 1, 0.5, 2.5)], opset=19)

    def feeds(shape, scales, sizes):
        return {"x": rand(RNG, shape, I64, -100, 100), "s": np.array(scales, F32), "z": np.array(sizes, I64)}

    # scales 2 and 0.5 put source coordinates exactly half-way: the rounding modes differ there
    check_model(model, target, [feeds((2, 3, 4), [1, 2, 0.5], [2, 7, 3]), feeds((1, 5, 3), [2, 0.5, 4], [3, 2, 9]),
                                feeds((3, 2, 6), [1, 1.5, 0.25], [1, 1, 4])])


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_tf_crop_and_resize(mode, target):
    """roi known and run-time, partly outside the input: extrapolation_value there."""
    attrs = {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 7.5}
    nodes = [resize(["x", "roi", "", "z"], "known", **attrs), resize(["x", "r", "s"], "runtime", **attrs),
             resize(["x", "all", "", "z"], "whole", **attrs)]
    model = make_model(nodes, [vinfo("x", F32, [1, "c", "h", "w"]), vinfo("r", F32, [8]), vinfo("s", F32, [4]),
                               vinfo("z", I64, [4])],
                       [vinfo(k, F32, None) for k in ("known", "runtime", "whole")],
                       [floats("roi", 0, 0, -0.2, 0.1, 1, 1, 1.3, 0.8), floats("all", 0, 0, 0, 0, 1, 1, 1, 1)],
                       opset=19)

    def feeds(shape, roi, scales, sizes):
        return {"x": rand(RNG, shape), "r": np.array(roi, F32), "s": np.array(scales, F32),
                "z": np.array(sizes, I64)}

    check_model(model, target, [
        feeds((1, 2, 4, 5), [0, 0, 0.1, -0.3, 1, 1, 0.9, 1.2], [1, 1, 2, 0.6], [1, 2, 6, 3]),
        feeds((1, 1, 3, 3), [0, 0, 0.25, 0.25, 1, 1, 0.75, 0.75], [1, 1, 1.5, 3], [1, 1, 1, 4]),
        feeds((1, 2, 5, 4), [0, 0, 0, 0, 1, 1, 1, 1], [1, 1, 1, 1], [1, 2, 5, 4]),  # the whole input
    ])


def test_resize_cubic_and_linear_options(target):
    nodes = [resize(["x", "", "s"], "a05", mode="cubic", cubic_coeff_a=-0.5),
             resize(["x", "", "s"], "excl", mode="cubic", exclude_outside=1),
             resize(["x", "", "s"], "lin_excl", mode="linear", exclude_outside=1),
             resize(["x", "", "", "z"], "both", mode="cubic", cubic_coeff_a=-0.6, exclude_outside=1,
                    coordinate_transformation_mode="align_corners")]
    model = make_model(nodes, [vinfo("x", F32, ["h", "w"]), vinfo("s", F32, [2]), vinfo("z", I64, [2])],
                       [vinfo(k, F32, None) for k in ("a05", "excl", "lin_excl", "both")], opset=19)
    check_model(model, target, [
        {"x": rand(RNG, (4, 5)), "s": np.array([2, 0.6], F32), "z": np.array([7, 3], I64)},
        {"x": rand(RNG, (2, 2)), "s": np.array([3, 1.5], F32), "z": np.array([1, 5], I64)},
        {"x": rand(RNG, (6, 1)), "s": np.array([0.5, 4], F32), "z": np.array([6, 2], I64)},
    ])


@pytest.mark.parametrize("dtype", [np.int64, np.uint8, np.int32, np.float64, np.float16])
def test_resize_dtypes(dtype, target):
    """Interpolated integers are rounded half to even and saturated (cubic overshoots)."""
    nodes = [resize(["x", "", "s"], m, mode=m) for m in ("nearest", "linear", "cubic")]
    model = make_model(nodes, [vinfo("x", dtype, ["h", "w"]), vinfo("s", F32, [2])],
                       [vinfo(m, dtype, None) for m in ("nearest", "linear", "cubic")], opset=19)
    lo, hi = (0, 256) if dtype == np.uint8 else (-50, 50)

    def feeds(shape, scales):
        x = rand(RNG, shape, dtype, lo, hi)
        if dtype == np.uint8:
            x[::2] = 255  # cubic overshoots past 255 and below 0 next to these
        return {"x": x, "s": np.array(scales, F32)}

    tol = {"rtol": 2e-3, "atol": 2e-3} if dtype == np.float16 else {}
    check_model(model, target, [feeds((3, 4), [2, 1.5]), feeds((5, 2), [0.6, 3]), feeds((2, 6), [2.5, 0.5])], **tol)


def test_resize_axes_and_aspect_ratio(target):
    """Resize-18: axes (in their given order), keep_aspect_ratio_policy with constant sizes
    over static dims (shapes known now), symbolic dims and run-time sizes."""
    nodes = [resize(["x", "", "", "z2"], "axes_rt", mode="linear", axes=[3, 2]),
             resize(["x", "", "s1"], "one_axis", mode="cubic", axes=[3]),
             resize(["x", "", "", "z2"], "larger", mode="linear", axes=[2, 3], keep_aspect_ratio_policy="not_larger"),
             resize(["x", "", "", "z2"], "smaller", axes=[2, 3], keep_aspect_ratio_policy="not_smaller"),
             resize(["x", "", "", "k2"], "k_larger", axes=[2, 3], keep_aspect_ratio_policy="not_larger"),
             resize(["y", "", "", "k2"], "static", mode="cubic", axes=[1, 2], keep_aspect_ratio_policy="not_smaller")]
    outs = ("axes_rt", "one_axis", "larger", "smaller", "k_larger", "static")
    model = make_model(nodes, [vinfo("x", F32, [1, 2, "h", "w"]), vinfo("y", F32, [2, 4, 6]),
                               vinfo("z2", I64, [2]), vinfo("s1", F32, [1])],
                       [vinfo(k, F32, None) for k in outs], [ints("k2", 5, 9)], opset=18)

    def feeds(h, w, sizes, s):
        return {"x": rand(RNG, (1, 2, h, w)), "y": rand(RNG, (2, 4, 6)), "z2": np.array(sizes, I64),
                "s1": np.array([s], F32)}

    r = compile_checked(model, target, [feeds(3, 4, [6, 5], 1.5), feeds(5, 2, [2, 7], 0.5), feeds(4, 4, [4, 4], 2)])
    assert shape_of(r, "static") == "(2, 6, 9)"  # not_smaller: 9 / 6 wins over 5 / 4: 4 * 1.5, 6 * 1.5
    assert shape_of(r, "one_axis").startswith("(1, 2, h, resize_")


def test_resize_negative_axes(target):
    """axes=[-1, -2] is axes=[3, 2]: onnx.reference fails on negative axes (it transposes by
    them unnormalized), so the reference is its output for the same model with [3, 2]."""
    def model(axes):
        return make_model([resize(["x", "", "s"], "y", mode="linear", axes=axes)],
                          [vinfo("x", F32, [1, 2, "h", "w"]), vinfo("s", F32, [2])], [vinfo("y", F32, None)], opset=18)

    positive = model([3, 2])
    check_model(model([-1, -2]), target, [{"x": rand(RNG, (1, 2, 3, 4)), "s": np.array([0.5, 2], F32)},
                                          {"x": rand(RNG, (1, 2, 5, 2)), "s": np.array([3, 0.6], F32)}],
                ref=lambda _, feeds: reference(positive, feeds))


def test_resize_old_versions(target):
    """Resize-11 and -13: roi and scales given but empty when sizes are used."""
    for opset in (11, 13):
        nodes = [resize(["x", "roi", "s"], "scaled", mode="linear"),
                 resize(["x", "roi", "empty", "z"], "sized", mode="cubic", coordinate_transformation_mode="asymmetric")]
        model = make_model(nodes, [vinfo("x", F32, [1, 1, "h", "w"]), vinfo("s", F32, [4]), vinfo("z", I64, [4])],
                           [vinfo("scaled", F32, None), vinfo("sized", F32, None)],
                           [const("roi", np.zeros(0, F32)), const("empty", np.zeros(0, F32))], opset=opset)
        check_model(model, target, [
            {"x": rand(RNG, (1, 1, 3, 4)), "s": np.array([1, 1, 2, 0.5], F32), "z": np.array([1, 1, 5, 2], I64)},
            {"x": rand(RNG, (1, 1, 2, 5)), "s": np.array([1, 1, 1.5, 1.2], F32), "z": np.array([1, 1, 1, 8], I64)}])


def test_resize_10(target):
    """Resize-10 is Upsample's meaning: asymmetric coordinates, nearest rounds down when
    upsampling and up when downsampling. onnxruntime is the reference: onnx.reference's
    Resize has no version-10 form (it reads the scales as roi and fails)."""
    nodes = [resize(["x", "s"], "near"), resize(["x", "s"], "lin", mode="linear"), resize(["x", "c"], "const")]
    model = make_model(nodes, [vinfo("x", F32, [1, 1, "h", "w"]), vinfo("s", F32, [4])],
                       [vinfo(k, F32, None) for k in ("near", "lin", "const")], [floats("c", 1, 1, 2.5, 0.6)], opset=10)
    check_model(model, target, [
        {"x": rand(RNG, (1, 1, 2, 3)), "s": np.array([1, 1, 2.5, 0.6], F32)},
        {"x": rand(RNG, (1, 1, 5, 4)), "s": np.array([1, 1, 0.4, 3], F32)},
    ], ref=ort_reference)


def test_resize_tf_half_pixel_for_nn(target):
    """Resize-11's tf_half_pixel_for_nn (gone at 13): onnxruntime is the reference,
    onnx.reference does not implement the mode."""
    model = make_model([resize(["x", "roi", "s"], "y", coordinate_transformation_mode="tf_half_pixel_for_nn")],
                       [vinfo("x", F32, [1, 1, "h", "w"]), vinfo("s", F32, [4])], [vinfo("y", F32, None)],
                       [const("roi", np.zeros(0, F32))], opset=11)
    check_model(model, target, [{"x": rand(RNG, (1, 1, 3, 4)), "s": np.array([1, 1, 2, 0.5], F32)},
                                {"x": rand(RNG, (1, 1, 4, 2)), "s": np.array([1, 1, 0.75, 3], F32)}],
                ref=ort_reference)


def test_resize_identity_scales_are_a_view(target):
    model = make_model([resize(["x", "", "ones"], "y", mode="cubic")], [vinfo("x", F32, ["n", 3])],
                       [vinfo("y", F32, None)], [floats("ones", 1, 1)], opset=19)
    r = compile_checked(model, target, [{"x": rand(RNG, (2, 3))}, {"x": rand(RNG, (5, 3))}])
    assert r.program.kernels == []


def test_resize_runtime_errors(target):
    nodes = [resize(["x", "", "s"], "scaled"), resize(["x", "", "", "z"], "sized", mode="linear"),
             resize(["x", "", "", "z"], "kept", axes=[0, 1], keep_aspect_ratio_policy="not_larger")]
    model = make_model(nodes, [vinfo("x", F32, ["h", "w"]), vinfo("s", F32, ["k"]), vinfo("z", I64, [2])],
                       [vinfo(k, F32, None) for k in ("scaled", "sized", "kept")], opset=19)
    good = {"x": rand(RNG, (2, 3)), "s": np.array([2, 0.5], F32), "z": np.array([3, 3], I64)}
    m = check_model(model, target, [good])
    cases = [({"s": np.array([2, -1], F32)}, r"node 'scaled' \(Resize\): scales\[1\] is not a positive number"),
             ({"s": np.array([np.nan, 1], F32)}, r"node 'scaled' \(Resize\): scales\[0\] is not a positive number"),
             ({"s": np.array([2, 1, 1], F32)}, r"node 'scaled' \(Resize\): view of 's' as \(2,\)"),
             ({"z": np.array([4, -3], I64)}, r"node 'sized' \(Resize\): sizes\[1\] is -3; sizes must not be negative"),
             ({"s": np.array([1e30, 1], F32)}, r"node 'scaled' \(Resize\): cannot allocate"),
             ({"x": rand(RNG, (0, 3)), "s": np.array([1, 1], F32)},
              r"node 'sized' \(Resize\): cannot resize axis 0 of size 0 to size 3")]
    for change, match in cases:
        with pytest.raises(wasm_runtime.ModelError, match=match):
            m.run({**good, **change})
    kept = make_model(nodes[2:], [vinfo("x", F32, ["h", "w"]), vinfo("z", I64, [2])], [vinfo("kept", F32, None)],
                      opset=19)
    m = check_model(kept, target, [{"x": rand(RNG, (2, 3)), "z": np.array([3, 3], I64)}])
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'kept' \(Resize\): sizes\[0\] is -1; sizes must not be "
                                                      r"negative"):
        m.run({"x": rand(RNG, (2, 3)), "z": np.array([-1, 3], I64)})


def test_resize_compile_errors():
    x = [vinfo("x", F32, [1, 1, "h", "w"])]
    y = [vinfo("y", F32, None)]
    cases = [
        (resize(["x", "", "s", "z"], "y"), 19, [floats("s", 1, 1, 2, 2), ints("z", 1, 1, 4, 4)],
         r"node 'y' \(Resize\): give either scales or sizes, not both"),
        (resize(["x", "", "s"], "y"), 19, [floats("s", 1, 2, 2)],
         r"node 'y' \(Resize\): scales 's' has shape \(3,\); expected \(4,\)"),
        (resize(["x", "", "s"], "y"), 19, [floats("s", 1, 1, -2, 2)],
         r"node 'y' \(Resize\): scales\[2\] is -2.0; scales must be positive"),
        (resize(["x", "", "s"], "y", coordinate_transformation_mode="half_pixel_symmetric"), 18,
         [floats("s", 1, 1, 2, 2)],
         r"node 'y' \(Resize\): coordinate_transformation_mode 'half_pixel_symmetric' does not exist in Resize-18"),
        (resize(["x", "", "s"], "y", nearest_mode="nearest"), 19, [floats("s", 1, 1, 2, 2)],
         r"node 'y' \(Resize\): nearest_mode 'nearest' is not one of"),
        (resize(["x", "", "", "z"], "y", coordinate_transformation_mode="tf_crop_and_resize"), 19,
         [ints("z", 1, 1, 4, 4)], r"node 'y' \(Resize\): tf_crop_and_resize needs the input roi"),
    ]
    for n, opset, inits, match in cases:
        compile_error(make_model([n], x, y, inits, opset=opset), match)
    # every output element's code reads 5**6 inputs (4 taps, or 1 where the scale is 1)
    six = make_model([resize(["x", "", "s"], "y", mode="cubic")], [vinfo("x", F32, [2] * 6), vinfo("s", F32, [6])],
                     y, opset=19)
    compile_error(six, r"node 'y' \(Resize\): cubic resampling of 6 axes at once is not supported")


ANTIALIAS_COORDS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric")


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialias_1d(mode, target):
    """Antialiased downsampling of one axis: constant scales (taps known now), run-time
    scales and sizes (taps counted at run time), every coordinate mode; down to 1 output
    (taps spanning the whole axis, more than 8 of them) and to none."""
    nodes, names = [], []
    for c in ANTIALIAS_COORDS:
        for kind, ins in (("k", ["x", "", "k"]), ("s", ["x", "", "s"]), ("z", ["x", "", "", "z"])):
            names.append(f"{c}_{kind}")
            nodes.append(resize(ins, names[-1], mode=mode, antialias=1, coordinate_transformation_mode=c))
    model = make_model(nodes, [vinfo("x", F32, ["l"]), vinfo("s", F32, [1]), vinfo("z", I64, [1])],
                       [vinfo(k, F32, None) for k in names], [floats("k", 0.375)], opset=19)

    def feeds(n, scale, size):
        return {"x": rand(RNG, (n,)), "s": np.array([scale], F32), "z": np.array([size], I64)}

    # the last binding has no output at all: its taps are not counted (0)
    r = compile_checked(model, target, [feeds(11, 0.3, 4), feeds(20, 0.05, 1), feeds(7, 0.85, 5), feeds(3, 2.5, 8),
                                        feeds(2, 1e-20, 0)])
    assert shape_of(r, "half_pixel_k") == "((3*l // 8),)"


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialias_2d(mode, target):
    """Two axes downsampled at once, by constant and run-time scales and sizes (stretched
    and keeping the aspect ratio), with exclude_outside, another cubic coefficient and
    tf_crop_and_resize; one compiled module, run at two bindings of its symbolic dims."""
    aa = {"mode": mode, "antialias": 1}
    nodes = [resize(["x", "", "k"], "by_k", **aa),
             resize(["x", "", "s"], "by_s", **aa),
             resize(["x", "", "", "z"], "by_z", **aa),
             resize(["x", "", "", "kz"], "by_kz", **aa),
             resize(["x", "", "", "z2"], "aspect", axes=[3, 2], keep_aspect_ratio_policy="not_larger", **aa),
             resize(["x", "", "s"], "excl", exclude_outside=1, cubic_coeff_a=-0.5, **aa),
             resize(["x", "r", "s"], "crop", coordinate_transformation_mode="tf_crop_and_resize",
                    extrapolation_value=2.5, **aa)]
    outs = [n.output[0] for n in nodes]
    model = make_model(nodes, [vinfo("x", F32, [1, "c", "h", "w"]), vinfo("s", F32, [4]), vinfo("z", I64, [4]),
                               vinfo("z2", I64, [2]), vinfo("r", F32, [8])],
                       [vinfo(k, F32, None) for k in outs],
                       [floats("k", 1, 1, 0.5, 0.375), ints("kz", 1, 2, 3, 4)], opset=19)

    def feeds(shape, scales, sizes, aspect, roi):
        return {"x": rand(RNG, shape), "s": np.array(scales, F32), "z": np.array(sizes, I64),
                "z2": np.array(aspect, I64), "r": np.array(roi, F32)}

    r = compile_checked(model, target, [
        feeds((1, 2, 9, 12), [1, 1, 0.5, 0.25], [1, 2, 4, 5], [3, 7], [0, 0, 0.1, -0.2, 1, 1, 0.9, 1.1]),
        feeds((1, 3, 16, 7), [1, 1, 0.3, 0.7], [1, 1, 3, 6], [5, 2], [0, 0, 0, 0.2, 1, 1, 1, 0.6]),
    ])
    assert shape_of(r, "by_k") == "(1, c, (h // 2), (3*w // 8))"
    assert shape_of(r, "by_kz") == "(1, 2, 3, 4)"


@pytest.mark.parametrize("dtype", [np.float64, np.uint8, np.float16])
def test_resize_antialias_dtypes(dtype, target):
    """float64 follows onnx.reference's arithmetic (float32 cubic weights, normalized in
    float32 or float64 as numpy does) to within a few ulps; integers round half to even and
    saturate."""
    nodes = [resize(["x", "", "s"], m, mode=m, antialias=1) for m in ("linear", "cubic")]
    model = make_model(nodes, [vinfo("x", dtype, ["h", "w"]), vinfo("s", F32, [2])],
                       [vinfo(m, dtype, None) for m in ("linear", "cubic")], opset=19)
    lo, hi = (0, 256) if dtype == np.uint8 else (-50, 50)

    def feeds(shape, scales):
        x = rand(RNG, shape, dtype, lo, hi)
        if dtype == np.uint8:
            x[::3] = 255  # cubic overshoots past 255 and below 0 next to these
        return {"x": x, "s": np.array(scales, F32)}

    tol = {np.float64: {"rtol": 1e-12, "atol": 1e-12}, np.float16: {"rtol": 2e-3, "atol": 2e-3}}.get(dtype, {})
    check_model(model, target, [feeds((9, 10), [0.7, 0.45]), feeds((13, 5), [0.2, 0.6]),
                                feeds((4, 6), [0.75, 0.34])], **tol)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialias_upsampling_changes_nothing(mode, target):
    """Upsampling (scale >= 1, and scale 1 with a run-time scale: copied through) with
    antialias=1 gives what it gives without, and both what onnx.reference gives; a
    downsampled axis beside an upsampled one is antialiased alone. (Equal up to float32
    rounding: the reference computes antialiased cubic weights by another float32 formula.)"""
    nodes = [resize(["x", "", "s"], "aa", mode=mode, antialias=1), resize(["x", "", "s"], "plain", mode=mode),
             resize(["x", "", "", "z"], "aa_z", mode=mode, antialias=1), resize(["x", "", "", "z"], "plain_z", mode=mode)]
    model = make_model(nodes, [vinfo("x", F32, ["h", "w"]), vinfo("s", F32, [2]), vinfo("z", I64, [2])],
                       [vinfo(k, F32, None) for k in ("aa", "plain", "aa_z", "plain_z")], opset=19)
    m = check_model(model, target, [
        {"x": rand(RNG, (3, 4)), "s": np.array([2, 1.5], F32), "z": np.array([7, 5], I64)},
        {"x": rand(RNG, (5, 2)), "s": np.array([1, 3.25], F32), "z": np.array([5, 9], I64)},
        {"x": rand(RNG, (6, 3)), "s": np.array([0.5, 2], F32), "z": np.array([4, 3], I64)},
    ])
    for scales, sizes in (([2, 1.5], [7, 5]), ([1, 3.25], [5, 9])):
        got = m.run({"x": rand(RNG, (4, 3)), "s": np.array(scales, F32), "z": np.array(sizes, I64)})
        np.testing.assert_allclose(got["aa"], got["plain"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got["aa_z"], got["plain_z"], rtol=1e-5, atol=1e-5)


def test_resize_antialias_nearest_is_ignored(target):
    """antialias applies to linear and cubic only: nearest with antialias=1 is plain nearest
    (onnx.reference refuses it, so the reference is the model without it)."""
    def model(antialias):
        return make_model([resize(["x", "", "s"], "y", antialias=antialias)],
                          [vinfo("x", F32, ["h", "w"]), vinfo("s", F32, [2])], [vinfo("y", F32, None)], opset=19)

    plain = model(0)
    check_model(model(1), target, [{"x": rand(RNG, (6, 5)), "s": np.array([0.5, 0.4], F32)}],
                ref=lambda _, feeds: reference(plain, feeds))
