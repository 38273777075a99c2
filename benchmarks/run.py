#!/usr/bin/env python3
"""Side-by-side latency benchmark: symwasm against onnxruntime and onnxruntime-web.

Builds the shared model set (make_models.py), then for every model configuration in its manifest
times these peers on identical inputs, each on one thread:

  symwasm-wasm32   toolkit.compiler.compile_model(target="wasm32"), run by wasm_runtime (wasmtime)
  symwasm-node     the same .wasm run by the JS loader in Node (symwasm_node_runner.mjs): the
                   engine onnxruntime-web runs in, so its ratio compares like with like
  symwasm-native   the same with target="native" (a shared library)
  onnxruntime      native CPU provider, 1 intra-op and 1 inter-op thread, sequential
  onnxruntime-web  the npm package's wasm backend in Node, 1 thread, SIMD (ort_web_runner.mjs)

and again at each other count of ``--threads`` (default: 1 and this machine's cores), as
``PEER@N``, the peers that split a call over N threads: onnxruntime (``intra_op_num_threads``),
onnxruntime-web (``numThreads``, its worker pool in Node), symwasm-native (the library's pool),
symwasm-wasm32 and symwasm-node (the module's threads variant under wasmtime and in Node, each
thread an instance of the module over one shared memory: Python threads, or the JS loader's
workers); the symwasm ones load the module their one-thread peer compiled. The ratios pair
equal thread counts.

Each peer lives in its own long-lived child process (py_peer.py, ort_web_runner.mjs), so model
loading and process start are never timed and a crashing peer only loses its own result.  Peers
are interleaved: every repetition times each peer once, in a rotating order, after a warm-up.
Outputs are checked against onnxruntime; failures and mismatches are reported in the table and
the run goes on.  Results go to stdout and to OUT_DIR/bench_results.{md,json}; progress to stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from node_bin import missing as node_missing
from node_bin import node
from node_bin import version as node_version
from py_peer import CACHED_LOADS, first_line, ort_session

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PEERS = ("onnxruntime", "onnxruntime-web", "symwasm-native", "symwasm-wasm32", "symwasm-node")
# the peers that split one call over several threads; the others run on one
THREADED = ("onnxruntime", "onnxruntime-web", "symwasm-native", "symwasm-wasm32", "symwasm-node")
# Ratios reported as (numerator, denominator): the symwasm target against its like-for-like peer
# (symwasm-node and onnxruntime-web share the engine; wasmtime's ratio is reported beside it).
RATIOS = (("symwasm-node", "onnxruntime-web"), ("symwasm-wasm32", "onnxruntime-web"),
          ("symwasm-native", "onnxruntime"))
MIN_RUNS = 5
# Later repetitions only need to refill caches after another peer ran: V8 and wasmtime keep
# their optimized code, so the long first warm-up is not repeated.
REWARM_S = 0.25
RTOL, ATOL = 1e-3, 1e-4
ERROR_WIDTH = 100  # table cells stay readable; the JSON keeps the full message


def progress(msg: str) -> None:
    """One progress line on stderr (stdout carries only the results)."""
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- model set

def build_models(script: Path, cache: Path) -> dict[str, Any]:
    """Runs make_models.py into `cache` unless its models.json came from the same script."""
    if not script.is_file():
        sys.exit(f"model script not found: {script} (use --models-script)")
    digest = hashlib.sha256(script.read_bytes()).hexdigest()
    stamp, manifest = cache / ".make_models.sha256", cache / "models.json"
    if manifest.is_file() and stamp.is_file() and stamp.read_text() == digest:
        progress(f"models: cached in {cache}")
    else:
        progress(f"models: building into {cache} with {script}")
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(script), "--out", str(cache)],
                       check=True, stdout=sys.stderr)
        stamp.write_text(digest)
    return json.loads(manifest.read_text())


ZOO = REPO / "tests" / "models" / "zoo"
MODELS_SCRIPT = REPO.parent / "shared" / "benchmarks" / "make_models.py"


def model_set(zoo: bool, models: str, tool: str, models_dir: Path | None = None,
              script: Path = MODELS_SCRIPT) -> tuple[dict[str, Any], Path, list[str]]:
    """The zoo's manifest or the benchmark set's (built into ``models_dir``, default
    build/bench_models), the directory its files are in, and the models of the comma list
    ``models`` (all when empty), exiting with ``tool``'s name on an unknown one."""
    if zoo:
        manifest, where = zoo_models(), ZOO
    else:
        where = models_dir or REPO / "build" / "bench_models"
        manifest = build_models(script.resolve(), where)
    return manifest, where, pick("--models", models, manifest, tool) if models else list(manifest)


