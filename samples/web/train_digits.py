"""Train the web app's digit classifier and write samples/web/digits.onnx and digits.json.

Dev-only (`make digits-model`, which installs torch, scikit-learn and onnxruntime into
.venv-zoo, never into .venv): the trained model and its figures are committed, and
`make demo` / `make test` only read them.

The model takes a canvas, float32 [h, w] of ink in 0..1 at any size, and does what the
app needs inside the graph: NonZero finds the ink, ReduceMin/ReduceMax of its row and column
indices give the bounding box, Slice crops to it (a shape known only from the data), Pad
makes it square, Resize (linear, antialiased) to 32x32 and AveragePool 4x4 bring it to the
8x8 of scikit-learn's digits (32x32 bitmaps summed in 4x4 blocks), and a small CNN classifies
it. An If on the ink count gives an empty canvas its own answer: a 0 x 0 crop and zero
probabilities, which the app reports as "nothing drawn".

The CNN is trained on scikit-learn's bundled 8x8 digits (fixed stratified split) after the
same preprocessing graph (run by onnxruntime, so training sees exactly what the app feeds
it), with augmented copies drawn the way a user draws: thicker and thinner strokes, skewed,
rotated and rescaled binary digits on canvases of other sizes. The held-out accuracy is the
exported model's own, measured by onnxruntime on the test split fed as canvases; training
is deterministic (fixed seeds, one thread).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper, numpy_helper
from scipy import ndimage
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

HERE = Path(__file__).resolve().parent
OPSET = 18  # Resize's antialias attribute
SPLIT = {"test_size": 0.25, "random_state": 0, "stratify": True}
SEED = 0
AUGMENTED_COPIES = 8
EPOCHS = 40
GALLERY_PER_CLASS = 2
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def const(name: str, value) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], name=name, value=numpy_helper.from_array(np.asarray(value), name))


def preprocess_nodes(canvas: str, nz: str, digit: str) -> list[onnx.NodeProto]:
    """canvas [h, w] and its NonZero indices [2, n] -> digit [1, 1, 8, 8] (ink in 0..1), plus
    the values `box` ([top, left, bottom, right), int64 [4]) and `crop` ([crop_h, crop_w])."""
    n = helper.make_node
    return [
        const("axis1", np.array([1], np.int64)),
        n("ReduceMin", [nz, "axis1"], ["top_left"], name="bbox_min", keepdims=0),
        n("ReduceMax", [nz, "axis1"], ["last"], name="bbox_max", keepdims=0),
        const("one", np.array(1, np.int64)),
        n("Add", ["last", "one"], ["bottom_right"], name="bbox_end"),
        n("Concat", ["top_left", "bottom_right"], ["box"], name="box", axis=0),
        const("axes01", np.array([0, 1], np.int64)),
        n("Slice", [canvas, "top_left", "bottom_right", "axes01"], ["crop"], name="crop"),
        # centre the crop in a square of its longer side, as the digits' bitmaps were
        n("Sub", ["bottom_right", "top_left"], ["crop_size"], name="crop_size"),
        n("ReduceMax", ["crop_size"], ["side"], name="side", keepdims=1),
        n("Sub", ["side", "crop_size"], ["margin"], name="margin"),
        const("two", np.array(2, np.int64)),
        n("Div", ["margin", "two"], ["pad_before"], name="pad_before"),
        n("Sub", ["margin", "pad_before"], ["pad_after"], name="pad_after"),
        n("Concat", ["pad_before", "pad_after"], ["pads"], name="pads", axis=0),
        n("Pad", ["crop", "pads"], ["square"], name="square"),
        n("Unsqueeze", ["square", "axes01"], ["square4"], name="square4"),
        const("size32", np.array([1, 1, 32, 32], np.int64)),
        n("Resize", ["square4", "", "", "size32"], ["bitmap"], name="bitmap", mode="linear", antialias=1),
        n("AveragePool", ["bitmap"], [digit], name="blocks", kernel_shape=[4, 4], strides=[4, 4]),
    ]


def ink_nodes(canvas: str) -> list[onnx.NodeProto]:
    """canvas -> `nz` [2, n_ink], the indices of its ink (argwhere(canvas > 0))."""
    return [const("zero", np.array(0.0, np.float32)),
            helper.make_node("Greater", [canvas, "zero"], ["ink"], name="ink"),
            helper.make_node("NonZero", ["ink"], ["nz"], name="nonzero")]


def cnn_nodes(weights: dict[str, np.ndarray], x: str, probs: str) -> tuple[list, list]:
    """The classifier: x [1, 1, 8, 8] -> probs [10]; returns (nodes, initializers)."""
    n = helper.make_node
    nodes = [
        n("Conv", [x, "conv1.weight", "conv1.bias"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        n("Relu", ["c1"], ["r1"], name="relu1"),
        n("Conv", ["r1", "conv2.weight", "conv2.bias"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        n("Relu", ["c2"], ["r2"], name="relu2"),
        n("MaxPool", ["r2"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["p2", "conv3.weight", "conv3.bias"], ["c3"], name="conv3", pads=[1, 1, 1, 1]),
        n("Relu", ["c3"], ["r3"], name="relu3"),
        n("MaxPool", ["r3"], ["p3"], name="pool3", kernel_shape=[2, 2], strides=[2, 2]),
        n("Flatten", ["p3"], ["flat"], name="flatten"),
        n("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
        n("Softmax", ["logits"], ["probs2"], name="softmax", axis=-1),
        n("Flatten", ["probs2"], ["probs_row"], name="probs_row", axis=0),
        const("ten", np.array([10], np.int64)),
        n("Reshape", ["probs_row", "ten"], [probs], name="probs"),
    ]
    inits = [numpy_helper.from_array(w.astype(np.float32), k) for k, w in weights.items()]
    return nodes, inits


def _model(name: str, nodes, outputs, inits=()) -> onnx.ModelProto:
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("canvas", F, ["h", "w"])], outputs,
                          initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="symwasm-samples")
    m.ir_version = 9
    onnx.checker.check_model(m, full_check=True)
    return m


def preprocess_model() -> onnx.ModelProto:
    """canvas -> digit [1, 1, 8, 8]: the classifier's input, for training (needs some ink)."""
    return _model("digits_preprocess", ink_nodes("canvas") + preprocess_nodes("canvas", "nz", "digit"),
                  [helper.make_tensor_value_info("digit", F, [1, 1, 8, 8])])


