"""The Python side of web_app.test.js: test images of the web app's digits and the Python
host's predictions on the pixels the page fed its model.

  digits_host.py images N          the first N images of the model's test split (digits.json's
                                   indices into load_digits()), as JSON [{index, label, pixels}]
                                   with pixels the 64 values 0..16
  digits_host.py predict MODULE    stdin: JSON [{shape: [h, w], pixels: base64 of float32}];
                                   stdout: JSON [{predicted, probs}] from wasm_runtime, predicted
                                   null for an empty canvas
"""
from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
import wasm_runtime  # noqa: E402


def images(n: int) -> list[dict]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    test = json.loads((REPO / "samples" / "web" / "digits.json").read_text())["split"]["test_indices"]
    return [{"index": i, "label": int(digits.target[i]), "pixels": digits.images[i].astype(int).ravel().tolist()}
            for i in test[:n]]


def predict(module: str, canvases: list[dict]) -> list[dict]:
    model = wasm_runtime.load(module)
    out = []
    for c in canvases:
        pixels = np.frombuffer(base64.b64decode(c["pixels"]), np.float32).reshape(c["shape"])
        result = model.run({"canvas": pixels})
        probs = result["probs"]
        empty = 0 in result["crop"].shape
        out.append({"predicted": None if empty else int(probs.argmax()), "probs": probs.tolist()})
    return out


def main() -> int:
    if sys.argv[1:2] == ["images"] and len(sys.argv) == 3:
        print(json.dumps(images(int(sys.argv[2]))))
    elif sys.argv[1:2] == ["predict"] and len(sys.argv) == 3:
        print(json.dumps(predict(sys.argv[2], json.load(sys.stdin))))
    else:
        sys.exit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