def zoo_models() -> dict[str, Any]:
    """The zoo of exported models (tests/models/zoo/zoo.json) as a benchmark manifest: one
    configuration per binding of the model's dynamic dims, fed the inputs stored with it
    (token ids must be in range, so seeded normals would not do)."""
    zoo = json.loads((ZOO / "zoo.json").read_text())
    out = {}
    for name, info in zoo.items():
        arrays = np.load(ZOO / f"{name}.npz")
        configs = []
        for k, binding in enumerate(info["bindings"]):
            configs.append({"name": "".join(f"{d[0]}{v}" for d, v in binding.items()),
                            "inputs": {i: list(arrays[f"{k}/in/{i}"].shape) for i in info["inputs"]},
                            "symbols": binding, "feeds": [f"{name}.npz", k], "outputs": info["outputs"],
                            "tol": [max(RTOL, info["rtol"]), max(ATOL, info["atol"])]})
        out[name] = {"file": info["file"], "configs": configs}
    return out


def stored_reference(model_path: Path, cfg: dict[str, Any]) -> list[np.ndarray]:
    """A zoo configuration's reference outputs: onnxruntime's, without graph optimizations,
    stored beside the model (tests/models/generate.py). onnxruntime's default optimizations
    fuse a quantized model's QDQ pairs into integer kernels that round differently, so the
    stored outputs, not a fresh session's, are what every peer is held to."""
    file, k = cfg["feeds"]
    arrays = np.load(model_path.parent / file)
    return [arrays[f"{k}/out/{o}"] for o in cfg["outputs"]]


def make_inputs(model_path: Path, model: str, cfg: dict[str, Any]) -> dict[str, np.ndarray]:
    """Seeded inputs with the config's shapes and the model's declared dtypes, or the stored
    inputs a zoo configuration names."""
    if "feeds" in cfg:
        file, k = cfg["feeds"]
        arrays = np.load(model_path.parent / file)
        return {i: arrays[f"{k}/in/{i}"] for i in cfg["inputs"]}
    graph = onnx.load(str(model_path), load_external_data=False).graph
    dtypes = {i.name: onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)
              for i in graph.input}
    rng = np.random.default_rng(zlib.crc32(f"{model}/{cfg['name']}".encode()))
    return {name: rng.standard_normal(shape).astype(dtypes[name])
            for name, shape in cfg["inputs"].items()}


def write_inputs(feeds: dict[str, np.ndarray], tmp: Path) -> list[dict[str, Any]]:
    """Writes inputs as raw files every peer reads, so all of them see the same bytes."""
    specs = []
    for i, (name, arr) in enumerate(feeds.items()):
        file = tmp / f"in{i}.bin"
        np.ascontiguousarray(arr).tofile(file)
        specs.append({"name": name, "dtype": arr.dtype.name, "shape": list(arr.shape),
                      "file": str(file)})
    return specs


# ---------------------------------------------------------------- peer processes

