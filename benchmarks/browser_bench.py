#!/usr/bin/env python3
"""In-browser benchmark: symwasm and onnxruntime-web on the same models in the same headless
Chromium (samples/web/bench.html), at one thread and at N (--threads; default the page's
navigator.hardwareConcurrency).

Builds run.py's model set (cached) plus the web app's digit model, compiles each with symwasm
(every variant: the loader picks relaxed SIMD in Chromium, the baseline is timed too, and the
threads variants run the N-thread peer), writes every configuration's inputs and
onnxruntime's outputs as raw files with a manifest into OUT_DIR/browser_bench/, then has
browser_bench.mjs serve the repository and drive the page, which loads each model on every
peer (timing the load), checks one run's outputs against onnxruntime's, and times warmed-up
calls in batches, the peers taking turns. Writes OUT_DIR/browser_bench.{md,json}; with
--append FILE, also puts its table into FILE (make bench: build/bench_results.md), in place
of the one a previous run put there.

The threads, all in one page, so that every peer takes turns with every other: the page is
served cross-origin isolated (COOP same-origin, COEP require-corp), which shared memory
needs. The one-thread peers are as they were: symwasm (relaxed and baseline) through
loadModel on the page's thread, and onnxruntime-web with numThreads 1. A page's main thread
may not wait for other threads, so `symwasm@N` runs in createWorker(url, {threads: N})'s
worker and each call is a round trip to it; `symwasm-worker@1`, createWorker at one thread,
pays the same round trip, and symwasm's speed-up is symwasm-worker@1 over symwasm@N.
onnxruntime-web reads numThreads once, when its first session starts its runtime, so
`onnxruntime-web@N` is a second copy of the package imported in a hidden same-origin iframe
(a window of its own has modules of its own) with numThreads N; the iframe runs on the
page's thread, so the page drives it like the others, and its pthreads run in its workers.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from py_peer import first_line
from run import ATOL, REPO, RTOL, build_models, machine_info, make_inputs, pick, progress, reference

sys.path.insert(0, str(REPO))
from toolkit.compiler import compile_model  # noqa: E402

HERE = Path(__file__).resolve().parent
SECTION = "## In the browser"
DIGITS = REPO / "samples" / "web"


def digits_entry() -> dict[str, Any]:
    """The web app's model on a 280 x 280 pad holding its first test image, drawn large."""
    info = json.loads((DIGITS / "digits.json").read_text())
    image = np.array(info["gallery"][0]["pixels"], np.float32).reshape(8, 8) / 16
    pad = np.zeros((280, 280), np.float32)
    pad[60:220, 60:220] = np.kron(image, np.ones((20, 20), np.float32))
    return {"file": str(DIGITS / "digits.onnx"), "configs": [{"name": "pad280", "inputs": {"canvas": [280, 280]},
                                                              "arrays": {"canvas": pad}}]}


def write_tensor(arr: np.ndarray, file: Path) -> dict[str, Any]:
    np.ascontiguousarray(arr).tofile(file)
    return {"dtype": arr.dtype.name, "shape": list(arr.shape), "file": file.name}


def prepare(manifest: dict[str, Any], models_dir: Path, out: Path) -> None:
    """Compiles every model into `out`, links its .onnx there, writes its inputs and reference
    outputs, and the page's manifest.json (file names in `out`). A model symwasm cannot
    compile keeps its entry, with the reason, for the page to report."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    models = []
    for name, entry in manifest.items():
        onnx_path = (models_dir / entry["file"]).resolve()
        (out / f"{name}.onnx").symlink_to(onnx_path)
        progress(f"{name}: compiling")
        entry_out = {"model": name, "onnx": f"{name}.onnx", "wasm": f"{name}.wasm"}
        try:
            compile_model(onnx_path, out / f"{name}.wasm", target="wasm32", relaxed=True, threads=True)
        except Exception as e:  # noqa: BLE001 - the table shows it in symwasm's cells
            entry_out["wasm_error"] = f"compile failed: {first_line(e)}"
            progress(f"{name}: {entry_out['wasm_error']}")
        configs = []
        for cfg in entry["configs"]:
            feeds = cfg.get("arrays") or make_inputs(onnx_path, name, cfg)
            ref = reference(onnx_path, feeds)
            if isinstance(ref, str):
                sys.exit(f"{name}/{cfg['name']}: onnxruntime failed, nothing to check against: {ref}")
            stem = f"{name}.{cfg['name']}"
            configs.append({
                "name": cfg["name"],
                "inputs": [{"name": k, **write_tensor(v, out / f"{stem}.in{i}.bin")} for i, (k, v) in enumerate(feeds.items())],
                "outputs": [{"name": o, **write_tensor(v, out / f"{stem}.out{i}.bin")}
                            for i, (o, v) in enumerate(zip(output_names(onnx_path), ref))],
            })
        models.append({**entry_out, "configs": configs})
    (out / "manifest.json").write_text(json.dumps({"tolerance": [RTOL, ATOL], "models": models}, indent=1))


def output_names(onnx_path: Path) -> list[str]:
    return [o.name for o in onnx.load(str(onnx_path), load_external_data=False).graph.output]


def fmt(x: float) -> str:
    return f"{x:.0f}" if x >= 1000 else f"{x:.3g}"


def latency(cell: dict[str, Any]) -> str:
    if "error" in cell:
        return f"error: {cell['error']}"[:100].replace("|", "\\|")
    if "median_ms" not in cell:
        return "–"
    mark = " ✗" if cell.get("check") else ""
    return f"{fmt(cell['median_ms'])} ({fmt(cell['lo_ms'])}–{fmt(cell['hi_ms'])}){mark}"


def ratios(n: int) -> list[tuple[str, str, str]]:
    """The table's ratio columns, (heading, numerator peer, denominator peer): symwasm over
    onnxruntime-web at one thread and at n, and each one's speed-up from 1 to n threads."""
    if n < 2:
        return [("symwasm / onnxruntime-web", "symwasm", "onnxruntime-web")]
    return [("symwasm / onnxruntime-web", "symwasm", "onnxruntime-web"),
            (f"symwasm@{n} / onnxruntime-web@{n}", f"symwasm@{n}", f"onnxruntime-web@{n}"),
            (f"symwasm speed-up 1→{n}", "symwasm-worker@1", f"symwasm@{n}"),
            (f"onnxruntime-web speed-up 1→{n}", "onnxruntime-web", f"onnxruntime-web@{n}")]


