#!/usr/bin/env python3
"""Single-op models timed against their peer in the same engine, as ratios: symwasm's wasm32
module in Node (the JS loader, the relaxed-SIMD variant) against onnxruntime-web in the same
Node, and the native library against onnxruntime, one thread each.

A model benchmark shows how the ops of its models fare; this one finds the op that is slow
on its own (Pow by 2 at 12.7x onnxruntime-web's time, a strided ConvTranspose at 8x, Einsum
at 10x were found this way). Each op runs at a size where its kernel, not the call, takes the
time (0.02-20 ms). The peers are benchmarks/run.py's: long-lived processes, inputs as raw
files, warm-up before timing, the peers taking turns.

    python benchmarks/ops.py [--pair web|native] [--ops exp,pow] [--repeat 3] [--out FILE]

Writes a markdown table (op, shape, both times, ratio; slowest ratio first) to stdout and
``--out`` (default build/ops_<pair>.md).
"""
from __future__ import annotations

import argparse
import platform
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run as R  # noqa: E402

PAIRS = {"web": ("onnxruntime-web", "symwasm-node"), "native": ("onnxruntime", "symwasm-native")}
RNG = np.random.default_rng(0)
N = helper.make_node


def _w(*shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array((RNG.standard_normal(shape) * 0.1).astype(np.float32), "w")


def _f(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(value, np.float32), name)


def _i(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(value, np.int64), name)


ROWS = [256, 1024]  # an elementwise op's input: 1 MiB of float32
IMAGE = [1, 64, 56, 56]
# name: (nodes, float32 inputs {name: shape}, initializers, outputs, positive inputs)
OPS = {
    "Relu": ([N("Relu", ["x"], ["y"])], {"x": ROWS}, [], ["y"], False),
    "Add (broadcast row)": ([N("Add", ["x", "z"], ["y"])], {"x": ROWS, "z": [1024]}, [], ["y"], False),
    "Mul": ([N("Mul", ["x", "z"], ["y"])], {"x": ROWS, "z": ROWS}, [], ["y"], False),
    "Div": ([N("Div", ["x", "z"], ["y"])], {"x": ROWS, "z": ROWS}, [], ["y"], False),
    "Where(Greater)": ([N("Greater", ["x", "z"], ["c"]), N("Where", ["c", "x", "z"], ["y"])], {"x": ROWS, "z": ROWS},
                       [], ["y"], False),
    "Clip 0..6": ([N("Clip", ["x", "lo", "hi"], ["y"])], {"x": ROWS}, [_f("lo", 0), _f("hi", 6)], ["y"], False),
    "LeakyRelu": ([N("LeakyRelu", ["x"], ["y"])], {"x": ROWS}, [], ["y"], False),
    "HardSigmoid": ([N("HardSigmoid", ["x"], ["y"])], {"x": ROWS}, [], ["y"], False),
    "HardSwish": ([N("HardSwish", ["x"], ["y"])], {"x": ROWS}, [], ["y"], False),
    "Sqrt": ([N("Sqrt", ["x"], ["y"])], {"x": ROWS}, [], ["y"], True),
    "Exp": ([N("Exp", ["x"], ["y"])], {"x": ROWS}, [], ["y"], False),
    "Log": ([N("Log", ["x"], ["y"])], {"x": ROWS}, [], ["y"], True),
    "Tanh": ([N("Tanh", ["x"], ["y"])], {"x": ROWS}, [], ["y"], False),
    "Sigmoid": ([N("Sigmoid", ["x"], ["y"])], {"x": ROWS}, [], ["y"], False),
    "Erf": ([N("Erf", ["x"], ["y"])], {"x": ROWS}, [], ["y"], False),
    "Elu": ([N("Elu", ["x"], ["y"])], {"x": ROWS}, [], ["y"], False),
    "Softplus": ([N("Softplus", ["x"], ["y"])], {"x": ROWS}, [], ["y"], False),
    "Sin": ([N("Sin", ["x"], ["y"])], {"x": ROWS}, [], ["y"], False),
    "Pow by 2": ([N("Pow", ["x", "e"], ["y"])], {"x": ROWS}, [_f("e", 2.0)], ["y"], False),
    "GELU (erf, 5 nodes)": ([N("Div", ["x", "s2"], ["d"]), N("Erf", ["d"], ["e"]), N("Add", ["e", "one"], ["e1"]),
                             N("Mul", ["x", "e1"], ["g"]), N("Mul", ["g", "half"], ["y"])], {"x": ROWS},
                            [_f("s2", 1.4142135), _f("one", 1.0), _f("half", 0.5)], ["y"], False),
    "Cast to float16 and back": ([N("Cast", ["x"], ["h"], to=TensorProto.FLOAT16), N("Cast", ["h"], ["y"], to=1)],
                                 {"x": ROWS}, [], ["y"], False),
    "Softmax (last axis)": ([N("Softmax", ["x"], ["y"], axis=-1)], {"x": [4, 128, 128]}, [], ["y"], False),
    "Softmax (axis 1 of 3)": ([N("Softmax", ["x"], ["y"], axis=1)], {"x": [1, 256, 1024]}, [], ["y"], False),
    "LayerNormalization": ([N("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)], {"x": [128, 768]},
                           [_f("g", np.ones(768)), _f("b", np.zeros(768))], ["y"], False),
    "InstanceNormalization": ([N("InstanceNormalization", ["x", "g", "b"], ["y"])], {"x": IMAGE},
                              [_f("g", np.ones(64)), _f("b", np.zeros(64))], ["y"], False),
    "ReduceMean (last axis)": ([N("ReduceMean", ["x"], ["y"], axes=[-1])], {"x": ROWS}, [], ["y"], False),
    "ReduceSum (axis 0)": ([N("ReduceSum", ["x", "ax"], ["y"])], {"x": ROWS}, [_i("ax", [0])], ["y"], False),
    "ReduceMax (H, W)": ([N("ReduceMax", ["x"], ["y"], axes=[2, 3])], {"x": [1, 256, 28, 28]}, [], ["y"], False),
    "GlobalAveragePool": ([N("GlobalAveragePool", ["x"], ["y"])], {"x": [1, 512, 14, 14]}, [], ["y"], False),
    "MaxPool 3x3 s2": ([N("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
                       {"x": [1, 64, 112, 112]}, [], ["y"], False),
    "AveragePool 3x3 s1 pads": ([N("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
                                {"x": IMAGE}, [], ["y"], False),
    "Conv 3x3": ([N("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], {"x": IMAGE}, [_w(64, 64, 3, 3)], ["y"], False),
    "Conv 1x1": ([N("Conv", ["x", "w"], ["y"])], {"x": [1, 256, 56, 56]}, [_w(64, 256, 1, 1)], ["y"], False),
    "Conv 3x3 s2": ([N("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])], {"x": IMAGE},
                    [_w(128, 64, 3, 3)], ["y"], False),
    "Conv depthwise 3x3": ([N("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], group=128)], {"x": [1, 128, 56, 56]},
                           [_w(128, 1, 3, 3)], ["y"], False),
    "Conv 7x7 s2 (stem)": ([N("Conv", ["x", "w"], ["y"], pads=[3, 3, 3, 3], strides=[2, 2])],
                           {"x": [1, 3, 224, 224]}, [_w(64, 3, 7, 7)], ["y"], False),
    "ConvTranspose 2x2 s2": ([N("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], kernel_shape=[2, 2])],
                             {"x": [1, 64, 28, 28]}, [_w(64, 32, 2, 2)], ["y"], False),
    "ConvTranspose 3x3 s2": ([N("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1],
                               output_padding=[1, 1])], {"x": [1, 64, 28, 28]}, [_w(64, 32, 3, 3)], ["y"], False),
    "MatMul batched": ([N("MatMul", ["x", "z"], ["y"])], {"x": [4, 128, 64], "z": [4, 64, 128]}, [], ["y"], False),
    "MatMul by a vector": ([N("MatMul", ["x", "w"], ["y"])], {"x": [1, 512]}, [_w(512, 512)], ["y"], False),
    "Einsum bhid,bhjd->bhij": ([N("Einsum", ["x", "z"], ["y"], equation="bhid,bhjd->bhij")],
                               {"x": [1, 4, 128, 64], "z": [1, 4, 128, 64]}, [], ["y"], False),
    "Resize nearest 2x": ([N("Resize", ["x", "", "s"], ["y"], mode="nearest")], {"x": IMAGE},
                          [_f("s", [1, 1, 2, 2])], ["y"], False),
    "Resize linear 2x": ([N("Resize", ["x", "", "s"], ["y"], mode="linear")], {"x": IMAGE},
                         [_f("s", [1, 1, 2, 2])], ["y"], False),
    "Transpose (0, 2, 1, 3)": ([N("Transpose", ["x"], ["y"], perm=[0, 2, 1, 3])], {"x": [1, 128, 16, 64]}, [], ["y"],
                               False),
    "Transpose 512x512": ([N("Transpose", ["x"], ["y"], perm=[1, 0])], {"x": [512, 512]}, [], ["y"], False),
    "Concat (channels)": ([N("Concat", ["x", "z"], ["y"], axis=1)], {"x": IMAGE, "z": IMAGE}, [], ["y"], False),
    "Slice (inner window)": ([N("Slice", ["x", "st", "en", "ax"], ["y"])], {"x": [64, 112, 112]},
                             [_i("st", [1, 1]), _i("en", [111, 111]), _i("ax", [1, 2])], ["y"], False),
    "Gather (rows)": ([N("Gather", ["x", "ix"], ["y"], axis=0)], {"x": [4096, 256]},
                      [_i("ix", RNG.integers(0, 4096, 2048))], ["y"], False),
    "Pad (edges of 1)": ([N("Pad", ["x", "pd"], ["y"])], {"x": IMAGE}, [_i("pd", [0, 0, 1, 1, 0, 0, 1, 1])], ["y"],
                         False),
    "DepthToSpace": ([N("DepthToSpace", ["x"], ["y"], blocksize=2)], {"x": [1, 256, 28, 28]}, [], ["y"], False),
    "TopK 10 of 1024": ([N("TopK", ["x", "k"], ["y", "yi"], axis=-1)], {"x": ROWS}, [_i("k", [10])], ["y"], False),
    "CumSum": ([N("CumSum", ["x", "ax"], ["y"])], {"x": ROWS}, [_i("ax", 1)], ["y"], False),
    "LRN": ([N("LRN", ["x"], ["y"], size=5)], {"x": IMAGE}, [], ["y"], False),
}


def model_file(name: str, tmp: Path) -> tuple[Path, dict[str, np.ndarray]]:
    nodes, inputs, inits, outputs, positive = OPS[name]
    graph = helper.make_graph(nodes, "op", [helper.make_tensor_value_info(k, TensorProto.FLOAT, s)
                                            for k, s in inputs.items()],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], inits)
    # opset 17 and IR 8: what onnxruntime-web 1.30 reads
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path = tmp / (name.translate(str.maketrans(" (),.>", "______")) + ".onnx")
    onnx.save(model, path)
    feeds = {k: RNG.standard_normal(s).astype(np.float32) for k, s in inputs.items()}
    if positive:
        feeds = {k: np.abs(v) + np.float32(0.1) for k, v in feeds.items()}
    return path, feeds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", choices=sorted(PAIRS), default="web",
                    help="web: symwasm in Node vs onnxruntime-web; native: the .so vs onnxruntime (default web)")
    ap.add_argument("--ops", help="comma-separated op names or parts of them (default: all)")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions per peer, taking turns (default 3)")
    ap.add_argument("--min-time", type=float, default=0.3, metavar="SECONDS", help="per repetition (default 0.3)")
    ap.add_argument("--out", type=Path, help="the markdown table (default build/ops_<pair>.md)")
    args = ap.parse_args()
    names = [n for n in OPS if not args.ops or any(p.strip().lower() in n.lower() for p in args.ops.split(","))]
    if not names:
        ap.error(f"no op matches {args.ops!r}; ops: {', '.join(OPS)}")
    peer, ours = PAIRS[args.pair]
    peers = R.make_peers([peer, ours])
    tmp = Path(tempfile.mkdtemp(prefix="symwasm_ops_"))
    rows = []
    try:
        for name in names:
            path, feeds = model_file(name, tmp)
            specs = R.write_inputs(feeds, tmp)
            best = {}
            try:
                for p in peers.values():
                    p.request({"op": "load", "model": str(path), "artifact_dir": str(tmp)})
                for rep in range(args.repeat):
                    order = [peer, ours] if rep % 2 == 0 else [ours, peer]
                    for who in order:
                        reply = peers[who].request({"op": "bench", "inputs": specs, "out_dir": str(tmp), "min_runs": 5,
                                                    "min_time_s": args.min_time, "warmup_s": 0.5 if rep == 0 else 0.1})
                        best[who] = min(best.get(who, float("inf")), min(reply["times_ms"]))
            except R.PeerFailure as e:
                R.progress(f"{name}: error: {e}")
                rows.append((float("inf"), f"| {name} | {_shapes(OPS[name][1])} | error: {str(e)[:80]} | | |"))
                continue
            ratio = best[ours] / best[peer]
            R.progress(f"{name}: {peer} {best[peer]:.4f} ms, {ours} {best[ours]:.4f} ms, {ratio:.2f}x")
            rows.append((ratio, f"| {name} | {_shapes(OPS[name][1])} | {best[peer]:.4g} | {best[ours]:.4g} | "
                                f"{ratio:.2f} |"))
    finally:
        for p in peers.values():
            p.close()
    lines = [f"# Single ops: {ours} against {peer}", "",
             f"- {platform.processor() or platform.machine()}, one thread; fastest of {args.repeat} "
             f"repetitions of >= {args.min_time} s each, the two peers taking turns", "",
             f"| op | inputs | {peer} ms | {ours} ms | ratio |", "| --- | --- | ---: | ---: | ---: |"]
    lines += [r for _, r in sorted(rows, key=lambda t: -t[0])]
    text = "\n".join(lines) + "\n"
    out = args.out or R.REPO / "build" / f"ops_{args.pair}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    return 0


def _shapes(inputs: dict[str, list[int]]) -> str:
    return ", ".join("x".join(map(str, s)) for s in inputs.values())


if __name__ == "__main__":
    sys.exit(main())