class PeerFailure(Exception):
    """A peer could not load or run a model; `detail` keeps the long form for the JSON."""

    def __init__(self, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.detail = detail


class PeerDied(PeerFailure):
    """The peer's process exited: whatever it had loaded is gone."""


class PeerProcess:
    """A long-lived peer child process speaking JSON lines, restarted after a crash."""

    def __init__(self, name: str, argv: list[str], missing: str | None = None) -> None:
        self.name = name
        self.argv = argv
        self.missing = missing  # why the peer cannot start at all, if so
        self.proc: subprocess.Popen[str] | None = None

    def request(self, req: dict[str, Any]) -> dict[str, Any]:
        """Sends one request and returns the reply; raises PeerFailure on any failure."""
        if self.missing:
            raise PeerFailure(self.missing)
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True, cwd=REPO)
        assert self.proc.stdin and self.proc.stdout
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # the process is gone; readline() sees EOF and reports how it ended
        line = self.proc.stdout.readline()
        if not line:
            raise PeerDied(f"peer process died ({exit_reason(self.proc.wait())})")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise PeerFailure(reply.get("error", "unknown error"), reply.get("detail"))
        return reply

    def close(self) -> None:
        """Ends the process by closing its stdin, the protocol's end of input."""
        if self.proc is not None and self.proc.poll() is None:
            assert self.proc.stdin
            self.proc.stdin.close()
            self.proc.wait()


def exit_reason(code: int) -> str:
    """`exit 3` or the signal name for a negative return code."""
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit {code}"


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def split_peer(name: str) -> tuple[str, int]:
    """``"onnxruntime@2"`` -> ("onnxruntime", 2); a plain name runs on 1 thread."""
    base, _, n = name.partition("@")
    return base, int(n) if n else 1


def with_threads(peers: list[str], counts: list[int]) -> list[str]:
    """The peers at one thread, then the threaded ones (:data:`THREADED`) at each other count."""
    return list(peers) + [f"{p}@{t}" for t in counts if t > 1 for p in peers if p in THREADED]


def make_peers(names: list[str]) -> dict[str, PeerProcess]:
    """The selected peers' processes (started lazily on their first request)."""
    peers = {}
    for name in names:
        base, threads = split_peer(name)
        if base == "onnxruntime-web":
            peers[name] = PeerProcess(name, [str(node()), str(HERE / "ort_web_runner.mjs"), str(threads)],
                                      ort_web_missing())
        elif base == "symwasm-node":
            peers[name] = PeerProcess(name, [str(node()), str(HERE / "symwasm_node_runner.mjs"), sys.executable,
                                             str(threads)], node_missing())
        else:
            peers[name] = PeerProcess(name, [sys.executable, str(HERE / "py_peer.py"), name])
    return peers


def ort_web_missing() -> str | None:
    """Why the onnxruntime-web peer cannot start, or None if it can."""
    if why := node_missing():
        return why
    if not (HERE / "node_modules" / "onnxruntime-web").is_dir():
        return "onnxruntime-web is not installed: run `npm ci --prefix benchmarks`"
    return None


# ---------------------------------------------------------------- measurement

@dataclass
class Cell:
    """One peer on one model configuration."""

    times_ms: list[list[float]] = field(default_factory=list)  # one list per repetition
    warmup_runs: list[int] = field(default_factory=list)
    error: str | None = None
    detail: str | None = None
    check: str | None = None  # None when outputs match the reference
    load: dict[str, Any] = field(default_factory=dict)


@dataclass
class Options:
    """Timing settings shared by every measurement."""

    repeat: int
    warmup_s: float
    min_time_s: float


def reference(model_path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray] | str:
    """onnxruntime's outputs, or the reason it failed (then nothing can be checked)."""
    try:
        return ort_session(str(model_path)).run(None, feeds)
    except Exception as e:  # noqa: BLE001 - reported as "unchecked" in the table
        return first_line(e)


def compare(ref: list[np.ndarray] | str, outputs: list[dict[str, Any]],
            tol: tuple[float, float] = (RTOL, ATOL)) -> str | None:
    """None if `outputs` match `ref` (allclose with `tol` = (rtol, atol) for floats, exact
    otherwise), else why not."""
    if isinstance(ref, str):
        return f"unchecked: reference failed ({ref})"
    if len(outputs) != len(ref):
        return f"mismatch: {len(outputs)} outputs, expected {len(ref)}"
    for want, desc in zip(ref, outputs):
        got = np.fromfile(desc["file"], dtype=desc["dtype"]).reshape(desc["shape"])
        name = desc["name"]
        if got.dtype != want.dtype or got.shape != want.shape:
            return (f"mismatch: {name} is {got.dtype}{list(got.shape)}, "
                    f"expected {want.dtype}{list(want.shape)}")
        if want.dtype.kind == "f":
            if not np.allclose(got, want, rtol=tol[0], atol=tol[1]):
                diff = np.abs(got.astype(np.float64) - want)
                return f"mismatch: {name} max |diff| {np.nanmax(diff):.3g}"
        elif not np.array_equal(got, want):
            return f"mismatch: {name} differs ({np.count_nonzero(got != want)} elements)"
    return None


