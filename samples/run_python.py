"""Run every built sample from Python on both targets (wasmtime and the native library) and
check each run against the outputs onnx.reference computed."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import wasm_runtime  # noqa: E402


def decode(d: dict) -> np.ndarray:
    return np.array(d["data"], dtype=d["dtype"]).reshape(d["shape"])


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "build/samples")
    index = json.loads((root / "samples.json").read_text())
    failures = 0
    for name, s in index.items():
        for kind in ("wasm", "native"):
            model = wasm_runtime.load(root / s[kind])
            for run in s["runs"]:
                feeds = {k: decode(v) for k, v in run["inputs"].items()}
                got = model.run(feeds)
                shapes = ", ".join(f"{k}{list(v.shape)}" for k, v in feeds.items())
                for out, want in run["expected"].items():
                    w = decode(want)
                    ok = got[out].shape == w.shape and np.allclose(got[out], w, rtol=1e-4, atol=1e-5)
                    failures += not ok
                    print(f"[python/{model.target}] {name}: {shapes} -> {out}{list(got[out].shape)} "
                          f"{'ok' if ok else 'MISMATCH'}")
    print(f"python: {'all samples match onnx.reference' if not failures else f'{failures} mismatches'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
