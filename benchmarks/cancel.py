"""How fast a running call stops: ``Model.cancel()`` from another thread during a long MatMul,
timed from the cancel to the ModelError in the calling thread, on both targets.

    python benchmarks/cancel.py [--repeat 10]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import wasm_runtime  # noqa: E402
from toolkit.compiler import compile_model  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--n", type=int, default=1536, help="MatMul size (n x n by n x n)")
    args = ap.parse_args()
    F = TensorProto.FLOAT
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "mm",
                          [helper.make_tensor_value_info("a", F, ["n", "k"]), helper.make_tensor_value_info("b", F, ["k", "m"])],
                          [helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"a": np.ones((args.n, args.n), np.float32), "b": np.ones((args.n, args.n), np.float32)}
    out = Path(tempfile.mkdtemp(prefix="symwasm-cancel-"))
    print(f"cancel latency, {args.n}^3 MatMul cancelled 0.1 s in, {args.repeat} times (ms):")
    for target in ("wasm32", "native"):
        path = out / f"mm.{'wasm' if target == 'wasm32' else 'so'}"
        compile_model(model, path, target=target)
        m = wasm_runtime.load(path)
        lat = []
        for _ in range(args.repeat):
            at = []
            t = threading.Timer(0.1, lambda: (at.append(time.perf_counter()), m.cancel()))
            t.start()
            try:
                m.run(feeds)
                print(f"  {target}: the call finished before the cancel; use a larger --n")
                return 1
            except wasm_runtime.ModelError as e:
                assert e.status == wasm_runtime.STATUS["CANCELLED"], e
                lat.append((time.perf_counter() - at[0]) * 1e3)
        small = {"a": feeds["a"][:3, :4], "b": feeds["b"][:4, :2]}
        assert np.allclose(m.run(small)["y"], small["a"] @ small["b"])  # usable afterwards
        print(f"  {target:<7} median {np.median(lat):.3f}  max {max(lat):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
