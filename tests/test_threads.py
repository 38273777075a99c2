"""Threads inside a call (``load(threads=)``): a kernel split in parts runs part p on thread p
of the context's pool, and the results have the same bits whatever the thread count.

Checked here: the split kernels at 1, 2, 3 and 5 threads (more parts than some products
have panels), at several bindings of their symbolic dims, at every native CPU level and in a
.wasm's threads variant (compile --threads: shared memory, the host's threads each an
instance of the module), equal bit for bit to one thread and close to onnxruntime; a .wasm
without the variant runs on one thread and says why; bad thread counts are refused by name;
a cancelled call stops every thread and the pool runs again; closing a model ends its
threads. No timing here (``make bench`` measures the speed-up)."""
import os
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

import wasm_runtime
from toolkit.compiler import compile_model
from util import build, const, make_model, native_targets, vinfo

pytestmark = pytest.mark.check  # make check and the full tier: several modules, threads, a cancelled call
CANCELLED = 6
THREADS = (2, 3, 5)
# bindings: a lone row, a few rows and more than a row block; n x m products of fewer panels
# than threads (m = 3), ragged ones (17, 70) and several panels per thread (70 at 4 lanes);
# the last one is large enough for the row and elementwise kernels to split
BINDINGS = [dict(n=1, m=3), dict(n=5, m=17), dict(n=40, m=70), dict(n=300, m=203)]


