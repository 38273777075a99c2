"""Build the JS loader's test fixtures: small ONNX models compiled to .wasm, each with inputs
for several bindings of its symbolic dims and the outputs onnx.reference (an implementation
independent of symwasm) computes for them. For the error cases it records what the Python
host (wasm_runtime) reports, so the JS tests can check that the loader says the same.

    python make_fixtures.py OUT_DIR [NAME ...]

writes OUT_DIR/NAME.wasm and OUT_DIR/fixtures.json (without names, every fixture but the large
ones of NAMED_ONLY). Tensors are {dtype, shape, data} with data the base64 of the raw
little-endian bytes: exact for float32 and for int64 beyond 2**53; string tensors are
{dtype: "string", shape, strings: [...]}.
"""
from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import wasm_runtime
from toolkit.compiler import compile_model

F32, I32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL
RNG = np.random.default_rng(7)


def model(name, nodes, inputs, outputs, initializers=()):
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs], initializer=list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def f32(*shape):
    return RNG.uniform(-3, 3, shape).astype(np.float32)


def add_mul():
    """Elementwise float32 arithmetic with broadcasting: x [n, 10] against b [1, 10]."""
    m = model("add_mul", [
        helper.make_node("Add", ["x", "b"], ["s"]),
        helper.make_node("Mul", ["s", "x"], ["y"]),
        helper.make_node("Sub", ["x", "b"], ["d"]),
        helper.make_node("Mul", ["b", "b"], ["bb"]),
        helper.make_node("Add", ["bb", "one"], ["den"]),
        helper.make_node("Div", ["d", "den"], ["z"]),
    ], [("x", F32, ["n", 10]), ("b", F32, [1, 10])], [("y", F32, ["n", 10]), ("z", F32, ["n", 10])],
        [numpy_helper.from_array(np.array(1, np.float32), "one")])
    runs = [{"x": f32(n, 10), "b": f32(1, 10)} for n in (1, 4, 9, 0)]
    # 2.4 MB per input, more than the module's initial memory: the run must grow it
    growth = {"x": f32(60_000, 10), "b": f32(1, 10)}
    ok = runs[1]
    errors = {
        "wrong rank": {**ok, "x": ok["x"].reshape(-1)},
        "wrong dtype": {**ok, "x": ok["x"].astype(np.int32)},
        "other dtype": {**ok, "x": ok["x"].astype(np.float64)},
        "wrong dim": {**ok, "x": f32(4, 9)},
        "missing input": {"x": ok["x"]},
        "unknown input": {**ok, "c": ok["b"]},
    }
    return m, runs, growth, errors


def where_greater():
    """Greater (a bool output), Where and Cast over two symbols: x [n, m] against t [m]."""
    m = model("where_greater", [
        helper.make_node("Greater", ["x", "t"], ["mask"]),
        helper.make_node("Where", ["mask", "x", "t"], ["y"]),
        helper.make_node("Cast", ["mask"], ["count"], to=I32),
    ], [("x", F32, ["n", "m"]), ("t", F32, ["m"])],
        [("mask", BOOL, ["n", "m"]), ("y", F32, ["n", "m"]), ("count", I32, ["n", "m"])])
    runs = [{"x": f32(n, k), "t": f32(k)} for n, k in ((2, 3), (5, 1), (1, 6))]
    errors = {"symbol conflict": {"x": f32(2, 3), "t": f32(4)}}
    return m, runs, None, errors


def int64_ops():
    """int64 arithmetic beyond 2**53 (exact only as BigInt), Equal, Cast and a bool input."""
    m = model("int64_ops", [
        helper.make_node("Add", ["a", "b"], ["sum"]),
        helper.make_node("Sub", ["a", "b"], ["diff"]),
        helper.make_node("Equal", ["a", "b"], ["same"]),
        helper.make_node("Where", ["pick", "a", "b"], ["picked"]),
        helper.make_node("Cast", ["b"], ["b32"], to=I32),
        helper.make_node("Cast", ["pick"], ["pick32"], to=I32),
    ], [("a", I64, ["n"]), ("b", I64, ["n"]), ("pick", BOOL, ["n"])],
        [("sum", I64, ["n"]), ("diff", I64, ["n"]), ("same", BOOL, ["n"]), ("picked", I64, ["n"]),
         ("b32", I32, ["n"]), ("pick32", I32, ["n"])])

    def feeds(n):
        a = RNG.integers(-(2**60), 2**60, n, dtype=np.int64)
        b = RNG.integers(-1000, 1000, n, dtype=np.int64)
        b[::3] = a[::3]  # some equal pairs
        return {"a": a, "b": b, "pick": RNG.random(n) < 0.5}

    return m, [feeds(4), feeds(11)], None, {}


