"""A call can be stopped: ``run(timeout=)`` and ``Model.cancel()`` from another thread raise
ModelError with status CANCELLED, on both targets, and the model runs correctly afterwards.
On both targets kernels poll the context's cancel flag once per row and the VM before every
instruction. No timing thresholds here (benchmarks/cancel.py
measures the latency)."""
import threading
import time

import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from test_vm import _module
from toolkit.vm import isa
from util import build, make_model, vinfo

CANCELLED = 6
# a 5120^3 MatMul (0.27 TFLOP): about a second natively even at AVX-512's 250 GFLOP/s, several
# on wasm32, far past the 0.2 s limits below. (At 3072^3 the native call took 0.23 s on a
# 2-vCPU Zen 5, and a cancel 0.2 s after the timer started could land after it ended.)
N = 5120


@pytest.fixture(scope="module")
def matmul_models():
    m = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                   [vinfo("a", np.float32, ["n", "k"]), vinfo("b", np.float32, ["k", "m"])],
                   [vinfo("y", np.float32, None)])
    return {t: build(m, t) for t in ("wasm32", "native")}


def _small(seed=0):
    rng = np.random.default_rng(seed)
    return {"a": rng.standard_normal((3, 4)).astype(np.float32), "b": rng.standard_normal((4, 5)).astype(np.float32)}


def _runs_correctly(mod):
    feeds = _small()
    np.testing.assert_allclose(mod.run(feeds)["y"], feeds["a"] @ feeds["b"], rtol=1e-5, atol=1e-5)


def _big():
    return {"a": np.ones((N, N), np.float32), "b": np.ones((N, N), np.float32)}


def test_timeout_stops_a_long_call(matmul_models, target):
    mod = matmul_models[target]
    _runs_correctly(mod)
    t0 = time.perf_counter()
    with pytest.raises(wasm_runtime.ModelError, match=r"the call was timed out after 0.2 s") as e:
        mod.run(_big(), timeout=0.2)
    print(f"{target}: stopped {time.perf_counter() - t0 - 0.2:.4f} s after its deadline")
    assert e.value.status == CANCELLED
    _runs_correctly(mod)


def test_cancel_from_another_thread(matmul_models, target):
    mod = matmul_models[target]
    stopped = []
    feeds = _big()  # made first: a cancel that came before the call started would be cleared by it
    timer = threading.Timer(0.2, lambda: (stopped.append(time.perf_counter()), mod.cancel()))
    timer.start()
    with pytest.raises(wasm_runtime.ModelError, match="the call was cancelled") as e:
        mod.run(feeds)
    print(f"{target}: cancel took {time.perf_counter() - stopped[0]:.4f} s")
    assert e.value.status == CANCELLED
    _runs_correctly(mod)
    # a cancel while no call runs does not stop the next one, nor touch a context trim() freed
    mod.cancel()
    _runs_correctly(mod)
    mod.trim()
    mod.cancel()
    _runs_correctly(mod)


def test_a_call_that_finishes_in_time_is_not_stopped(matmul_models, target):
    mod = matmul_models[target]
    feeds = _small(1)
    np.testing.assert_allclose(mod.run(feeds, timeout=60)["y"], feeds["a"] @ feeds["b"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("timeout", [0, -1, "1", float("nan")])
def test_a_bad_timeout_is_refused(matmul_models, timeout):
    with pytest.raises(wasm_runtime.ModelError, match="timeout must be a positive number of seconds"):
        matmul_models["native"].run(_small(), timeout=timeout)


def _spin_forever(enc):
    """A jump to itself before RETURN: it passes verification (loops are legal) and never
    ends, so only interruption can stop it."""
    at = len(enc.words) - 1
    enc.words[at:at] = isa.encode("JUMP", at)


def test_a_program_that_never_ends_is_stopped(target):
    mod = _module(target, _spin_forever)
    x = np.array([1, -2], np.float32)
    for _ in range(2):
        with pytest.raises(wasm_runtime.ModelError, match="timed out after 0.1 s") as e:
            mod.run({"x": x}, timeout=0.1)
        assert e.value.status == CANCELLED