def full_model(weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    """The app's model: canvas [h, w] -> probs [10], digit [8, 8], box [4], crop [crop_h, crop_w],
    n_ink [1] (how many ink pixels NonZero found)."""
    n = helper.make_node
    outs = [helper.make_tensor_value_info("probs", F, [10]), helper.make_tensor_value_info("digit", F, [8, 8]),
            helper.make_tensor_value_info("box", I64, [4]),
            helper.make_tensor_value_info("crop", F, ["crop_h", "crop_w"])]
    cnn, inits = cnn_nodes(weights, "digit4", "probs")
    then_nodes = preprocess_nodes("canvas", "nz", "digit4") + cnn + [
        const("shape88", np.array([8, 8], np.int64)),
        n("Reshape", ["digit4", "shape88"], ["digit"], name="digit")]
    then_g = helper.make_graph(then_nodes, "classify", [], outs)
    else_g = helper.make_graph([
        const("no_probs", np.zeros(10, np.float32)), const("no_digit", np.zeros((8, 8), np.float32)),
        const("no_box", np.zeros(4, np.int64)), const("no_crop", np.zeros((0, 0), np.float32)),
    ], "nothing_drawn", [], [helper.make_tensor_value_info(o, t, None) for o, t in
                             (("no_probs", F), ("no_digit", F), ("no_box", I64), ("no_crop", F))])
    nodes = ink_nodes("canvas") + [
        n("Shape", ["nz"], ["n_ink"], name="n_ink", start=1),
        const("zero_i", np.array([0], np.int64)),
        n("Greater", ["n_ink", "zero_i"], ["has_ink1"], name="has_ink1"),
        n("Squeeze", ["has_ink1"], ["has_ink"], name="has_ink"),
        n("If", ["has_ink"], ["probs", "digit", "box", "crop"], name="if_ink",
          then_branch=then_g, else_branch=else_g),
    ]
    return _model("digits", nodes, outs + [helper.make_tensor_value_info("n_ink", I64, [1])], inits)


# ---------------------------------------------------------------- data

def split() -> tuple[np.ndarray, np.ndarray]:
    """Indices of the training and test images in load_digits(), a fixed stratified split."""
    y = load_digits().target
    idx = np.arange(len(y))
    return train_test_split(idx, test_size=SPLIT["test_size"], random_state=SPLIT["random_state"],
                            stratify=y if SPLIT["stratify"] else None)


def drawn_like(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """An 8x8 digit (ink 0..1) as a user might draw it: a binary bitmap at 4x scale, its
    strokes thinner or thicker, sheared, rotated and stretched, on a canvas of another size."""
    big = ndimage.zoom(img, 4, order=1) > rng.uniform(0.3, 0.6)
    grow = rng.integers(-1, 4)
    if grow > 0:
        big = ndimage.binary_dilation(big, iterations=int(grow))
    elif grow < 0 and ndimage.binary_erosion(big).any():
        big = ndimage.binary_erosion(big)
    angle = np.deg2rad(rng.uniform(-12, 12))
    shear, stretch = rng.uniform(-0.25, 0.25), rng.uniform(0.7, 1.3)
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    a = rot @ np.array([[1.0, shear], [0.0, stretch]])
    scale = rng.uniform(1.0, 3.0)
    side = int(np.ceil(32 * scale * 1.6))
    inv = np.linalg.inv(a) / scale
    centre = np.array([16.0, 16.0])
    offset = centre - inv @ (np.array([side, side]) / 2 + rng.uniform(-0.1, 0.1, 2) * side)
    canvas = ndimage.affine_transform(big.astype(np.float32), inv, offset=offset,
                                      output_shape=(side, side), order=1)
    return np.clip(canvas, 0, 1).astype(np.float32)


def preprocess(session: ort.InferenceSession, canvases) -> np.ndarray:
    return np.stack([session.run(None, {"canvas": c})[0][0] for c in canvases])


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.conv3 = nn.Conv2d(32, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 2 * 2, 10)
        self.drop = nn.Dropout(0.3)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv3(x)), 2)
        return self.fc(self.drop(torch.flatten(x, 1)))