def dtypes():
    """One input and output of every other dtype the ABI carries, each through an op."""
    specs = [("u8", np.uint8, "Add"), ("i8", np.int8, "Abs"), ("u16", np.uint16, "Max"), ("i16", np.int16, "Neg"),
             ("u32", np.uint32, "Add"), ("u64", np.uint64, "Add"), ("f16", np.float16, "Mul"), ("f64", np.float64, "Add")]
    nodes, inputs, outputs = [], [], []
    for name, dt, op in specs:
        code = helper.np_dtype_to_tensor_dtype(np.dtype(dt))
        args = [name] if op in ("Abs", "Neg") else [name, name]
        nodes.append(helper.make_node(op, args, [f"{name}_out"]))
        inputs.append((name, code, ["n"]))
        outputs.append((f"{name}_out", code, ["n"]))
    m = model("dtypes", nodes, inputs, outputs)

    def feeds(n):
        out = {}
        for name, dt, _ in specs:
            if np.dtype(dt).kind == "f":
                out[name] = RNG.uniform(-40, 40, n).astype(dt)
            else:
                info = np.iinfo(dt)
                out[name] = RNG.integers(info.min // 2 if info.min else 0, info.max // 2, n, dtype=dt)
        return out

    return m, [feeds(3), feeds(17)], None, {}


def small_dtypes():
    """The small formats as raw codes: bfloat16 multiplied (computed in float32), float8
    e4m3fn and int4 cast to and from float32."""
    bf, f8, i4 = TensorProto.BFLOAT16, TensorProto.FLOAT8E4M3FN, TensorProto.INT4
    nodes = [helper.make_node("Mul", ["bf", "bf"], ["bf_out"]),
             helper.make_node("Cast", ["f8"], ["f8_as_f32"], to=F32), helper.make_node("Cast", ["x"], ["x_as_f8"], to=f8),
             helper.make_node("Cast", ["i4"], ["i4_as_f32"], to=F32), helper.make_node("Cast", ["x"], ["x_as_i4"], to=i4)]
    m = model("small_dtypes", nodes, [("bf", bf, ["n"]), ("f8", f8, ["n"]), ("i4", i4, ["n"]), ("x", F32, ["n"])],
              [("bf_out", bf, ["n"]), ("f8_as_f32", F32, ["n"]), ("x_as_f8", f8, ["n"]), ("i4_as_f32", F32, ["n"]),
               ("x_as_i4", i4, ["n"])])
    m.opset_import[0].version = 23

    def feeds(n):
        return {"bf": RNG.uniform(-8, 8, n).astype(ml_dtypes.bfloat16),
                "f8": RNG.uniform(-400, 400, n).astype(ml_dtypes.float8_e4m3fn),
                "i4": RNG.integers(-8, 8, n).astype(ml_dtypes.int4), "x": RNG.uniform(-9, 9, n).astype(np.float32)}

    return m, [feeds(3), feeds(17)], None, {}


def e8m0():
    """float8 e8m0 (format 3.3) as raw codes: float32 cast to it (rounding up) and its codes
    cast back to float32."""
    e8 = TensorProto.FLOAT8E8M0
    m = model("e8m0", [helper.make_node("Cast", ["x"], ["x_as_e8m0"], to=e8),
                       helper.make_node("Cast", ["q"], ["q_as_f32"], to=F32)],
              [("x", F32, ["n"]), ("q", e8, ["m"])], [("x_as_e8m0", e8, ["n"]), ("q_as_f32", F32, ["m"])])
    m.opset_import[0].version = 25

    def feeds(n):
        return {"x": np.exp2(RNG.uniform(-130, 130, n)).astype(np.float32),
                "q": RNG.integers(0, 256, n + 1).astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)}

    return m, [feeds(3), feeds(17)], None, {}


def matmul():
    """MatMul of two [n, n] float32 matrices: O(n**3) work in O(n**2) memory, so a large n is a
    long call (n = 2500 takes seconds: the cancellation tests stop one)."""
    m = model("matmul", [helper.make_node("MatMul", ["a", "b"], ["y"])],
              [("a", F32, ["n", "n"]), ("b", F32, ["n", "n"])], [("y", F32, ["n", "n"])])
    runs = [{"a": f32(n, n), "b": f32(n, n)} for n in (3, 17)]
    errors = {"not square": {"a": f32(3, 4), "b": f32(4, 3)}}
    return m, runs, None, errors


