"""The web app's model (samples/web/digits.onnx, trained by samples/web/train_digits.py): its
held-out accuracy, computed here on both targets on scikit-learn's digits and compared with
the figure the training script recorded in digits.json; its outputs against onnx.reference
for canvases of several sizes, the empty one included."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import wasm_runtime
from util import build, check_model

pytestmark = pytest.mark.check  # make check and the full tier: the digits web app's module

WEB = Path(__file__).resolve().parents[1] / "samples" / "web"
INFO = json.loads((WEB / "digits.json").read_text())
MODEL = onnx.load(WEB / "digits.onnx")


@pytest.fixture(scope="module")
def digits():
    return load_digits()


def canvas(image: np.ndarray) -> np.ndarray:
    """A digit (0..16) as the model's input: ink in 0..1, as the training script fed it."""
    return (image / 16.0).astype(np.float32)


def test_the_recorded_split_is_scikit_learns(digits):
    split = INFO["split"]
    _, test = train_test_split(np.arange(len(digits.target)), test_size=split["test_size"],
                               random_state=split["random_state"],
                               stratify=digits.target if split["stratify"] else None)
    assert test.tolist() == split["test_indices"]
    assert (split["train"], split["test"]) == (len(digits.target) - len(test), len(test))


def test_held_out_accuracy(target, digits):
    test = INFO["split"]["test_indices"]
    model = build(MODEL, target)
    predicted = np.array([model.run({"canvas": canvas(digits.images[i])})["probs"].argmax() for i in test])
    correct = int((predicted == digits.target[test]).sum())
    assert correct / len(test) >= 0.95, f"held-out accuracy {correct}/{len(test)}"
    # the training script measured the exported model with onnxruntime: the same images right
    assert correct == INFO["test_correct"]


def test_outputs_match_onnx_reference(target, digits):
    image = canvas(digits.images[INFO["split"]["test_indices"][0]])
    big = np.zeros((90, 130), np.float32)
    big[5:85, 40:120] = np.kron(image, np.ones((10, 10), np.float32))
    dot = np.zeros((7, 5), np.float32)
    dot[3, 2] = 0.5
    feeds = [{"canvas": c} for c in (image, big, dot, np.zeros((20, 30), np.float32))]
    model = check_model(MODEL, target, feeds, atol=1e-5)
    empty = model.run(feeds[-1])
    assert empty["crop"].shape == (0, 0) and not empty["probs"].any() and empty["n_ink"].tolist() == [0]
    rows, cols = np.nonzero(big)
    assert model.run(feeds[1])["box"].tolist() == [rows.min(), cols.min(), rows.max() + 1, cols.max() + 1]


def test_a_wrong_canvas_is_refused_by_name():
    model = build(MODEL, "wasm32")
    for x, message in ((np.zeros((1, 8, 8), np.float32), "input 'canvas': expected rank 2, got rank 3"),
                       (np.zeros((8, 8), np.float64), "input 'canvas': expected dtype float32, got float64")):
        with pytest.raises(wasm_runtime.ModelError) as e:
            model.run({"canvas": x})
        assert (e.value.status, str(e.value)) == (wasm_runtime.STATUS["INVALID_INPUT"], message)