def ratio(a: dict[str, Any], b: dict[str, Any]) -> str:
    return f"{a['median_ms'] / b['median_ms']:.2f}" if "median_ms" in a and "median_ms" in b else "–"


def table(result: dict[str, Any]) -> list[str]:
    peers, columns = result["peers"], ratios(result["threads"])
    head = [f"{p} ms" for p in peers] + [h for h, _, _ in columns] + [f"{p} load ms" for p in peers]
    lines = ["| model | config | " + " | ".join(head) + " |", "| --- | --- |" + " ---: |" * len(head)]
    for r in result["rows"]:
        cells = [r["peers"].get(p, {}) for p in peers]
        shares = [ratio(r["peers"].get(a, {}), r["peers"].get(b, {})) for _, a, b in columns]
        loads = [fmt(c["load_ms"]) if "load_ms" in c else "–" for c in cells]
        lines.append("| " + " | ".join([r["model"], r["config"], *map(latency, cells), *shares, *loads]) + " |")
    return lines


def threads_lines(result: dict[str, Any]) -> list[str]:
    """What ran at N threads: the page's isolation, how onnxruntime-web@N ran, and the variant
    and threads each peer reported (with why, when fewer than asked)."""
    n = result["threads"]
    if n < 2:
        return [f"- one thread only: the page was asked for {n} thread(s) (navigator.hardwareConcurrency "
                f"{result['hardwareConcurrency']}; --threads sets it)"]
    ran: dict[str, set[str]] = {}
    for r in result["rows"]:
        for p, c in r["peers"].items():
            if "threads" in c:
                note = f" ({c['threadsNote']})" if c.get("threadsNote") else ""
                ran.setdefault(p, set()).add(f"{c.get('variant') or 'its runtime'} at {c['threads']}{note}")
    isolated = "cross-origin isolated" if result["crossOriginIsolated"] else "NOT cross-origin isolated"
    return [
        f"- {n} threads (navigator.hardwareConcurrency {result['hardwareConcurrency']}); the page was served with "
        f"COOP/COEP and was {isolated} (crossOriginIsolated {str(result['crossOriginIsolated']).lower()}, in the "
        f"iframe {str(result['frameCrossOriginIsolated']).lower()}). symwasm-worker@1 and symwasm@{n}: "
        f"`createWorker(url, {{threads}})`, each call a round trip to its worker; onnxruntime-web@{n}: a second "
        f"copy of onnxruntime-web in a same-origin iframe, numThreads {result['ortManyNumThreads']} (its first "
        f"session, which started its runtime, took {fmt(result['ortManyFirstSessionMs'])} ms and is not counted). "
        f"Speed-up 1→{n}: a peer's one-thread time over its {n}-thread time (symwasm's: symwasm-worker@1's)",
        "- what ran (variant at threads): " + "; ".join(f"{p}: {', '.join(sorted(ran[p]))}"
                                                        for p in result["peers"] if p in ran),
    ]


