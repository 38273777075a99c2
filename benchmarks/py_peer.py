"""In-process Python peers for benchmarks/run.py, hosted in a child process.

Each peer (onnxruntime, symwasm-wasm32, symwasm-native) runs in its own long-lived process so a
crash in freshly compiled native code costs one model's result, not the whole benchmark.  The
process speaks the same JSON-lines protocol as ort_web_runner.mjs:

    {"op": "load", "model": PATH, "artifact_dir": DIR}   -> {"ok": true, "info": {...}}
    {"op": "bench", "inputs": [...], "warmup_s": S, "min_time_s": S, "min_runs": N,
     "out_dir": DIR}                                      -> {"ok": true, "times_ms": [...], ...}

A load request may name ``"artifact"``: a module its one-thread peer compiled, which a
threaded symwasm peer loads instead of compiling the model again.

Usage:  python py_peer.py PEER[@THREADS]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # use the tree's toolkit even if the venv lacks it

Feeds = dict[str, np.ndarray]
RunFn = Callable[[Feeds], Any]  # a list of arrays, or a mapping by output name


def first_line(exc: BaseException) -> str:
    """`Type: first line of the message`, the form errors take in the results table."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def ort_session(model: str, threads: int = 1) -> Any:
    """An onnxruntime CPU session on ``threads`` intra-op threads (one inter-op), sequential."""
    # Imported here so the symwasm workers never load onnxruntime's native library.
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3  # the light_* models trigger unused-initializer warnings
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def load_onnxruntime(model: str, artifact_dir: str, threads: int = 1,
                     artifact: str | None = None) -> tuple[RunFn, dict[str, Any]]:
    """Loads `model` in onnxruntime; `artifact_dir` is unused (nothing is compiled)."""
    t0 = time.perf_counter()
    sess = ort_session(model, threads)
    return (lambda feeds: sess.run(None, feeds)), {"load_ms": (time.perf_counter() - t0) * 1e3}


CACHED_LOADS = 5


def cached_load_ms(path: Path, cache: str) -> float:
    """Median load time of a .wasm whose compiled code is in `cache`, as a later process
    finds it: once the racy window is over (before it, the cache hashes the files it would
    otherwise trust by their identity) and one load has sealed them again."""
    import wasm_runtime
    from wasm_runtime.cache import RACY_NS

    time.sleep(RACY_NS / 1e9)
    wasm_runtime.load(path, cache=cache)
    times = []
    for _ in range(CACHED_LOADS):
        m = wasm_runtime.load(path, cache=cache)
        if m.code_cache != "hit":
            raise RuntimeError(f"the compiled-code cache did not hold {path}: {m.code_cache}")
        times.append(m.load_seconds * 1e3)
    return statistics.median(times)


def load_symwasm(target: str, model: str, artifact_dir: str, threads: int = 1,
                 artifact: str | None = None) -> tuple[RunFn, dict[str, Any]]:
    """Compiles `model` for `target` with the symwasm compiler and loads the artifact on
    ``threads`` threads; with ``artifact``, loads that module instead of compiling."""
    import wasm_runtime
    from toolkit.compiler import compile_model

    if artifact:
        m = wasm_runtime.load(artifact, threads=threads, cache=False)
        if m.threads != threads:
            raise RuntimeError(m.threads_note)
        return m.run, {"artifact": artifact, "load_ms": m.load_seconds * 1e3, "threads": m.threads}
    suffix = ".wasm" if target == "wasm32" else ".so"
    out = Path(artifact_dir) / f"{Path(model).stem}{suffix}"
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    # wasm32 with its relaxed-SIMD and threads variants beside it: the host runs the one its
    # engine validates, the threads one when the peer runs at more than one thread
    wasm = target == "wasm32"
    res = compile_model(model, str(out), target=target, relaxed=wasm, threads=wasm)
    wall = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="symwasm-code-cache-") as cache:
        # nothing cached: a .wasm is compiled by wasmtime
        m = wasm_runtime.load(str(out), cache=cache, threads=threads)
        if m.threads != threads:
            raise RuntimeError(m.threads_note)
        info = {
            "compile_s": getattr(res, "seconds", wall),
            "module_bytes": getattr(res, "module_bytes", out.stat().st_size),
            "weights_bytes": getattr(res, "weights_bytes", None),
            "artifact": str(out),
            "load_ms": m.load_seconds * 1e3,
        }
        if m.variant:
            info["variant"] = m.variant
        if target == "wasm32":
            info["load_cached_ms"] = cached_load_ms(out, cache)
    return m.run, info