def _split_model():
    """Products and convolutions whose kernels split their work: MatMul on a constant B
    (packed panels), on a run-time B and batched, MatMul after a Relu (the lone-row sparse
    path keeps its work in part 0), Gemm with transposes and C, convolutions (3x3 padded,
    1x1 strided, few pixels in a batch of two, and by Winograd's transforms on a static image:
    several chunks of tile rows), the kernels split by rows or elements when they are
    large (Softmax, LayerNormalization, pools, elementwise), and a LayerNormalization whose
    bias varies along the rows, applied in place by a broadcasting elementwise kernel (a path
    that is not split), each with symbolic dims."""
    rng = np.random.default_rng(7)

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["y1"]),
        helper.make_node("MatMul", ["x", "b"], ["y2"]),
        helper.make_node("MatMul", ["p", "q"], ["y3"]),
        helper.make_node("Relu", ["x"], ["xr"]),
        helper.make_node("MatMul", ["xr", "w2"], ["y4"]),
        helper.make_node("Gemm", ["xt", "w3", "c3"], ["y5"], transA=1, transB=1, alpha=0.5, beta=2.0),
        helper.make_node("Conv", ["img", "k1", "kb1"], ["y6"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["img", "k2"], ["y7"], strides=[2, 2]),
        helper.make_node("Conv", ["small", "k3", "kb3"], ["y8"], pads=[1, 1, 1, 1]),
        helper.make_node("Softmax", ["img"], ["y9"], axis=-1),
        helper.make_node("LayerNormalization", ["img", "ln_s"], ["y10"], axis=-1),
        helper.make_node("MaxPool", ["img"], ["y11"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["img"], ["y12"], kernel_shape=[1, 3], strides=[1, 2]),
        helper.make_node("Mul", ["img", "img"], ["y13"]),
        helper.make_node("Conv", ["wimg", "k4"], ["y14"], pads=[1, 1, 1, 1]),
        helper.make_node("LayerNormalization", ["img", "one", "col"], ["y15"], axis=-1),
    ]
    inputs = [vinfo("x", np.float32, ["n", 37]), vinfo("b", np.float32, [37, "m"]),
              vinfo("p", np.float32, [2, "n", 9]), vinfo("q", np.float32, [2, 9, "m"]),
              vinfo("xt", np.float32, [37, "n"]), vinfo("img", np.float32, [1, 5, "n", "m"]),
              vinfo("small", np.float32, [2, 40, 3, "m"]), vinfo("ln_s", np.float32, ["m"]),
              vinfo("wimg", np.float32, [1, 128, 30, 30]), vinfo("col", np.float32, [1, 1, "n", 1])]
    outputs = [vinfo(f"y{i}", np.float32, None) for i in range(1, 16)]
    inits = [const("w1", r(37, 70)), const("w2", r(37, 45)), const("w3", r(52, 37)), const("c3", r(52)),
             const("k1", r(24, 5, 3, 3)), const("kb1", r(24)), const("k2", r(33, 5, 1, 1)),
             const("k3", r(48, 40, 3, 3)), const("kb3", r(48)), const("k4", r(128, 128, 3, 3) / 30),
             const("one", np.ones(1, np.float32))]
    return make_model(nodes, inputs, outputs, inits)


def _feeds(n: int, m: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shapes = {"x": (n, 37), "b": (37, m), "p": (2, n, 9), "q": (2, 9, m), "xt": (37, n), "img": (1, 5, n, m),
              "small": (2, 40, 3, m), "ln_s": (m,), "wimg": (1, 128, 30, 30), "col": (1, 1, n, 1)}
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}


@pytest.fixture(scope="module")
def split_model():
    return _split_model()


def _load_split(model, target: str, tmp_path) -> wasm_runtime.Model:
    """The model on one thread: natively at a CPU level, or the baseline of a .wasm compiled
    with its threads variant beside it."""
    if target != "wasm32-threads":
        return build(model, target)
    compile_model(model, tmp_path / "split.wasm", target="wasm32", threads=True)
    return wasm_runtime.load(tmp_path / "split.wasm")


@pytest.mark.parametrize("target", [*native_targets(), "wasm32-threads"])
def test_threads_give_the_same_bits(split_model, target, tmp_path):
    one = _load_split(split_model, target, tmp_path)
    assert one.threads == 1  # the suite's default (tests/conftest.py)
    assert one.variant in (None, "baseline")
    parted = subprocess.run([sys.executable, "-m", "toolkit.cli", "inspect", str(one.path)],
                            capture_output=True, text=True, check=True).stdout.count("split across threads")
    assert parted >= 12, "the products, convolutions and large row and elementwise kernels should split"
    many = {t: wasm_runtime.load(one.path, threads=t) for t in THREADS}
    for t, m in many.items():
        assert (m.threads, m.threads_note) == (t, "")
        assert m.variant in (None, "threads")
    session = ort.InferenceSession(split_model.SerializeToString(), providers=["CPUExecutionProvider"])
    for bind in BINDINGS:
        feeds = _feeds(**bind)
        want = one.run(feeds)
        ref = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
        for name, got in want.items():
            np.testing.assert_allclose(got, ref[name], rtol=1e-4, atol=1e-4, err_msg=f"{name} at {bind}")
        for t, m in many.items():
            for name, got in m.run(feeds).items():
                assert got.tobytes() == want[name].tobytes(), f"{name} at {bind} on {t} threads"


def test_wasm32_runs_on_one_thread_and_says_why(split_model):
    mod = build(split_model, "wasm32")
    two = wasm_runtime.load(mod.path, threads=2)
    assert two.threads == 1
    assert "1 of 2 threads" in two.threads_note and "compile with --threads" in two.threads_note
    feeds = _feeds(5, 17)
    a, b = mod.run(feeds), two.run(feeds)
    assert all(a[k].tobytes() == b[k].tobytes() for k in a)


def _matmul():
    return make_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                      [vinfo("a", np.float32, ["n", "k"]), vinfo("b", np.float32, ["k", "m"])],
                      [vinfo("y", np.float32, None)])


@pytest.fixture(scope="module")
def small_native():
    return build(_matmul(), "native").path


