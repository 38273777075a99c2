#!/usr/bin/env python3
"""Time to first result and memory, as a user's fresh process meets a model: import the
runtime, load the model, run it once. symwasm's wasm32 module (wasmtime, the compiled-code
cache off, so Cranelift compiles it) and native library against onnxruntime (session
creation on one thread, its default graph optimizations), each measured in a process of its
own, the peers taking turns, several times; the median is reported.

Per model (the first configuration of each in the benchmark set, or the zoo with ``--zoo``):

- ``load + first run`` in ms, and its ratio to onnxruntime's (below 1: symwasm is faster);
  the import of the runtime is reported apart (it is paid once per process, not per model);
- the process's peak resident memory up to the first result (VmHWM), and the part of
  it above what the process held after the import (the model's own cost), with the ratio of
  the latter to onnxruntime's;
- the download: the module's bytes and its weights against the model's parameter bytes
  (initializers, Constant values and constant-shaped ConstantOfShape fills, at their dtypes).

    .venv/bin/python benchmarks/first_result.py [--zoo] [--models a,b] [--repeat 3] [--out FILE]

The table goes to stdout and ``--out`` (markdown); progress to stderr. Models are compiled
once, beforehand; compile time is `make bench`'s column, not this one's.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO), str(HERE)]

PEERS = ("onnxruntime", "symwasm-wasm32", "symwasm-native")
# the ONNX types packed several to a byte, by their bits (numpy holds each in a byte of its own)
PACKED_BITS = {getattr(onnx.TensorProto, n): bits for n, bits in
               (("INT4", 4), ("UINT4", 4), ("FLOAT4E2M1", 4), ("INT2", 2), ("UINT2", 2))
               if hasattr(onnx.TensorProto, n)}


def _status_mb(field: str) -> float:
    """A memory figure of this process from /proc/self/status (Linux): VmRSS now, VmHWM its
    peak. (Not ``ru_maxrss``, which keeps the peak of the process this one was forked from.)"""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(peer: str, artifact: str, inputs: str) -> None:
    """One measurement in this fresh process; its JSON on the last line of stdout."""
    feeds = dict(np.load(inputs))
    t0 = time.perf_counter()
    if peer == "onnxruntime":
        from py_peer import ort_session
        import onnxruntime  # noqa: F401  (the import is timed apart from the session)
    else:
        import wasm_runtime
    t1 = time.perf_counter()
    base = _status_mb("VmRSS")
    if peer == "onnxruntime":
        sess = ort_session(artifact)
        t2 = time.perf_counter()
        sess.run(None, feeds)
    else:
        model = wasm_runtime.load(artifact, cache=False, threads=1)  # a .wasm: Cranelift compiles it
        t2 = time.perf_counter()
        model.run(feeds)
    t3 = time.perf_counter()
    peak = _status_mb("VmHWM")
    print(json.dumps({"import_ms": (t1 - t0) * 1e3, "load_ms": (t2 - t1) * 1e3,
                      "first_run_ms": (t3 - t2) * 1e3, "peak_mb": peak, "after_import_mb": base}))


def measure(peer: str, artifact: Path, inputs: Path) -> dict[str, float]:
    r = subprocess.run([sys.executable, __file__, "--child", peer, str(artifact), str(inputs)],
                       capture_output=True, text=True, cwd=REPO, timeout=900)
    if r.returncode != 0:
        lines = (r.stderr.strip() or r.stdout.strip() or f"exit {r.returncode}").splitlines()
        raise RuntimeError(f"{peer}: {lines[-1]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def parameter_bytes(model_path: Path) -> int:
    """The model's parameters' bytes at their own dtypes (what the download must hold): its
    initializers, its Constant nodes' values and the tensors its ConstantOfShape nodes fill
    from a constant shape (the light models make their weights so)."""
    graph = onnx.load(str(model_path)).graph
    inits = {t.name: t for t in graph.initializer}

    def nbytes(dims, data_type: int) -> int:
        n = int(np.prod(list(dims), dtype=np.int64)) if len(dims) else 1
        if data_type in PACKED_BITS:
            return (n * PACKED_BITS[data_type] + 7) // 8
        return n * np.dtype(onnx.helper.tensor_dtype_to_np_dtype(data_type)).itemsize

    total = sum(nbytes(t.dims, t.data_type) for t in graph.initializer)
    for node in graph.node:
        value = next((a.t for a in node.attribute if a.name == "value"), None)
        if node.op_type == "Constant" and value is not None:
            total += nbytes(value.dims, value.data_type)
        elif node.op_type == "ConstantOfShape" and node.input[0] in inits:
            shape = onnx.numpy_helper.to_array(inits[node.input[0]])
            total += nbytes(shape.tolist(), value.data_type if value is not None else onnx.TensorProto.FLOAT)
    return total


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def one_model(name: str, path: Path, cfg: dict[str, Any], tmp: Path, repeat: int) -> dict[str, Any]:
    import run as bench
    from toolkit.compiler import compile_model

    feeds = bench.make_inputs(path, name, cfg)
    inputs = tmp / f"{name}.npz"
    np.savez(inputs, **feeds)
    row: dict[str, Any] = {"model": name, "config": cfg["name"], "params_bytes": parameter_bytes(path)}
    artifacts = {"onnxruntime": path}
    for target, suffix in (("wasm32", ".wasm"), ("native", ".so")):
        out = tmp / f"{name}{suffix}"
        res = compile_model(str(path), str(out), target=target, relaxed=target == "wasm32")
        artifacts[f"symwasm-{target}"] = out
        row[f"symwasm-{target}"] = {"module_bytes": res.module_bytes, "weights_bytes": res.weights_bytes}
    runs: dict[str, list[dict[str, float]]] = {p: [] for p in PEERS}
    for i in range(repeat):
        for peer in PEERS[i % len(PEERS):] + PEERS[:i % len(PEERS)]:  # the order rotates
            runs[peer].append(measure(peer, artifacts[peer], inputs))
    for peer in PEERS:
        row.setdefault(peer, {}).update(median_of(runs[peer]))
    return row


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "-"


def table(rows: list[dict[str, Any]]) -> list[str]:
    head = ["model", "config", "onnxruntime load+first ms", "symwasm wasm32 load+first ms (ratio)",
            "symwasm native load+first ms (ratio)", "peak MB ort / wasm32 / native",
            "above import MB ort / wasm32 / native (wasm32 ratio)", "import ms ort / wasm_runtime",
            "params MB", "wasm32 module MB (weights / params)"]
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        if "error" in r:
            error = r["error"].replace("|", "\\|")  # a cell of its own, whatever the message
            out.append(f"| {r['model']} | {r.get('config', '')} | error: {error} |" + " |" * (len(head) - 3))
            continue
        ort, w, n = r["onnxruntime"], r["symwasm-wasm32"], r["symwasm-native"]
        first = {k: v["load_ms"] + v["first_run_ms"] for k, v in (("o", ort), ("w", w), ("n", n))}
        above = {k: v["peak_mb"] - v["after_import_mb"] for k, v in (("o", ort), ("w", w), ("n", n))}
        out.append(" | ".join([
            f"| {r['model']}", r["config"], f"{first['o']:.1f}",
            f"{first['w']:.1f} ({_ratio(first['w'], first['o'])})", f"{first['n']:.1f} ({_ratio(first['n'], first['o'])})",
            f"{ort['peak_mb']:.0f} / {w['peak_mb']:.0f} / {n['peak_mb']:.0f}",
            f"{above['o']:.1f} / {above['w']:.1f} / {above['n']:.1f} ({_ratio(above['w'], above['o'])})",
            f"{ort['import_ms']:.0f} / {w['import_ms']:.0f}",
            f"{r['params_bytes'] / 2**20:.2f}",
            f"{w['module_bytes'] / 2**20:.2f} ({_ratio(w['weights_bytes'], r['params_bytes'])})"]) + " |")
    return out


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        child(*argv[1:4])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--zoo", action="store_true", help="the zoo of exported models instead of the benchmark set")
    ap.add_argument("--models", default="", help="comma-separated models (default: all)")
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per peer and model (3)")
    ap.add_argument("--out", type=Path, help="also write the table here")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error(f"--repeat must be at least 1, got {args.repeat}")
    import run as bench

    manifest, models_dir, wanted = bench.model_set(args.zoo, args.models, "first_result.py")
    rows = []
    with tempfile.TemporaryDirectory(prefix="symwasm-first-") as tmp:
        for name in wanted:
            entry = manifest[name]
            cfg = entry["configs"][0]
            bench.progress(f"{name} {cfg['name']}")
            try:
                rows.append(one_model(name, models_dir / entry["file"], cfg, Path(tmp), args.repeat))
            except Exception as exc:  # one model's failure is its row, not the run's
                msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                rows.append({"model": name, "config": cfg["name"], "error": msg})
    text = "\n".join(table(rows)) + "\n"
    print(text, end="")
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