LOADERS: dict[str, Callable[..., tuple[RunFn, dict[str, Any]]]] = {
    "onnxruntime": load_onnxruntime,
    "symwasm-wasm32": lambda *a: load_symwasm("wasm32", *a),
    "symwasm-native": lambda *a: load_symwasm("native", *a),
}


def as_list(outputs: Any, names: list[str]) -> list[np.ndarray]:
    """Normalizes run results (a mapping by output name, or a sequence) to model order."""
    if isinstance(outputs, Mapping):
        return [np.asarray(outputs[n]) for n in names]
    return [np.asarray(o) for o in outputs]


def read_inputs(specs: list[dict[str, Any]]) -> Feeds:
    """Reads the raw tensor files the orchestrator wrote."""
    return {s["name"]: np.fromfile(s["file"], dtype=s["dtype"]).reshape(s["shape"])
            for s in specs}


def run_for(run: RunFn, feeds: Feeds, seconds: float, min_runs: int) -> tuple[list[float], Any]:
    """Runs for at least `seconds` and `min_runs` runs; returns per-run ms and the last outputs."""
    times: list[float] = []
    outputs = None
    end = time.perf_counter() + seconds
    while len(times) < min_runs or time.perf_counter() < end:
        t0 = time.perf_counter_ns()
        outputs = run(feeds)
        times.append((time.perf_counter_ns() - t0) / 1e6)
    return times, outputs


def write_outputs(peer: str, outputs: list[np.ndarray], names: list[str], out_dir: str
                  ) -> list[dict[str, Any]]:
    """Writes each output as a raw file (native byte order) and returns its description."""
    descs = []
    for i, (name, arr) in enumerate(zip(names, outputs)):
        arr = np.ascontiguousarray(arr)
        file = os.path.join(out_dir, f"{peer}.out{i}.bin")
        arr.tofile(file)
        descs.append({"name": name, "dtype": arr.dtype.name, "shape": list(arr.shape),
                      "file": file})
    return descs


class Worker:
    """Holds the loaded model of one peer and answers protocol requests."""

    def __init__(self, peer: str) -> None:
        self.peer = peer
        base, _, n = peer.partition("@")
        self.loader, self.threads = LOADERS[base], int(n) if n else 1
        self.run: RunFn | None = None
        self.output_names: list[str] = []

    def load(self, req: dict[str, Any]) -> dict[str, Any]:
        """Loads (and for symwasm compiles) `req["model"]`, replacing the previous model."""
        self.run = None  # drop the previous model before compiling the next
        self.run, info = self.loader(req["model"], req["artifact_dir"], self.threads, req.get("artifact"))
        graph = onnx.load(req["model"], load_external_data=False).graph
        self.output_names = [o.name for o in graph.output]
        return {"info": info}

    def bench(self, req: dict[str, Any]) -> dict[str, Any]:
        """Warms up, times the loaded model on the request's inputs, writes the last outputs."""
        if self.run is None:
            raise RuntimeError("no model loaded")
        feeds = read_inputs(req["inputs"])
        warm, _ = run_for(self.run, feeds, req["warmup_s"], 1)
        times, outputs = run_for(self.run, feeds, req["min_time_s"], req["min_runs"])
        outputs = as_list(outputs, self.output_names)
        return {"times_ms": times, "warmup_runs": len(warm),
                "outputs": write_outputs(self.peer, outputs, self.output_names, req["out_dir"])}

    def handle(self, line: str) -> dict[str, Any]:
        """Answers one request line; failures become `{"ok": false, "error": ...}` replies."""
        try:
            req = json.loads(line)
            op = {"load": self.load, "bench": self.bench}.get(req.get("op"))
            if op is None:
                raise ValueError(f"unknown op {req.get('op')!r}")
            return {"ok": True, **op(req)}
        except Exception as e:  # noqa: BLE001 - every failure is reported, the worker lives on
            return {"ok": False, "error": first_line(e), "detail": traceback.format_exc()}


def main() -> None:
    """Serves requests until stdin closes."""
    base, _, n = sys.argv[1].partition("@") if len(sys.argv) == 2 else ("", "", "")
    if base not in LOADERS or not (n == "" or n.isdigit() and int(n) >= 1):
        sys.exit(f"usage: py_peer.py {{{','.join(LOADERS)}}}[@THREADS]")
    worker = Worker(sys.argv[1])
    # stdout is the protocol channel; anything the peers print goes to stderr instead.
    proto = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if line.strip():
            proto.write(json.dumps(worker.handle(line)) + "\n")
            proto.flush()


if __name__ == "__main__":
    main()
