"""An input with no elements but a huge dim, (2**40, 0) (a numpy array of no bytes), given
to each kernel family with ``run(timeout=)``: the run returns the reference's result at once,
or (where the result has bytes, e.g. Range's) fails cleanly, and never spins over the other
dims' 2**40 rows. Before the fix NonZero walked those rows for hours, on wasm32 past the
timeout too (its backend hoisted the cancel flag's load out of the empty rows' loop).

Each run happens in a child process with a wall limit, so a regression fails the test
instead of hanging the suite; the child also computes onnx.reference's result (numpy is
quick on empty arrays) and compares."""
import json
import pickle
import subprocess
import sys
import time

import numpy as np
import onnx
import pytest
from onnx import helper

from conftest import ROOT
from toolkit.compiler import compile_model
from util import _TMP, const, make_model, vinfo

HUGE = 2 ** 40
TIMEOUT = 5  # run(timeout=): seconds; a run that honours neither rule is stopped by it
WALL = 60  # the child's wall limit: loading (Cranelift compiles the module), the run, the reference
QUICK = 1.0  # a run over no elements takes well under this (milliseconds here)
CANCELLED = 6

F = np.float32
X2 = [vinfo("x", F, ["a", "b"])]
X4 = [vinfo("x", F, ["n", "c", "h", "w"])]


def _one(op, outputs=1, inputs=("x",), x=X2, extra_inputs=(), inits=(), out_dtype=F, **attrs):
    names = [f"y{k}" for k in range(outputs)]
    dtypes = out_dtype if isinstance(out_dtype, tuple) else (out_dtype,) * outputs
    return make_model([helper.make_node(op, list(inputs), names, **attrs)], list(x) + list(extra_inputs),
                      [vinfo(n, d, None) for n, d in zip(names, dtypes)], inits)


def _empty(*shape):
    return np.empty(shape, F)  # no bytes, whatever the other dims