def strings():
    """String tensors (format 3.4) as Arrays of strings: concatenated, compared, split on
    whitespace, with multi-byte UTF-8 and empty strings."""
    S = TensorProto.STRING
    m = model("strings", [helper.make_node("StringConcat", ["a", "b"], ["ab"]),
                          helper.make_node("Equal", ["a", "b"], ["same"]),
                          helper.make_node("StringSplit", ["ab"], ["parts", "count"])],
              [("a", S, ["n"]), ("b", S, ["n"])],
              [("ab", S, ["n"]), ("same", BOOL, ["n"]), ("parts", S, None), ("count", I64, ["n"])])
    m.opset_import[0].version = 20
    words = ["", "a", "b c", "bé ", "日本語", " 🎉 x", "ΑΒΓ", "a"]

    def feeds(n):
        pick = lambda: np.array([words[i] for i in RNG.integers(0, len(words), n)], dtype=object)  # noqa: E731
        return {"a": pick(), "b": pick()}

    return m, [feeds(3), feeds(6), feeds(0)], None, {}


def dense():
    """A dense layer, relu(x @ w + b) with x [n, 24], compiled with --relaxed-simd: two files,
    dense.wasm and dense.relaxed.wasm (its multiply-adds f32x4.relaxed_madd)."""
    m = model("dense", [helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["u"]),
                        helper.make_node("Relu", ["u"], ["y"])],
              [("x", F32, ["n", 24])], [("y", F32, ["n", 20])],
              [numpy_helper.from_array(f32(24, 20), "w"), numpy_helper.from_array(f32(20), "b")])
    return m, [{"x": f32(n, 24)} for n in (1, 5, 13)], None, {}


def wide():
    """dense's layer with 16 MiB of weights, relu(x @ w + b) with x [n, 1024] and w [1024, 4096],
    compiled with --relaxed-simd: files far larger than the metadata at their front, for the
    tests of what a load downloads (downloads.test.js). The values are small integers, so
    every order of summation, fused or not, gives the exact sums."""
    def ints(*shape):
        return RNG.integers(-4, 5, shape).astype(np.float32)

    m = model("wide", [helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["u"]),
                       helper.make_node("Relu", ["u"], ["y"])],
              [("x", F32, ["n", 1024])], [("y", F32, ["n", 4096])],
              [numpy_helper.from_array(ints(1024, 4096), "w"), numpy_helper.from_array(ints(4096), "b")])
    return m, [{"x": ints(n, 1024)} for n in (1, 3)], None, {}


def weight_inputs():
    """An ONNX IR version 3 model, which lists its weight 'w' among its inputs: compiled as the
    constant it holds, so feeding it is refused naming it as such (both hosts alike)."""
    m = model("weight_inputs", [helper.make_node("Add", ["x", "w"], ["y"])], [("x", F32, ["n", 3]), ("w", F32, [3])],
              [("y", F32, ["n", 3])], [numpy_helper.from_array(np.array([1, 2, 3], np.float32), "w")])
    m.ir_version = 3
    m.opset_import[0].version = 8
    runs = [{"x": f32(n, 3)} for n in (1, 4)]
    return m, runs, None, {"a weight fed as an input": {**runs[0], "w": f32(3)}}


def input_defaults():
    """Initializers listed as inputs that compile --overridable keeps as inputs: a run that omits
    one gets its value (an int64 vector and a float scalar), a run that feeds one overrides it."""
    m = model("input_defaults", [helper.make_node("Cast", ["k"], ["kf"], to=TensorProto.FLOAT),
                                 helper.make_node("Mul", ["x", "s"], ["xs"]), helper.make_node("Add", ["xs", "kf"], ["y"])],
              [("x", F32, ["n", 3]), ("s", F32, []), ("k", TensorProto.INT64, ["m"])], [("y", F32, ["n", 3])],
              [numpy_helper.from_array(np.array(2.5, np.float32), "s"),
               numpy_helper.from_array(np.array([1, -2, 3], np.int64), "k")])
    runs = [{"x": f32(1, 3)}, {"x": f32(4, 3), "s": np.array(-1, np.float32)},
            {"x": f32(2, 3), "k": np.array([7], np.int64)}]
    return m, runs, None, {"an override of the wrong dtype": {"x": f32(1, 3), "s": np.array(1, np.float64)}}


