"""Instances and threads: the VM keeps its run state in a context, so one loaded library
holds several independent models, and threads each with their own instance run at the
same time. A Model shared between threads serializes its calls."""
import threading
import time

import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from toolkit.compiler import compile_model
from util import _TMP, assert_outputs_match, make_model, reference, vinfo

pytestmark = pytest.mark.check  # make check and the full tier: threads running for seconds


def _model():
    """NonZero's count and a symbolic-shape chain: state lives in the shape heap, in run-time
    buffers and in the static arena, all of which two instances must keep apart."""
    return make_model([helper.make_node("Greater", ["x", "zero"], ["pos"]),
                       helper.make_node("NonZero", ["pos"], ["nz"]),
                       helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
                       helper.make_node("Mul", ["x", "x"], ["sq"]),
                       helper.make_node("ReduceSum", ["sq", "axes"], ["total"], keepdims=0),
                       helper.make_node("Mul", ["w", "w"], ["ww"])],
                      [vinfo("x", np.float32, ["n", 6]), vinfo("w", np.float32, [16, 16])],
                      [vinfo("idx", np.int64, ["count", 2]), vinfo("total", np.float32, None),
                       vinfo("ww", np.float32, None)],
                      [helper.make_tensor("zero", 1, [], [0.0]), helper.make_tensor("axes", 7, [1], [1])])


def _feeds(seed: int, n: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((n, 6)).astype(np.float32),
            "w": rng.standard_normal((16, 16)).astype(np.float32)}


def _compiled(target: str, tag: str):
    path = _TMP / f"instances_{tag}.{'wasm' if target == 'wasm32' else 'so'}"
    compile_model(_model(), path, target=target)
    return path


def test_two_native_instances_share_one_library_and_nothing_else():
    path = _compiled("native", "two")
    a, b = wasm_runtime.load(path), wasm_runtime.load(path)
    assert a._b.lib is b._b.lib  # one dlopen: no private copy of the library
    a.set_memory_limit(1)  # a's limit is a's alone
    fa, fb = _feeds(1, 3), _feeds(2, 7)
    assert_outputs_match(b.run(fb), reference(_model(), fb))
    a.set_memory_limit(1 << 30)
    ra = a.run(fa)
    rb = b.run(fb)
    # interleaved runs of different shapes: each instance's outputs are its own
    assert_outputs_match(ra, reference(_model(), fa))
    assert_outputs_match(rb, reference(_model(), fb))
    assert_outputs_match(a.run(fb), reference(_model(), fb))


def test_a_closed_model_refuses_to_run(target):
    m = wasm_runtime.load(_compiled(target, "close"))
    m.close()
    m.close()
    try:
        m.run(_feeds(0, 2))
    except wasm_runtime.ModelError as e:
        assert "closed" in str(e) and e.status == 1
    else:
        raise AssertionError("a closed model ran")


def _hammer(model, seeds, results, errors, until=0.0):
    """Runs the seeds, then (with ``until``) keeps going with more until that time."""
    try:
        seed = seeds[0]
        for seed in seeds:
            f = _feeds(seed, 1 + seed % 9)
            results.append((f, model.run(f)))
        while time.monotonic() < until:
            seed += 1
            f = _feeds(seed, 1 + seed % 9)
            results.append((f, model.run(f)))
    except Exception as e:  # noqa: BLE001 - reported by the test
        errors.append(e)


def test_four_threads_for_seconds(target):
    """Four threads for 3 seconds: two with an instance each, two sharing one (its lock
    serializes them), every run with a new shape. Every output is right, checked against
    onnx.reference after the threads end. (Native instances run truly in parallel: ctypes
    releases the GIL.)"""
    path = _compiled(target, "threads")
    own = [wasm_runtime.load(path) for _ in range(2)]
    shared = wasm_runtime.load(path)
    until = time.monotonic() + 3.0
    results, errors = [], []
    threads = [threading.Thread(target=_hammer, args=(m, range(k * 10_000, k * 10_000 + 10), results, errors, until))
               for k, m in enumerate(own + [shared, shared])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) >= 40
    ref = {}
    for feeds, got in results:
        key = (feeds["x"].tobytes(), feeds["w"].tobytes())
        if key not in ref:
            ref[key] = reference(_model(), feeds)
        assert_outputs_match(got, ref[key])


def test_one_instance_shared_by_threads_serializes(target):
    """A Model shared by threads is correct too: its lock serializes the calls."""
    model = wasm_runtime.load(_compiled(target, "shared"))
    results, errors = [], []
    threads = [threading.Thread(target=_hammer, args=(model, range(k * 50, k * 50 + 10), results, errors))
               for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for feeds, got in results:
        assert_outputs_match(got, reference(_model(), feeds))