def train(x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    torch.manual_seed(SEED)
    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=2e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, EPOCHS)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
    gen = torch.Generator().manual_seed(SEED)
    for epoch in range(EPOCHS):
        net.train()
        order = torch.randperm(len(xt), generator=gen)
        total = 0.0
        for i in range(0, len(order), 64):
            b = order[i:i + 64]
            loss = nn.functional.cross_entropy(net(xt[b]), yt[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(b)
        sched.step()
        if epoch % 10 == 9 or epoch == EPOCHS - 1:
            print(f"epoch {epoch + 1}: loss {total / len(xt):.4f}", file=sys.stderr)
    net.eval()
    return {k: v.detach().numpy() for k, v in net.state_dict().items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=HERE, help="where digits.onnx and digits.json go (default: samples/web)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    digits = load_digits()
    images, labels = (digits.images / 16.0).astype(np.float32), digits.target
    train_idx, test_idx = split()

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    pre = ort.InferenceSession(preprocess_model().SerializeToString(), opts)
    rng = np.random.default_rng(SEED)
    canvases = [images[i] for i in train_idx]
    targets = [labels[train_idx]]
    for _ in range(AUGMENTED_COPIES):
        canvases += [drawn_like(images[i], rng) for i in train_idx]
        targets.append(labels[train_idx])
    x = preprocess(pre, canvases)
    weights = train(x, np.concatenate(targets))

    model = full_model(weights)
    sess = ort.InferenceSession(model.SerializeToString(), opts)
    probs = np.stack([sess.run(["probs"], {"canvas": images[i]})[0] for i in test_idx])
    predicted = probs.argmax(1)
    correct = int((predicted == labels[test_idx]).sum())
    accuracy = correct / len(test_idx)
    # the exported graph computes what the trained network computes
    net = Net()
    net.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    net.eval()
    with torch.no_grad():
        want = torch.softmax(net(torch.from_numpy(preprocess(pre, [images[i] for i in test_idx]))), 1).numpy()
    np.testing.assert_allclose(probs, want, rtol=1e-4, atol=1e-5)

    args.out.mkdir(parents=True, exist_ok=True)
    onnx.save(model, args.out / "digits.onnx")
    gallery = [int(i) for k in range(10) for i in test_idx[labels[test_idx] == k][:GALLERY_PER_CLASS]]
    info = {
        "dataset": "sklearn.datasets.load_digits (8x8, 1797 images), scaled to ink 0..1 (value / 16)",
        "split": {**SPLIT, "train": len(train_idx), "test": len(test_idx),
                  "test_indices": [int(i) for i in test_idx]},
        "training": {"augmented_copies": AUGMENTED_COPIES, "epochs": EPOCHS, "seed": SEED,
                     "parameters": int(sum(w.size for w in weights.values()))},
        "test_correct": correct,
        "test_accuracy": accuracy,
        "gallery": [{"index": i, "label": int(labels[i]), "pixels": digits.images[i].astype(int).ravel().tolist()}
                    for i in gallery],
    }
    (args.out / "digits.json").write_text(json.dumps(info, separators=(",", ":")) + "\n")
    size = (args.out / "digits.onnx").stat().st_size
    print(f"wrote {args.out / 'digits.onnx'} ({size / 1e3:.1f} kB) and digits.json: "
          f"held-out accuracy {correct}/{len(test_idx)} = {accuracy:.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
