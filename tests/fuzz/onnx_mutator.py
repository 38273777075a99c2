"""A structured mutator for ONNX models: small, seeded, deterministic edits of the kind a
broken exporter, a truncated download or a hostile file makes (op types, attributes, dims,
dtypes, names, initializer bytes, opsets). The compiler must answer each mutant with a
module or a CompileError naming what is wrong, never another exception.

    python -m tests.fuzz.onnx_mutator [--cases N] [--seed S] [--full]

compiles N mutants (default 1,000) through the program IR (``--full``: to a linked .wasm)
and prints the counts; a traceback is printed for each mutant that is neither.
"""
from __future__ import annotations

import argparse
import copy
import random
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "seed", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs], initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _c(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def seeds() -> list[onnx.ModelProto]:
    """Small models that between them use most op families and attribute kinds."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    return [
        _model([helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["r"]),
                helper.make_node("LeakyRelu", ["r"], ["y"], alpha=0.2), helper.make_node("Cast", ["y"], ["z"], to=I64)],
               [("x", F, ["n", 4]), ("b", F, [4])], [("z", I64, None)]),
        _model([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Slice", ["s", "a", "e"], ["s0"]),
                helper.make_node("Concat", ["s0", "m1"], ["t"], axis=0), helper.make_node("Reshape", ["x", "t"], ["r"]),
                helper.make_node("Transpose", ["r"], ["y"], perm=[1, 0]),
                helper.make_node("Unsqueeze", ["y", "ax"], ["u"]), helper.make_node("Squeeze", ["u", "ax"], ["v"])],
               [("x", F, ["n", 3, 2])], [("v", F, None)],
               [_c("a", [0]), _c("e", [1]), _c("m1", [-1]), _c("ax", [0])]),
        _model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
                helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                helper.make_node("GlobalAveragePool", ["p"], ["g"]), helper.make_node("Flatten", ["g"], ["y"])],
               [("x", F, ["N", 3, 8, 8])], [("y", F, None)], [_c("w", w)]),
        _model([helper.make_node("MatMul", ["x", "w"], ["m"]),
                helper.make_node("Gemm", ["m", "w2", "b"], ["g"], transB=1, alpha=0.5),
                helper.make_node("Softmax", ["g"], ["s"], axis=-1),
                helper.make_node("ReduceSum", ["s", "ax"], ["y"], keepdims=0)],
               [("x", F, ["n", 6])], [("y", F, None)],
               [_c("w", rng.standard_normal((6, 5)).astype(np.float32)),
                _c("w2", rng.standard_normal((3, 5)).astype(np.float32)), _c("b", np.zeros(3, np.float32)),
                _c("ax", [1])]),
        _model([helper.make_node("Greater", ["x", "zero"], ["mask"]), helper.make_node("NonZero", ["mask"], ["nz"]),
                helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
                helper.make_node("Shape", ["idx"], ["sh"]), helper.make_node("Gather", ["sh", "i0"], ["cnt"]),
                helper.make_node("Range", ["i0", "cnt", "one"], ["y"])],
               [("x", F, ["n", 4])], [("idx", I64, None), ("y", I64, None)],
               [_c("zero", np.float32(0)), _c("i0", np.int64(0)), _c("one", np.int64(1))]),
        _model([helper.make_node("LayerNormalization", ["x", "s", "b"], ["l"], axis=-1, epsilon=1e-5),
                helper.make_node("Expand", ["l", "shape"], ["e"]), helper.make_node("Where", ["c", "e", "l"], ["y"]),
                helper.make_node("ArgMax", ["y"], ["am"], axis=1, keepdims=0)],
               [("x", F, ["n", 4]), ("c", TensorProto.BOOL, [1, 4])], [("am", I64, None)],
               [_c("s", np.ones(4, np.float32)), _c("b", np.zeros(4, np.float32)), _c("shape", [2, 1, 4])]),
        _model([helper.make_node("Softmax", ["x"], ["s"], axis=1), helper.make_node("Clip", ["s"], ["y"], min=0.1, max=0.9),
                helper.make_node("Slice", ["y"], ["z"], starts=[0], ends=[2], axes=[1])],
               [("x", F, ["n", 3, 4])], [("z", F, None)], opset=9),
    ]


# ----------------------------------------------------------------------------- mutations

OPS = ["Add", "Relu", "Reshape", "Concat", "Conv", "MatMul", "Gemm", "Slice", "Gather", "NonZero", "Range",
       "Softmax", "ReduceSum", "Transpose", "Expand", "Where", "Cast", "Squeeze", "Unsqueeze", "Shape",
       "ConstantOfShape", "Constant", "MaxPool", "LayerNormalization", "NoSuchOp", "If", ""]
WEIRD_INTS = [0, 1, -1, 2, 3, -2, 7, 64, 2 ** 31, -(2 ** 31), 2 ** 62, -(2 ** 63), 10 ** 12]


def _names(m: onnx.ModelProto) -> list[str]:
    out = [i.name for i in m.graph.input] + [i.name for i in m.graph.initializer]
    for n in m.graph.node:
        out += list(n.output)
    return out + ["nowhere", ""]


def _mutate_node(m, r: random.Random) -> str:
    if not m.graph.node:
        return "no node"
    n = r.choice(m.graph.node)
    k = r.randrange(9)
    if k == 0:
        n.op_type = r.choice(OPS)
        return f"op_type -> {n.op_type}"
    if k == 1:
        del m.graph.node[r.randrange(len(m.graph.node))]
        return "node deleted"
    if k == 2 and n.input:
        n.input[r.randrange(len(n.input))] = r.choice(_names(m))
        return "input renamed"
    if k == 3 and n.input:
        del n.input[r.randrange(len(n.input))]
        return "input dropped"
    if k == 4:
        n.input.append(r.choice(_names(m)))
        return "input added"
    if k == 5 and n.output:
        n.output[r.randrange(len(n.output))] = r.choice(_names(m))
        return "output renamed"
    if k == 6:
        n.output.append(r.choice(["extra", ""]))
        return "output added"
    if k == 7:
        m.graph.node.insert(r.randrange(len(m.graph.node) + 1), copy.deepcopy(n))
        return "node duplicated"
    n.domain = r.choice(["ai.onnx.ml", "com.microsoft", "", "x"])
    return f"domain -> {n.domain}"


def _attr(name: str, value) -> onnx.AttributeProto:
    if isinstance(value, list) and not value:  # an empty list has no type to infer
        return helper.make_attribute(name, value, attr_type=onnx.AttributeProto.INTS)
    return helper.make_attribute(name, value)


def _mutate_attr(m, r: random.Random) -> str:
    nodes = [n for n in m.graph.node if n.attribute] or list(m.graph.node)
    if not nodes:
        return "no node"
    n = r.choice(nodes)
    if not n.attribute or r.random() < 0.2:
        n.attribute.append(_attr(r.choice(["axis", "perm", "to", "pads", "alpha", "bogus"]),
                                 r.choice([r.choice(WEIRD_INTS), [r.choice(WEIRD_INTS)] * r.randrange(5), 1.5, "text"])))
        return "attribute added"
    a = r.choice(n.attribute)
    k = r.randrange(5)
    if k == 0:
        n.attribute.remove(a)
        return f"attribute {a.name} deleted"
    if k == 1:
        new = _attr(a.name, r.choice(WEIRD_INTS))
    elif k == 2:
        new = _attr(a.name, [r.choice(WEIRD_INTS) for _ in range(r.randrange(7))])
    elif k == 3:
        new = _attr(a.name, r.choice([float("nan"), float("inf"), -0.0, 1e38, -7.5]))
    else:
        new = _attr(a.name, r.choice(["", "SAME_UPPER", "VALID", "garbage", "é"]))
    n.attribute.remove(a)
    n.attribute.append(new)
    return f"attribute {a.name} -> {onnx.helper.get_attribute_value(new)!r}"[:80]


def _mutate_value_info(m, r: random.Random) -> str:
    vi = r.choice(list(m.graph.input) + list(m.graph.output))
    tt = vi.type.tensor_type
    k = r.randrange(6)
    if k == 0:
        tt.elem_type = r.choice([0, 2, 3, 5, 8, 10, 11, 12, 14, 16, 17, 25, 99])
        return f"{vi.name} dtype -> {tt.elem_type}"
    if k == 1 and tt.HasField("shape") and tt.shape.dim:
        d = r.choice(tt.shape.dim)
        d.dim_value = r.choice(WEIRD_INTS)
        return f"{vi.name} dim -> {d.dim_value}"
    if k == 2 and tt.HasField("shape") and tt.shape.dim:
        d = r.choice(tt.shape.dim)
        d.dim_param = r.choice(["", "n", "m", "N", "x y", "é"])
        return f"{vi.name} dim_param -> {d.dim_param!r}"
    if k == 3:
        tt.ClearField("shape")
        return f"{vi.name} shape removed"
    if k == 4 and tt.HasField("shape"):
        tt.shape.dim.add().dim_value = r.choice([1, 2, 0])
        return f"{vi.name} rank + 1"
    vi.name = r.choice(_names(m))
    return f"value info renamed {vi.name!r}"


def _mutate_initializer(m, r: random.Random) -> str:
    if not m.graph.initializer:
        return "no initializer"
    t = r.choice(m.graph.initializer)
    k = r.randrange(5)
    if k == 0 and t.dims:
        t.dims[r.randrange(len(t.dims))] = r.choice(WEIRD_INTS)
        return f"initializer {t.name} dims -> {list(t.dims)}"
    if k == 1:
        t.data_type = r.choice([0, 2, 6, 9, 10, 16, 99])
        return f"initializer {t.name} dtype -> {t.data_type}"
    if k == 2 and t.raw_data:
        t.raw_data = t.raw_data[: r.randrange(len(t.raw_data))]
        return f"initializer {t.name} truncated"
    if k == 3:
        t.dims.append(r.choice([0, 1, 2]))
        return f"initializer {t.name} rank + 1"
    t.name = r.choice(_names(m))
    return f"initializer renamed {t.name!r}"


def _mutate_model(m, r: random.Random) -> str:
    k = r.randrange(3)
    if k == 0:
        m.opset_import[0].version = r.choice([1, 5, 6, 7, 9, 11, 12, 13, 18, 21, 28, 29, 100])
        return f"opset -> {m.opset_import[0].version}"
    if k == 1:
        m.graph.output[0].name = r.choice(_names(m))
        return f"output -> {m.graph.output[0].name!r}"
    m.opset_import[0].domain = r.choice(["ai.onnx.ml", "x", ""])
    return f"opset domain -> {m.opset_import[0].domain!r}"


MUTATORS = [_mutate_node, _mutate_attr, _mutate_attr, _mutate_value_info, _mutate_initializer, _mutate_model]


def mutants(count: int, seed: int):
    """(index, description, serialized model) for ``count`` mutants; some are byte-level
    corruptions of the serialized file."""
    r = random.Random(seed)
    bases = seeds()
    for i in range(count):
        m = copy.deepcopy(r.choice(bases))
        what = [r.choice(MUTATORS)(m, r) for _ in range(r.choice([1, 1, 1, 2, 3]))]
        data = m.SerializeToString()
        if r.random() < 0.1:  # bytes: a truncated download, a flipped bit
            pos = r.randrange(len(data))
            data = data[:pos] if r.random() < 0.5 else data[:pos] + bytes([data[pos] ^ (1 << r.randrange(8))]) + data[pos + 1:]
            what.append("bytes corrupted")
        yield i, "; ".join(what), data


# ----------------------------------------------------------------------------- campaign


def compile_to_program(data: bytes):
    """The compiler through the verified program IR: everything but LLVM and the linker."""
    from toolkit.codegen.target import get_target, new_module
    from toolkit.frontend.onnx.importer import import_model
    from toolkit.passes import run_pipeline
    from toolkit.program.ir import Program
    from toolkit.program.kernels import KernelTable
    from toolkit.program.lower import lower_graph

    tgt = get_target("wasm32")
    graph = run_pipeline(import_model(data), tgt)
    lower_graph(graph, KernelTable(new_module(tgt, "fuzz"), tgt, Program())).encode()


def run(count: int, seed: int, full: bool = False, out: Path | None = None) -> dict:
    """Compile ``count`` mutants; returns the counts and the tracebacks."""
    from toolkit.compiler import compile_model
    from toolkit.ir.graph import CompileError

    counts = {"compiled": 0, "compile errors": 0, "tracebacks": 0}
    failures = []
    for i, what, data in mutants(count, seed):
        try:
            if full:
                compile_model(data, (out or Path("/tmp")) / f"fuzz{i}.wasm")
            else:
                compile_to_program(data)
            counts["compiled"] += 1
        except CompileError:
            counts["compile errors"] += 1
        except Exception:  # noqa: BLE001 - the point: anything else is a bug
            counts["tracebacks"] += 1
            failures.append((i, what, traceback.format_exc()))
    return {"counts": counts, "failures": failures}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--full", action="store_true", help="compile and link each mutant (slower)")
    args = ap.parse_args(argv)
    t = time.perf_counter()
    res = run(args.cases, args.seed, args.full)
    for i, what, tb in res["failures"]:
        print(f"--- mutant {i}: {what}\n{tb}", file=sys.stderr)
    c = res["counts"]
    print(f"onnx mutator: {args.cases} malformed models (seed {args.seed}) in {time.perf_counter() - t:.0f} s: "
          f"{c['compiled']} compiled, {c['compile errors']} compile errors, {c['tracebacks']} tracebacks")
    return 1 if c["tracebacks"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