def load_all(peers: dict[str, PeerProcess], model_path: Path, artifact_dir: Path
             ) -> tuple[dict[str, dict[str, Any]], dict[str, PeerFailure]]:
    """Loads (compiling where needed) one model in every peer; returns infos and failures."""
    infos, failed = {}, {}
    for name, peer in peers.items():
        progress(f"  load {name}")
        req = {"op": "load", "model": str(model_path), "artifact_dir": str(artifact_dir)}
        base, threads = split_peer(name)
        if threads > 1 and "artifact" in infos.get(base, {}):
            req["artifact"] = infos[base]["artifact"]  # the module its one-thread peer compiled
        try:
            infos[name] = peer.request(req)["info"]
        except PeerFailure as e:
            failed[name] = e
            progress(f"  {name}: error: {e}")
    return infos, failed


def bench_config(peers: dict[str, PeerProcess], failed: dict[str, PeerFailure],
                 specs: list[dict[str, Any]], ref: list[np.ndarray] | str, tmp: Path,
                 opts: Options, label: str, tol: tuple[float, float] = (RTOL, ATOL)) -> dict[str, Cell]:
    """Times every live peer `opts.repeat` times, interleaved in a rotating order."""
    cells = {name: Cell() for name in peers}
    for name, e in failed.items():
        cells[name].error, cells[name].detail = str(e), e.detail
    for rep in range(opts.repeat):
        # Rotating the order keeps any peer from always running right after the same one.
        names = list(peers)[rep % len(peers):] + list(peers)[:rep % len(peers)]
        for name in names:
            cell = cells[name]
            if cell.error:
                continue
            req = {"op": "bench", "inputs": specs, "out_dir": str(tmp), "min_runs": MIN_RUNS,
                   "min_time_s": opts.min_time_s,
                   "warmup_s": opts.warmup_s if rep == 0 else min(REWARM_S, opts.warmup_s)}
            try:
                reply = peers[name].request(req)
            except PeerFailure as e:
                cell.error, cell.detail = str(e), e.detail
                if isinstance(e, PeerDied):
                    failed[name] = e  # its model is gone for the remaining configs too
                progress(f"{label} {name}: error: {e}")
                continue
            cell.times_ms.append(reply["times_ms"])
            cell.warmup_runs.append(reply["warmup_runs"])
            cell.check = cell.check or compare(ref, reply["outputs"], tol)
            progress(f"{label} {name} rep {rep + 1}/{opts.repeat}: "
                     f"{np.median(reply['times_ms']):.4g} ms ({len(reply['times_ms'])} runs)"
                     + (f" {cell.check}" if cell.check else ""))
    return cells


def bench_model(model: str, entry: dict[str, Any], models_dir: Path, artifact_dir: Path,
                peers: dict[str, PeerProcess], opts: Options) -> list[dict[str, Any]]:
    """All configurations of one model; one result record per configuration."""
    model_path = models_dir / entry["file"]
    infos, failed = load_all(peers, model_path, artifact_dir)
    records = []
    for cfg in entry["configs"]:
        label = f"[{model}/{cfg['name']}]"
        with tempfile.TemporaryDirectory(prefix="symwasm-bench-") as tmp:
            feeds = make_inputs(model_path, model, cfg)
            specs = write_inputs(feeds, Path(tmp))
            if "feeds" in cfg:  # a zoo model: its stored reference, at its manifest's tolerance
                ref, tol = stored_reference(model_path, cfg), tuple(cfg["tol"])
            else:
                ref, tol = reference(model_path, feeds), (RTOL, ATOL)
            cells = bench_config(peers, failed, specs, ref, Path(tmp), opts, label, tol)
        for name, cell in cells.items():
            cell.load = infos.get(name, {})
        records.append({"model": model, "config": cfg["name"], "inputs": cfg["inputs"],
                        "symbols": cfg.get("symbols", {}), "flops": cfg.get("flops"),
                        "peers": cells})
    return records


