"""Build the samples: each ONNX model, compiled to .wasm (both variants: SIMD128 and relaxed
SIMD) and a native library, plus its demo inputs and the outputs onnx.reference computes for
them (for run_python.py, run_node.mjs, the browser page and the web app)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from samples.models import SAMPLES  # noqa: E402
from toolkit.compiler import compile_model  # noqa: E402


def encode(arr: np.ndarray) -> dict:
    return {"dtype": arr.dtype.name, "shape": list(arr.shape), "data": arr.reshape(-1).tolist()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="build/samples", help="output directory (default build/samples)")
    ap.add_argument("--only", help="comma-separated sample names (default: all)")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(SAMPLES)
    unknown = [n for n in names if n not in SAMPLES]
    if unknown:
        ap.error(f"unknown sample(s) {', '.join(unknown)}; the samples are {', '.join(SAMPLES)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    index = {}
    for name in names:
        model, feeds_list = SAMPLES[name]()
        onnx.save(model, out / f"{name}.onnx")
        for target, ext in (("wasm32", ".wasm"), ("native", ".so")):
            r = compile_model(model, out / f"{name}{ext}", target=target, relaxed=target == "wasm32")
            print(f"[{name}] {target}: {r.module_bytes / 1e3:.1f} kB in {r.seconds:.2f} s")
            if target == "wasm32":
                # the web app shows the size of the file its engine runs, and the weights' share
                sizes = {p.name: p.stat().st_size for p in r.variants.values()}
                weights = r.weights_bytes
        ref = ReferenceEvaluator(model)
        runs = []
        for feeds in feeds_list:
            expected = dict(zip([o.name for o in model.graph.output], ref.run(None, feeds)))
            runs.append({"inputs": {k: encode(v) for k, v in feeds.items()},
                         "expected": {k: encode(np.asarray(v)) for k, v in expected.items()}})
        index[name] = {"wasm": f"{name}.wasm", "native": f"{name}.so", "doc": (SAMPLES[name].__doc__ or "").strip(),
                       "wasm_bytes": sizes, "weights_bytes": weights, "runs": runs}
    (out / "samples.json").write_text(json.dumps(index))
    print(f"wrote {len(index)} samples to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