# (id, model, feeds): x is (2**40, 0) or (0, 2**40), rank 4 for Resize
CASES = [
    ("nonzero", _one("NonZero", out_dtype=np.int64), {"x": _empty(HUGE, 0)}),
    ("reduce_sum_over_huge", _one("ReduceSum", inputs=("x", "ax"), inits=[const("ax", np.array([0]))]),
     {"x": _empty(HUGE, 0)}),
    ("reduce_max_over_huge", _one("ReduceMax", keepdims=0, axes=[0]), {"x": _empty(HUGE, 0)}),
    ("reduce_mean_other", _one("ReduceMean", axes=[1]), {"x": _empty(0, HUGE)}),
    ("argmax", _one("ArgMax", axis=1, out_dtype=np.int64), {"x": _empty(0, HUGE)}),
    ("softmax", _one("Softmax", axis=1), {"x": _empty(HUGE, 0)}),
    ("layer_norm", _one("LayerNormalization", inputs=("x", "s"), axis=-1, inits=[const("s", np.ones(0, F))]),
     {"x": _empty(HUGE, 0)}),
    ("gather_rows", _one("Gather", inputs=("x", "i"), axis=0, inits=[const("i", np.array([0, 5, HUGE - 1]))]),
     {"x": _empty(HUGE, 0)}),
    ("gather_no_index", _one("Gather", inputs=("x", "i"), axis=1, extra_inputs=[vinfo("i", np.int64, ["k"])]),
     {"x": _empty(HUGE, 0), "i": np.zeros(0, np.int64)}),
    ("gather_elements", _one("GatherElements", inputs=("x", "i"), axis=0,
                             extra_inputs=[vinfo("i", np.int64, ["p", "q"])]),
     {"x": _empty(HUGE, 0), "i": np.zeros((HUGE, 0), np.int64)}),
    ("scatter_elements", _one("ScatterElements", inputs=("x", "i", "u"), axis=0,
                              extra_inputs=[vinfo("i", np.int64, ["p", "q"]), vinfo("u", F, ["p", "q"])]),
     {"x": _empty(HUGE, 0), "i": np.zeros((HUGE, 0), np.int64), "u": _empty(HUGE, 0)}),
    ("scatter_nd", _one("ScatterND", inputs=("x", "i", "u"),
                        extra_inputs=[vinfo("i", np.int64, ["p", 1]), vinfo("u", F, ["p", "b"])]),
     {"x": _empty(HUGE, 0), "i": np.array([[3], [HUGE - 2]]), "u": _empty(2, 0)}),
    ("gather_nd", _one("GatherND", inputs=("x", "i"), extra_inputs=[vinfo("i", np.int64, ["p", 1])]),
     {"x": _empty(HUGE, 0), "i": np.array([[3], [HUGE - 2]])}),
    ("transpose", _one("Transpose", perm=[1, 0]), {"x": _empty(HUGE, 0)}),
    ("transpose_other", _one("Transpose", perm=[1, 0]), {"x": _empty(0, HUGE)}),
    ("expand", _one("Expand", inputs=("x", "s"), extra_inputs=[vinfo("s", np.int64, [3])]),
     {"x": _empty(HUGE, 0), "s": np.array([3, 1, 1])}),
    ("tile", _one("Tile", inputs=("x", "r"), extra_inputs=[vinfo("r", np.int64, [2])]),
     {"x": _empty(HUGE, 0), "r": np.array([2, 3])}),
    ("constant_of_shape", make_model([helper.make_node("ConstantOfShape", ["s"], ["y0"])],
                                     [vinfo("s", np.int64, [2])], [vinfo("y0", F, None)]),
     {"s": np.array([HUGE, 0])}),
    ("pad", _one("Pad", inputs=("x", "p"), extra_inputs=[vinfo("p", np.int64, [4])]),
     {"x": _empty(HUGE, 0), "p": np.array([1, 0, 2, 0])}),
    ("concat", make_model([helper.make_node("Concat", ["x", "x2"], ["y0"], axis=1)],
                          X2 + [vinfo("x2", F, ["a", "b2"])], [vinfo("y0", F, None)]),
     {"x": _empty(HUGE, 0), "x2": _empty(HUGE, 0)}),
    ("concat_huge_axis", make_model([helper.make_node("Concat", ["x", "x2"], ["y0"], axis=0)],
                                    X2 + [vinfo("x2", F, ["a2", "b"])], [vinfo("y0", F, None)]),
     {"x": _empty(HUGE, 0), "x2": _empty(3, 0)}),
    ("split", make_model([helper.make_node("Split", ["x"], ["y0", "y1"], axis=0, num_outputs=2)], X2,
                [vinfo("y0", F, None), vinfo("y1", F, None)], opset=18),
     {"x": _empty(HUGE, 0)}),
    ("slice", _one("Slice", inputs=("x", "st", "en", "ax"),
                   extra_inputs=[vinfo("st", np.int64, [1]), vinfo("en", np.int64, [1]), vinfo("ax", np.int64, [1])]),
     {"x": _empty(HUGE, 0), "st": np.array([1]), "en": np.array([HUGE - 1]), "ax": np.array([0])}),
    ("slice_step", _one("Slice", inputs=("x", "st", "en", "ax", "sp"),
                        inits=[const("st", np.array([-1])), const("en", np.array([-HUGE * 2])),
                               const("ax", np.array([0])), const("sp", np.array([-3]))]),
     {"x": _empty(HUGE, 0)}),
    ("resize", _one("Resize", inputs=("x", "", "sc"), x=X4, mode="nearest",
                    inits=[const("sc", np.array([1, 1, 2, 1], F))]),
     {"x": _empty(1, 1, HUGE, 0)}),
    ("resize_linear", _one("Resize", inputs=("x", "", "sc"), x=X4, mode="linear",
                           inits=[const("sc", np.array([1, 1, 1, 2], F))]),
     {"x": _empty(1, 1, HUGE, 0)}),
    ("topk", _one("TopK", outputs=2, inputs=("x", "k"), axis=0, out_dtype=(F, np.int64),
                  inits=[const("k", np.array([3]))]),
     {"x": _empty(HUGE, 0)}),
    ("topk_other", _one("TopK", outputs=2, inputs=("x", "k"), axis=1, out_dtype=(F, np.int64),
                        inits=[const("k", np.array([0]))]),
     {"x": _empty(HUGE, 0)}),
    ("unique", _one("Unique", outputs=4, out_dtype=(F, np.int64, np.int64, np.int64)), {"x": _empty(HUGE, 0)}),
    ("cumsum", _one("CumSum", inputs=("x", "ax"), inits=[const("ax", np.array(0))]), {"x": _empty(HUGE, 0)}),
    ("cumsum_other", _one("CumSum", inputs=("x", "ax"), reverse=1, inits=[const("ax", np.array(1))]),
     {"x": _empty(HUGE, 0)}),
    ("matmul", _one("MatMul", inputs=("x", "w"), inits=[const("w", np.ones((0, 0), F))]), {"x": _empty(HUGE, 0)}),
    ("add_broadcast", _one("Add", inputs=("x", "c"), inits=[const("c", np.ones((1, 1), F))]),
     {"x": _empty(HUGE, 0)}),
    ("where", _one("Where", inputs=("m", "x", "x"), extra_inputs=[vinfo("m", np.bool_, ["m1", 1])]),
     {"x": _empty(HUGE, 0), "m": np.ones((1, 1), bool)}),
]