# ---------------------------------------------------------------- statistics and report

def summarize(cell: Cell) -> dict[str, float] | None:
    """Median of the per-repetition medians and its spread.

    The spread is the min-max of those medians, which shows slowdowns that hit a whole
    repetition; with a single repetition it is the interquartile range of its runs instead.
    """
    if not cell.times_ms:
        return None
    medians = [float(np.median(t)) for t in cell.times_ms]
    if len(medians) > 1:
        lo, hi = min(medians), max(medians)
    else:
        lo, hi = (float(q) for q in np.percentile(cell.times_ms[0], [25, 75]))
    return {"median_ms": float(np.median(medians)), "lo_ms": lo, "hi_ms": hi}


def fmt(x: float) -> str:
    """Three significant digits, whole numbers from 1000 up."""
    return f"{x:.0f}" if x >= 1000 else f"{x:.3g}"


def latency_cell(cell: Cell) -> str:
    """`median (lo–hi)`, or the error, with a mark when outputs did not match."""
    if cell.error:
        text = f"error: {cell.error}"
        if len(text) > ERROR_WIDTH:
            text = text[:ERROR_WIDTH - 1] + "…"
        return text.replace("|", "\\|")
    s = summarize(cell)
    if s is None:
        return "–"
    mark = "" if cell.check is None else " ✗" if cell.check.startswith("mismatch") else " ?"
    return f"{fmt(s['median_ms'])} ({fmt(s['lo_ms'])}–{fmt(s['hi_ms'])}){mark}"


def ratio_cell(cells: dict[str, Cell], num: str, den: str, key: str = "median_ms") -> str:
    """Ratio of the medians (``key="lo_ms"``: of each side's fastest repetition, the least
    disturbed, since on a shared machine a slowdown can cover a peer's whole repetition), `–`
    when either side has no timing."""
    a, b = summarize(cells[num]), summarize(cells[den])
    return f"{a[key] / b[key]:.2f}" if a and b else "–"


def ratio_pairs(peers: list[str]) -> list[tuple[str, str, str]]:
    """(column header, numerator, denominator) of the RATIOS both of whose peers ran, at one
    thread and at each other count, then each threaded peer's speed-up from 1 to N threads."""
    counts = sorted({split_peer(p)[1] for p in peers})
    pairs = [(f"{n}@{t}" if t > 1 else n, f"{d}@{t}" if t > 1 else d) for t in counts for n, d in RATIOS]
    out = [(f"{n.removeprefix('symwasm-')} / {d}", n, d) for n, d in pairs if n in peers and d in peers]
    out += [(f"{p.removeprefix('symwasm-')} speed-up", split_peer(p)[0], p) for p in peers
            if split_peer(p)[1] > 1 and split_peer(p)[0] in peers]
    return out


def fastest_table(records: list[dict[str, Any]], peers: list[str]) -> list[str]:
    """The ratios again, of each peer's fastest repetition."""
    pairs = ratio_pairs(peers)
    lines = ["| model | config | " + " | ".join(h for h, _, _ in pairs) + " |",
             "| --- | --- |" + " ---: |" * len(pairs)]
    for r in records:
        lines.append("| " + " | ".join([r["model"], r["config"]] + [ratio_cell(r["peers"], n, d, "lo_ms")
                                                                    for _, n, d in pairs]) + " |")
    return lines


def compile_cell(cell: Cell) -> str:
    """Compile seconds from the symwasm load info."""
    seconds = cell.load.get("compile_s")
    return "–" if seconds is None else f"{seconds:.2f}"


def load_cell(cell: Cell, key: str) -> str:
    """A load time in ms from the load info (`load_ms`, or wasm32's `load_cached_ms`)."""
    ms = cell.load.get(key)
    return "–" if ms is None else fmt(ms)


def size_cell(cell: Cell) -> str:
    """KiB of the .wasm without the embedded constant data."""
    size, weights = cell.load.get("module_bytes"), cell.load.get("weights_bytes")
    if size is None or weights is None:
        return "–"
    return f"{(size - weights) / 1024:.1f}"