def shared_dims():
    """Two inputs that both name their first dim N but never meet: each may be fed its own size
    (symbols N and N@y), as onnxruntime reads dim names; requiredBytes({N}) sizes both."""
    m = model("shared_dims", [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["y"], ["b"])],
              [("x", F32, ["N", 4]), ("y", F32, ["N", 3])], [("a", F32, ["N", 4]), ("b", F32, ["N", 3])])
    return m, [{"x": f32(2, 4), "y": f32(5, 3)}, {"x": f32(3, 4), "y": f32(3, 3)}], None, {}


def matmul_softmax():
    """softmax(x @ w) with x [n, 256] and w [256, 512], compiled with --threads and
    --relaxed-simd (four files): both kernels split their work among threads (the MatMul w's
    panels, the Softmax its rows, 16K elements a part), for threads.test.js."""
    m = model("matmul_softmax", [helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Softmax", ["t"], ["y"])],
              [("x", F32, ["n", 256])], [("y", F32, ["n", 512])], [numpy_helper.from_array(f32(256, 512) / 16, "w")])
    return m, [{"x": f32(n, 256)} for n in (1, 37, 300)], None, {}


def matmul_threads():
    """matmul compiled with --threads: a long call to cancel while it runs on several threads."""
    m, runs, _, _ = matmul()
    return m, runs, None, {}


FIXTURES = {f.__name__: f for f in (add_mul, where_greater, int64_ops, dtypes, matmul, small_dtypes,
                                    e8m0, strings, dense, wide, weight_inputs, input_defaults,
                                    shared_dims, matmul_softmax, matmul_threads)}  # new ones last: they share RNG
COMPILE_OPTIONS = {"input_defaults": {"overridable": ["all"]}}
RELAXED = {"dense", "wide", "matmul_softmax"}  # compiled with the relaxed-SIMD variant too
THREADS = {"matmul_softmax", "matmul_threads"}  # compiled with the threads variant (of each) too
# built only when named, not among all: wide is 32 MiB of files; the threads ones are for
# threads.test.js alone (elsewhere a load on several threads would pick their threads files)
NAMED_ONLY = {"wide"} | THREADS


def encode(arr) -> dict:
    arr = np.require(arr, requirements="C")  # (ascontiguousarray would make a scalar 1-d)
    if arr.dtype.kind in "OUS":  # strings: a list, as JS passes them
        return {"dtype": "string", "shape": list(arr.shape), "strings": [str(s) for s in arr.reshape(-1)]}
    return {"dtype": arr.dtype.name, "shape": list(arr.shape),
            "data": base64.b64encode(arr.astype(arr.dtype.newbyteorder("<")).tobytes() if arr.dtype.kind != "V"
                                     else arr.tobytes()).decode()}  # ml_dtypes' formats: their codes


def run_record(ref: ReferenceEvaluator, names: list[str], feeds: dict) -> dict:
    expected = dict(zip(names, ref.run(None, feeds)))
    return {"inputs": {k: encode(v) for k, v in feeds.items()},
            "expected": {k: encode(np.asarray(v)) for k, v in expected.items()}}


def build(name: str, out: Path) -> dict:
    m, runs, growth, errors = FIXTURES[name]()
    wasm = out / f"{name}.wasm"
    result = compile_model(m, wasm, target="wasm32", relaxed=name in RELAXED, threads=name in THREADS,
                           **COMPILE_OPTIONS.get(name, {}))
    ref = ReferenceEvaluator(m)
    names = [o.name for o in m.graph.output]
    host = wasm_runtime.load(wasm)
    recorded = []
    for case, feeds in errors.items():
        try:
            host.run(feeds)
        except wasm_runtime.ModelError as e:
            recorded.append({"case": case, "inputs": {k: encode(v) for k, v in feeds.items()},
                             "message": str(e), "status": e.status})
        else:
            raise AssertionError(f"{name}: the Python host accepted the '{case}' inputs")
    return {"wasm": wasm.name, "variants": {k: p.name for k, p in result.variants.items()},
            "doc": FIXTURES[name].__doc__, "runs": [run_record(ref, names, f) for f in runs],
            "growth": run_record(ref, names, growth) if growth else None, "errors": recorded}


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    index = {name: build(name, out) for name in (argv[1:] or [n for n in FIXTURES if n not in NAMED_ONLY])}
    (out / "fixtures.json").write_text(json.dumps(index))
    print(f"wrote {len(index)} fixtures to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