# the result has bytes (2**40 elements or more): a clean out-of-memory error, at once
HAS_BYTES = {
    "range": (make_model([helper.make_node("Range", ["s", "l", "d"], ["y0"])],
                         [vinfo(n, np.int64, []) for n in "sld"], [vinfo("y0", np.int64, None)]),
              {"s": np.array(0), "l": np.array(HUGE), "d": np.array(1)}),
    "reduce_sum_to_huge": (_one("ReduceSum", inputs=("x", "ax"), inits=[const("ax", np.array([1]))]),
                           {"x": _empty(HUGE, 0)}),
}


def _inferred(model, feeds):
    """Empty outputs of the shapes and dtypes onnx's shape inference gives for these feeds."""
    from onnx import helper as h
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for i in m.graph.input:
        i.type.tensor_type.shape.CopyFrom(h.make_tensor_type_proto(1, feeds[i.name].shape).tensor_type.shape)
    m = onnx.shape_inference.infer_shapes(m, strict_mode=True, data_prop=True)
    out = {}
    for o in m.graph.output:
        t = o.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        assert None not in shape and 0 in shape, (o.name, shape)
        out[o.name] = np.empty(shape, h.tensor_dtype_to_np_dtype(t.elem_type))
    return out


def _child(job: str) -> None:
    """Load, run with the timeout, compare with onnx.reference; print one JSON line."""
    import wasm_runtime
    from util import assert_outputs_match, reference

    with open(job, "rb") as f:
        path, model_bytes, feeds, timeout = pickle.load(f)
    mod = wasm_runtime.load(path)
    t0 = time.perf_counter()
    try:
        got = mod.run(feeds, timeout=timeout)
    except wasm_runtime.ModelError as e:
        print(json.dumps({"status": e.status, "message": str(e), "seconds": time.perf_counter() - t0}))
        return
    seconds = time.perf_counter() - t0
    model = onnx.load_from_string(model_bytes)
    try:
        want = reference(model, feeds)
    except MemoryError:  # it makes arrays of 2**40 (index grids, a mean per row): onnx's shapes then
        want = _inferred(model, feeds)
    assert_outputs_match(got, want)
    print(json.dumps({"status": 0, "seconds": seconds, "shapes": {k: list(v.shape) for k, v in got.items()}}))


def _run_in_child(model, feeds, target, name, timeout=TIMEOUT):
    path = _TMP / f"huge_{name}_{target}{'.so' if target == 'native' else '.wasm'}"
    compile_model(model, path, target=target)
    job = _TMP / f"huge_{name}_{target}.pkl"
    with open(job, "wb") as f:
        pickle.dump((str(path), model.SerializeToString(), feeds, timeout), f)
    try:
        r = subprocess.run([sys.executable, __file__, str(job)], capture_output=True, text=True, timeout=WALL,
                           cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name} on {target}: still running after {WALL} s, past run(timeout={timeout})")
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name,model,feeds", CASES, ids=[c[0] for c in CASES])
def test_no_elements_returns_at_once(name, model, feeds, target):
    out = _run_in_child(model, feeds, target, name)
    assert out["status"] == 0, out
    assert out["seconds"] < QUICK, out


@pytest.mark.parametrize("name", sorted(HAS_BYTES))
def test_a_huge_result_fails_at_once(name, target):
    model, feeds = HAS_BYTES[name]
    out = _run_in_child(model, feeds, target, name)
    assert out["status"] not in (0, CANCELLED), out
    assert "memory" in out["message"], out
    assert out["seconds"] < QUICK, out


def test_empty_rows_poll_the_cancel_flag(target, monkeypatch):
    """Without the early return, NonZero's fill kernel walks 2**40 rows of nothing: it still
    stops by the timeout (on wasm32 its cancel flag's load was hoisted out of that loop)."""
    from toolkit.codegen.kernel import KernelBuilder
    monkeypatch.setattr(KernelBuilder, "return_if_no_outputs", lambda *a: None)
    name, model, feeds = CASES[0]
    out = _run_in_child(model, feeds, target, "nonzero_unguarded", timeout=1)  # it cannot end sooner
    assert out["status"] == CANCELLED and "timed out" in out["message"], out


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "tests"))
    _child(sys.argv[1])