def table(records: list[dict[str, Any]], peers: list[str]) -> list[str]:
    """The markdown results table, one row per model configuration."""
    cols: list[tuple[str, Any]] = [(f"{p} ms", lambda c, p=p: latency_cell(c[p])) for p in peers]
    cols += [(h, lambda c, n=n, d=d: ratio_cell(c, n, d)) for h, n, d in ratio_pairs(peers)]
    # the GEMM-bound rows' rate, from the manifest's FLOP count
    cols += [(f"{p.removeprefix('symwasm-')} GFLOP/s", lambda c, p=p: ("gflops", p)) for p in
             ("symwasm-node", "symwasm-native") if p in peers]
    cols += [(f"compile {p.removeprefix('symwasm-')} s", lambda c, p=p: compile_cell(c[p]))
             for p in ("symwasm-wasm32", "symwasm-native") if p in peers]
    if "symwasm-wasm32" in peers:
        cols += [("load wasm32 ms", lambda c: load_cell(c["symwasm-wasm32"], "load_ms")),
                 ("cached load wasm32 ms", lambda c: load_cell(c["symwasm-wasm32"], "load_cached_ms"))]
    cols += [(f"load {p.removeprefix('symwasm-')} ms", lambda c, p=p: load_cell(c[p], "load_ms"))
             for p in ("symwasm-native", "onnxruntime") if p in peers]
    if "symwasm-wasm32" in peers:
        cols.append((".wasm KiB − weights", lambda c: size_cell(c["symwasm-wasm32"])))
    lines = ["| model | config | " + " | ".join(h for h, _ in cols) + " |",
             "| --- | --- |" + " ---: |" * len(cols)]
    def cell(r: dict[str, Any], f) -> str:
        out = f(r["peers"])
        if isinstance(out, tuple):  # ("gflops", peer)
            s = summarize(r["peers"][out[1]])
            flops = r.get("flops")
            return f"{flops / s['median_ms'] / 1e6:.1f}" if s and flops else "–"
        return out

    for r in records:
        row = [r["model"], r["config"]] + [cell(r, f) for _, f in cols]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def notes(records: list[dict[str, Any]]) -> list[str]:
    """One line per output check that did not pass."""
    return [f"- {r['model']}/{r['config']} {name}: {cell.check}"
            for r in records for name, cell in r["peers"].items() if cell.check]


def variants(records: list[dict[str, Any]]) -> str:
    """Which variant of the wasm32 module each wasm peer ran (the .wasm is compiled with
    --relaxed-simd, and each host picks the best its engine validates)."""
    ran = {name: sorted({v for r in records if (cell := r["peers"].get(name)) and (v := cell.load.get("variant"))})
           for name in ("symwasm-wasm32", "symwasm-node")}
    return "; ".join(f"{name} ran the {' and '.join(v)} variant" for name, v in ran.items() if v)


def version(dist: str) -> str:
    """Installed version of a Python distribution."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine_info(records: list[dict[str, Any]]) -> dict[str, Any]:
    """CPU, OS and peer versions, plus what the onnxruntime-web runner reported about itself."""
    cpuinfo = Path("/proc/cpuinfo")
    cpu = next((line.split(":", 1)[1].strip()
                for line in (cpuinfo.read_text().splitlines() if cpuinfo.exists() else [])
                if line.startswith("model name")), platform.processor() or "unknown")
    web_pkg = HERE / "node_modules" / "onnxruntime-web" / "package.json"
    return {
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "numpy": version("numpy"),
        "onnx": version("onnx"),
        "onnxruntime": version("onnxruntime"),
        "wasmtime": version("wasmtime"),
        "onnxruntime-web": json.loads(web_pkg.read_text())["version"] if web_pkg.exists()
        else "not installed",
        "node": node_version(),
        "onnxruntime-web_runtime": web_runtime(records),
    }


def web_runtime(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What ort_web_runner.mjs reported on its first successful load, if any."""
    for r in records:
        cell = r["peers"].get("onnxruntime-web")
        if cell is not None and cell.load:
            return cell.load
    return None


