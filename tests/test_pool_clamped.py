"""Natively, a padded 2-D MaxPool of unit dilations reads its input with the taps clamped to
the input's edges instead of a padded copy (conv_pool.clamps, conv_pool._max_clamped);
wasm32, a dilated window, or a window that can lie wholly in the padding keep the copy. The
route is read from the kernel's IR (the clamped kernel's left-edge loop is named "ol"), and
every case runs against onnx.reference on both targets at batch sizes 1, 2 and 0 from one
module: symmetric and asymmetric pads, odd sizes, ceil_mode's overhang without pads, a 5 x 5
window, float16 and uint8."""
import numpy as np
import pytest
from onnx import helper

from util import check_model, is_native, lower_model, make_model, native_targets, vinfo

N = helper.make_node


def _pool(h: int, w: int, dtype=np.float32, **attrs):
    return make_model([N("MaxPool", ["x"], ["y"], **attrs)], [vinfo("x", dtype, ["n", 3, h, w])],
                      [vinfo("y", dtype, None)])


def _clamped(model, target: str) -> bool:
    _, _, module = lower_model(model, target)
    kernels = [str(f) for f in module.functions if "maxpool" in f.name]
    assert len(kernels) == 1, [f.name for f in module.functions]
    return any(line.startswith("ol.head") for line in kernels[0].splitlines())


def _feeds(h: int, w: int, dtype) -> list[dict]:
    rng = np.random.default_rng(h * w)
    if dtype == np.uint8:
        return [{"x": rng.integers(0, 256, (n, 3, h, w)).astype(np.uint8)} for n in (1, 2, 0)]
    # negative values only, so a padding value of 0 (a wrong neutral) would show
    return [{"x": (-rng.uniform(0.5, 4, (n, 3, h, w))).astype(dtype)} for n in (1, 2, 0)]


CASES = {
    "3x3_s2_p1": (17, 19, np.float32, dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), True),
    "asymmetric_pads": (9, 12, np.float32, dict(kernel_shape=[3, 3], pads=[0, 2, 2, 1]), True),
    "ceil_overhang": (16, 16, np.float32, dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1), True),
    "5x5_s3_p2": (20, 23, np.float32, dict(kernel_shape=[5, 5], strides=[3, 3], pads=[2, 2, 2, 2]), True),
    "float16": (11, 13, np.float16, dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), True),
    "uint8": (11, 13, np.uint8, dict(kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1]), True),
    "dilated": (15, 15, np.float32, dict(kernel_shape=[3, 3], dilations=[2, 2], pads=[2, 2, 2, 2]), False),
}


@pytest.mark.parametrize("target", ["wasm32", *native_targets()])
@pytest.mark.parametrize("case", list(CASES))
def test_max_pool_clamped(target, case):
    h, w, dtype, attrs, clamps = CASES[case]
    model = _pool(h, w, dtype, **attrs)
    assert _clamped(model, target) == (clamps and is_native(target))
    check_model(model, target, _feeds(h, w, dtype), rtol=0, atol=0)
