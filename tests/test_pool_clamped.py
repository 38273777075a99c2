"""Natively, a padded 2-D MaxPool of unit dilations reads its input with the taps clamped to
the input's edges instead of a padded copy (plan.plan_pool, conv_pool._max_clamped);
wasm32, a dilated window, or a window that can lie wholly in the padding keep the copy. The
kernel plan says which, and each kernel runs on every target and CPU level: where the
policy picks one route, the other is asked for by name (``routes``). Every case runs against
onnx.reference (exactly) at batch sizes 1, 2 and 0 from one module: symmetric and
asymmetric pads, odd sizes, ceil_mode's overhang without pads, a 5 x 5 window, float16 and
uint8."""
import numpy as np
import pytest
from onnx import helper

from util import check_model, is_native, kernel_targets, make_model, plans, vinfo

N = helper.make_node


def _pool(h: int, w: int, dtype=np.float32, **attrs):
    return make_model([N("MaxPool", ["x"], ["y"], name="pool", **attrs)], [vinfo("x", dtype, ["n", 3, h, w])],
                      [vinfo("y", dtype, None)])


def _route(model, target: str, routes=None) -> str:
    return plans(model, target, routes=routes)["pool"].route


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


@pytest.mark.parametrize("target", kernel_targets())
@pytest.mark.parametrize("case", list(CASES))
def test_max_pool_clamped(target, case):
    h, w, dtype, attrs, clamps = CASES[case]
    model = _pool(h, w, dtype, **attrs)
    policy = "clamped" if clamps and is_native(target) else "padded"
    assert _route(model, target) == policy
    check_model(model, target, _feeds(h, w, dtype), rtol=0, atol=0)
    if clamps:  # the other kernel, asked for by name
        other = {"pool": "padded" if policy == "clamped" else "clamped"}
        assert _route(model, target, other) == other["pool"]
        check_model(model, target, _feeds(h, w, dtype), rtol=0, atol=0, routes=other)
    else:
        with pytest.raises(Exception, match="route 'clamped' cannot run it"):
            _route(model, target, {"pool": "clamped"})