def thread_counts(peers: list[str]) -> str:
    """What the peers' names say of their threads, for the report."""
    counts = sorted({split_peer(p)[1] for p in peers})
    if counts == [1]:
        return "one thread everywhere"
    more = ", ".join(str(t) for t in counts if t > 1)
    return f"every peer at one thread, and as PEER@N at {more} threads (ratios pair equal counts)"


def report(records: list[dict[str, Any]], peers: list[str], machine: dict[str, Any],
           opts: Options) -> str:
    """The full markdown report."""
    web = machine["onnxruntime-web_runtime"]
    web_note = ("" if not web else f" (backend {web['backend']}, numThreads {web['numThreads']}, "
                f"simd {json.dumps(web['simd'])}, OS threads added {web['os_threads_added']})")
    rewarm = (f", {min(REWARM_S, opts.warmup_s):g} s before later ones" if opts.repeat > 1
              else "")
    lines = [
        "# symwasm peer benchmark",
        "",
        f"- CPU: {machine['cpu']}, {machine['logical_cpus']} logical CPUs; {machine['os']}",
        f"- python {machine['python']}, numpy {machine['numpy']}, onnx {machine['onnx']}, "
        f"onnxruntime {machine['onnxruntime']}, wasmtime {machine['wasmtime']}",
        f"- node {machine['node']}, onnxruntime-web {machine['onnxruntime-web']}{web_note}",
        *([f"- wasm32 modules compiled with --relaxed-simd: {ran}"] if (ran := variants(records)) else []),
        f"- {thread_counts(peers)}; {opts.repeat} repetition(s) per peer, interleaved in "
        f"rotating order; warm-up {opts.warmup_s:g} s before the first repetition{rewarm}; "
        f"each repetition times >= {opts.min_time_s:g} s and >= {MIN_RUNS} runs",
        "",
        *table(records, peers),
        "",
        "Latency in ms: median of the per-repetition medians, in parentheses the min–max of "
        "those medians (the IQR of the runs when there is one repetition). Ratios divide "
        "medians: below 1 means symwasm is faster. Outputs are checked against onnxruntime "
        f"(floats allclose rtol={RTOL:g} atol={ATOL:g}, others exact): ✗ mismatch, ? unchecked. "
        "Load times: `wasm_runtime.load` with an empty compiled-code cache (wasmtime compiles "
        f"the .wasm), then with its code cached (median of {CACHED_LOADS} loads); the native "
        "library's first load (dlopen); onnxruntime's session creation.",
    ]
    if opts.repeat > 1:
        lines += ["", "The same ratios between each peer's fastest repetition (the low end of the ranges "
                      "above), which a slowdown of the machine over a whole repetition does not move:", "",
                  *fastest_table(records, peers)]
    extra = notes(records)
    return "\n".join(lines + (["", "Output checks:", *extra] if extra else [])) + "\n"


def to_json(records: list[dict[str, Any]], machine: dict[str, Any], opts: Options) -> str:
    """All raw timings and summaries, for later analysis."""
    out = []
    for r in records:
        peers = {name: {**asdict(cell), **(summarize(cell) or {})}
                 for name, cell in r["peers"].items()}
        out.append({**r, "peers": peers})
    return json.dumps({"machine": machine, "settings": {**asdict(opts), "min_runs": MIN_RUNS,
                                                       "rewarm_s": REWARM_S},
                       "results": out}, indent=1)