@pytest.fixture(scope="module")
def small_threaded(tmp_path_factory):
    path = tmp_path_factory.mktemp("threads") / "mm.wasm"
    compile_model(_matmul(), path, target="wasm32", threads=True)
    return path


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, None])
def test_bad_thread_counts_are_refused(small_native, bad):
    if bad is None:  # load's default is allowed; set_threads needs a count
        with pytest.raises(wasm_runtime.ModelError, match=r"threads must be a whole number .*not None"):
            wasm_runtime.load(small_native).set_threads(None)
        return
    with pytest.raises(wasm_runtime.ModelError, match=rf"threads must be a whole number .*not {bad!r}") as e:
        wasm_runtime.load(small_native, threads=bad)
    assert e.value.status == wasm_runtime.STATUS["INVALID_INPUT"]


def test_bad_environment_thread_count(small_native, monkeypatch):
    monkeypatch.setenv("SYMWASM_THREADS", "many")
    with pytest.raises(wasm_runtime.ModelError, match="SYMWASM_THREADS must be a whole number .*'many'"):
        wasm_runtime.load(small_native)
    monkeypatch.setenv("SYMWASM_THREADS", "3")
    assert wasm_runtime.load(small_native).threads == 3


def _os_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _os_threads_settle(want: int) -> int:
    """The process's OS threads once those that were told to end are gone: a Python thread's
    join returns just before its OS thread exits (up to 5 s; this is not a timing check)."""
    for _ in range(500):
        if (n := _os_threads()) == want:
            return n
        time.sleep(0.01)
    return _os_threads()


@pytest.mark.parametrize("kind", ["native", "wasm32-threads"])
def test_cancel_stops_every_thread_and_the_pool_runs_again(kind, small_native, small_threaded):
    path = small_native if kind == "native" else small_threaded
    before = _os_threads()
    mod = wasm_runtime.load(path, threads=3)
    assert _os_threads() == before + 2  # the pool's threads; the caller's is the third
    big = {"a": np.ones((5120, 5120), np.float32), "b": np.ones((5120, 5120), np.float32)}
    with pytest.raises(wasm_runtime.ModelError, match="timed out after 0.2 s") as e:
        mod.run(big, timeout=0.2)
    assert e.value.status == CANCELLED
    rng = np.random.default_rng(3)
    feeds = {"a": rng.standard_normal((33, 20)).astype(np.float32), "b": rng.standard_normal((20, 90)).astype(np.float32)}
    want = wasm_runtime.load(path, threads=1).run(feeds)["y"]
    assert mod.run(feeds)["y"].tobytes() == want.tobytes()
    assert mod.set_threads(2) == 2 and _os_threads_settle(before + 1) == before + 1
    assert mod.run(feeds)["y"].tobytes() == want.tobytes()
    assert mod.set_threads(2) == 2 and _os_threads_settle(before + 1) == before + 1  # the same count: a new pool
    assert mod.run(feeds)["y"].tobytes() == want.tobytes()
    mod.close()
    assert _os_threads_settle(before) == before


def test_a_failed_thread_fails_the_call(small_threaded):
    """A .wasm thread that stops in a trap tells the pool (sw_thread_failed): the call
    waiting for its part fails with INTERNAL, as every later one, rather than waiting for
    ever; trim() gives a working model again."""
    mod = wasm_runtime.load(small_threaded, threads=2)
    rng = np.random.default_rng(4)
    feeds = {"a": rng.standard_normal((33, 20)).astype(np.float32), "b": rng.standard_normal((20, 90)).astype(np.float32)}
    want = mod.run(feeds)["y"]
    mod._b.call("sw_thread_failed", mod._ctx, 1)  # as a trapped thread's host does
    for _ in range(2):
        with pytest.raises(wasm_runtime.ModelError, match="a thread of the model's pool failed") as e:
            mod.run(feeds)
        assert e.value.status == wasm_runtime.STATUS["INTERNAL"]
    mod.trim()
    assert mod.threads == 2 and mod.run(feeds)["y"].tobytes() == want.tobytes()