def report(result: dict[str, Any]) -> str:
    s, machine = result["settings"], result["machine"]
    variant = next((r["peers"]["symwasm"].get("variant") for r in result["rows"] if "symwasm" in r["peers"]), None)
    peers = ", ".join(result["peers"])
    worker_load = (", `createWorker(url)` (the same, then starting its worker and, at N threads, the pool's workers)"
                   if result["threads"] > 1 else "")
    checks = [f"- {r['model']}/{r['config']} {p}: {c['check']}" for r in result["rows"]
              for p, c in r["peers"].items() if c.get("check")]
    lines = [
        SECTION,
        "",
        f"- CPU: {machine['cpu']}, {machine['logical_cpus']} logical CPUs; {machine['os']}",
        f"- {result['userAgent']} (headless), samples/web/bench.html; onnxruntime-web "
        f"{result['ortVersion'].get('web')} (wasm backend, numThreads {result['ortNumThreads']}); symwasm through "
        f"the JS loader on the page's thread at one thread, the variant it picks ({variant}) and the baseline "
        "(variant 'baseline')",
        *threads_lines(result),
        f"- peers: {peers}; {s['repeat']} repetition(s) per peer, taking turns in rotating order; warm-up "
        f"{s['warmup']:g} s before a peer's first repetition of a model, {s['rewarm']:g} s before later ones; each "
        f"repetition times >= "
        f"{s['time']:g} s in batches of >= {s['batchMs']:g} ms",
        "",
        *table(result),
        "",
        "Latency in ms per call: median of the repetitions' medians, in parentheses their min–max. Load: the "
        f"median of {s['loads']} loads per peer, taking turns: `loadModel(url)` (fetch, compile, instantiate; with "
        "the variant chosen automatically the loader reads the baseline file's metadata before fetching the relaxed "
        f"one){worker_load} and `InferenceSession.create(url)`; "
        f"onnxruntime-web's first session, which also started its runtime, took {fmt(result['ortFirstSessionMs'])} ms "
        "and is not counted. Outputs are checked against onnxruntime (floats allclose rtol="
        f"{RTOL:g} atol={ATOL:g}, others exact): ✗ mismatch.",
    ]
    return "\n".join(lines + (["", "Output checks:", *checks] if checks else [])) + "\n"


def append_to(file: Path, text: str) -> None:
    """Puts `text` at the end of `file`, replacing what a previous run put there."""
    old = file.read_text() if file.exists() else ""
    if SECTION in old:
        old = old[:old.index(SECTION)]
    file.write_text(old.rstrip("\n") + ("\n\n" if old.strip() else "") + text)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", help="comma-separated model names (default: run.py's set and digits)")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions per peer (default 3)")
    ap.add_argument("--min-time", type=float, default=1.0, metavar="SECONDS", help="timed seconds per repetition")
    ap.add_argument("--warmup", type=float, default=1.0, metavar="SECONDS",
                    help="warm-up before a peer's first repetition of a model (default 1; V8 tiers wasm up)")
    ap.add_argument("--threads", type=int, metavar="N",
                    help="threads of the N-thread peers (default: the page's navigator.hardwareConcurrency; 1: none)")
    ap.add_argument("--quick", action="store_true", help="1 repetition, 0.2 s warm-up, 0.2 s timed")
    ap.add_argument("--out-dir", type=Path, default=REPO / "build", help="default: <repo>/build")
    ap.add_argument("--models-script", type=Path, default=REPO.parent / "shared" / "benchmarks" / "make_models.py")
    ap.add_argument("--append", type=Path, metavar="FILE", help="also put the table into FILE (bench_results.md)")
    args = ap.parse_args(argv)
    if args.threads is not None and args.threads < 1:
        ap.error("--threads must be 1 or more")
    if args.quick:
        args.repeat, args.min_time, args.warmup = 1, 0.2, 0.2
    if not (HERE / "node_modules" / "onnxruntime-web").is_dir():
        sys.exit("onnxruntime-web is not installed: run `npm ci --prefix benchmarks`")
    models_dir = args.out_dir / "bench_models"
    manifest = build_models(args.models_script.resolve(), models_dir)
    manifest["digits"] = digits_entry()
    if args.models:
        manifest = {m: manifest[m] for m in pick("--models", args.models, manifest)}
    out = args.out_dir / "browser_bench"
    prepare(manifest, models_dir, out)
    query = f"warmup={args.warmup}&time={args.min_time}&repeat={args.repeat}"
    if args.threads is not None:
        query += f"&threads={args.threads}"
    progress("running samples/web/bench.html in Chromium")
    done = subprocess.run(["node", str(HERE / "browser_bench.mjs"), str(out), query], stdout=subprocess.PIPE, text=True)
    if done.returncode:
        sys.exit(f"browser_bench.mjs failed (exit {done.returncode})")
    result = json.loads(done.stdout)
    if result["threads"] > 1 and not result["crossOriginIsolated"]:
        progress("the page was not cross-origin isolated: its N-thread peers ran at one thread")
    result["machine"] = {k: v for k, v in machine_info([]).items() if k in ("cpu", "logical_cpus", "os")}
    text = report(result)
    (args.out_dir / "browser_bench.md").write_text(text)
    (args.out_dir / "browser_bench.json").write_text(json.dumps(result, indent=1))
    if args.append:
        append_to(args.append, text)
    print(text)
    progress(f"wrote {args.out_dir / 'browser_bench.md'} and browser_bench.json"
             + (f"; its table is in {args.append}" if args.append else ""))


if __name__ == "__main__":
    main()