# ---------------------------------------------------------------- CLI

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line; timing defaults depend on --quick."""
    ap = argparse.ArgumentParser(
        description="Benchmark symwasm (wasm32 and native) against onnxruntime and "
                    "onnxruntime-web on the shared model set, at 1 thread and at --threads, peers "
                    "interleaved. Run `npm ci --prefix benchmarks` first for onnxruntime-web.")
    ap.add_argument("--models", help="comma-separated model names (default: all in the manifest)")
    ap.add_argument("--peers", default=",".join(PEERS),
                    help=f"comma-separated peers (default: {','.join(PEERS)})")
    ap.add_argument("--threads", default=f"1,{cores()}",
                    help="thread counts (default: 1 and this machine's cores): the peers run at 1, "
                         f"and {', '.join(THREADED)} also at each other count, as PEER@N")
    ap.add_argument("--repeat", type=int, help="interleaved repetitions per peer (default 5)")
    ap.add_argument("--min-time", type=float, metavar="SECONDS",
                    help="timed seconds per peer and repetition (default 1.0)")
    ap.add_argument("--warmup", type=float, metavar="SECONDS",
                    help="warm-up before a peer's first repetition (default 1.0; V8 needs ~1 s "
                         "to optimize onnxruntime-web's wasm)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: 1 repetition, 0.2 s warm-up, 0.2 s timed (explicit "
                         "--repeat/--warmup/--min-time still win)")
    ap.add_argument("--out-dir", type=Path, default=REPO / "build",
                    help="where bench_results.{md,json} and compiled artifacts go "
                         "(default: <repo>/build)")
    ap.add_argument("--models-dir", type=Path,
                    help="model cache (default: OUT_DIR/bench_models); rebuilt when models.json "
                         "is missing or make_models.py changed")
    ap.add_argument("--zoo", action="store_true",
                    help="benchmark the zoo of exported models in tests/models/zoo (every "
                         "binding the manifest lists) instead of the shared model set; writes "
                         "zoo_results.{md,json}")
    ap.add_argument("--models-script", type=Path, default=MODELS_SCRIPT,
                    help="model generator (default: <repo>/../shared/benchmarks/make_models.py)")
    args = ap.parse_args(argv)
    args.repeat = args.repeat or (1 if args.quick else 5)
    args.min_time = args.min_time if args.min_time is not None else (0.2 if args.quick else 1.0)
    args.warmup = args.warmup if args.warmup is not None else (0.2 if args.quick else 1.0)
    args.models_dir = args.models_dir or args.out_dir / "bench_models"
    args.peers = pick("--peers", args.peers, PEERS)
    try:
        counts = sorted({int(t) for t in args.threads.split(",") if t.strip()} | {1})
    except ValueError:
        sys.exit(f"run.py: --threads: a comma list of thread counts, not {args.threads!r}")
    if counts[0] < 1:
        sys.exit("run.py: --threads: counts are 1 or more")
    args.peers = with_threads(args.peers, counts)
    return args


def pick(flag: str, value: str, allowed: Any, tool: str = "run.py") -> list[str]:
    """Splits a comma list, exiting on unknown names with the list of known ones."""
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        sys.exit(f"{tool}: {flag}: unknown {','.join(unknown) or '(empty)'}; "
                 f"choose from {','.join(allowed)}")
    return names


def main(argv: list[str] | None = None) -> None:
    """Builds the models, measures every selected model and peer, writes the report."""
    args = parse_args(argv)
    manifest, args.models_dir, models = model_set(args.zoo, args.models, "run.py", args.models_dir,
                                                  args.models_script)
    opts = Options(repeat=args.repeat, warmup_s=args.warmup, min_time_s=args.min_time)
    peers = make_peers(args.peers)
    records: list[dict[str, Any]] = []
    try:
        for i, model in enumerate(models, 1):
            progress(f"model {i}/{len(models)}: {model}")
            records += bench_model(model, manifest[model], args.models_dir,
                                   args.out_dir / "bench_artifacts", peers, opts)
    finally:
        for peer in peers.values():
            peer.close()
    machine = machine_info(records)
    text = report(records, args.peers, machine, opts)
    if args.zoo:
        text += ("\nZoo models are checked against their stored reference instead (onnxruntime without "
                 "graph optimizations, tests/models/zoo), at the tolerance their manifest gives: "
                 "onnxruntime's default optimizations fuse a quantized model's QDQ pairs into integer "
                 "kernels that round differently, which shows as ✗ on the onnxruntime column.\n")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    stem = "zoo_results" if args.zoo else "bench_results"
    (args.out_dir / f"{stem}.md").write_text(text)
    (args.out_dir / f"{stem}.json").write_text(to_json(records, machine, opts))
    print(text)
    progress(f"wrote {args.out_dir / (stem + '.md')} and {stem}.json")


if __name__ == "__main__":
    main()
