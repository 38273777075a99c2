#!/usr/bin/env python3
"""Two compiler settings compared in one process, on one machine, at one thread.

Each model configuration of the benchmark set (or the zoo) is compiled twice for each target,
under setting A and setting B (environment variables for the compiler's process, such as
``SYMWASM_LLVM_OPTIONS``). Both modules are then loaded into this process and timed in turns,
round after round (the order alternating), so a busy machine slows both alike. What is reported
per configuration and target is the median over rounds of the ratio A/B of the rounds' median
latencies (with its range), each setting's compile time and module size, and the largest
difference between the two modules' outputs.

    .venv/bin/python benchmarks/ab.py --models bert2,cnn \\
        --b SYMWASM_LLVM_OPTIONS="-unswitch-threshold=50 -enable-unswitch-cost-multiplier=true"

A ratio below 1 means A is faster. The table goes to stdout (markdown) and, with ``--json``,
to a file; progress goes to stderr.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO), str(HERE)]

import run as bench  # noqa: E402  (benchmarks/run.py: the model set and its inputs)
import wasm_runtime  # noqa: E402
from py_peer import run_for  # noqa: E402  (how every Python peer is timed)

COMPILE = """
import json, sys
from toolkit.compiler import compile_model
model, out, target = sys.argv[1:4]
r = compile_model(model, out, target=target, relaxed=target == "wasm32")
print(json.dumps({"seconds": r.seconds, "bytes": r.module_bytes}))
"""


def setting(items: list[str]) -> dict[str, str]:
    """``NAME=VALUE`` arguments as an environment overlay."""
    env = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            sys.exit(f"ab.py: a setting is NAME=VALUE, not {item!r}")
        env[name] = value
    return env


def compile_with(env: dict[str, str], model: Path, out: Path, target: str) -> dict[str, Any]:
    """Compiles in a child process, so LLVM's process-wide options are the setting's own."""
    proc = subprocess.run([sys.executable, "-c", COMPILE, str(model), str(out), target],
                          env={**os.environ, **env}, cwd=REPO, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip()
                           else f"compiler exited with {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def median_ms(run: Any, feeds: dict[str, np.ndarray], seconds: float) -> float:
    """The median of at least 3 runs and ``seconds`` of them, in ms."""
    return statistics.median(run_for(run, feeds, seconds, 3)[0])


def largest_difference(a: Any, b: Any) -> float:
    if isinstance(a, dict):
        a, b = list(a.values()), list(b.values())
    worst = 0.0
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape:
            return float("inf")
        if x.size and np.issubdtype(x.dtype, np.number):
            d = np.abs(x.astype(np.float64) - y.astype(np.float64))
            worst = max(worst, float(np.nanmax(d)) if not np.all(np.isnan(d)) else 0.0)
    return worst


def compare(model: str, cfg: dict[str, Any], path: Path, target: str, settings: dict[str, dict],
            work: Path, args: argparse.Namespace) -> dict[str, Any]:
    row: dict[str, Any] = {"model": model, "config": cfg["name"], "target": target}
    runs = {}
    for label, env in settings.items():
        out = work / f"{model}-{target}-{label}{'.wasm' if target == 'wasm32' else '.so'}"
        if not out.exists():
            row[label] = compile_with(env, path, out, target)
        runs[label] = wasm_runtime.load(str(out), cache=str(work / f"cache-{label}"), threads=1).run
    feeds = bench.make_inputs(path, model, cfg)
    outs = {label: run(feeds) for label, run in runs.items()}
    row["max_diff"] = largest_difference(outs["A"], outs["B"])
    for run in runs.values():
        median_ms(run, feeds, args.warmup)
    ratios, medians = [], {"A": [], "B": []}
    for r in range(args.rounds):
        order = ("A", "B") if r % 2 == 0 else ("B", "A")
        got = {label: median_ms(runs[label], feeds, args.min_time) for label in order}
        for label in order:
            medians[label].append(got[label])
        ratios.append(got["A"] / got["B"])
    row["ratio"] = statistics.median(ratios)
    row["ratio_range"] = [min(ratios), max(ratios)]
    row["ms"] = {label: statistics.median(v) for label, v in medians.items()}
    return row


def table(rows: list[dict[str, Any]], settings: dict[str, dict]) -> str:
    lines = [f"A: {settings['A'] or 'defaults'}  B: {settings['B'] or 'defaults'}", "",
             "| model | config | target | A/B run time, median (range) | A ms | B ms "
             "| compile A/B s | module A/B bytes | max output diff |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['config']} | {r['target']} | error: {r['error']} "
                         "| | | | | |")
            continue
        lo, hi = r["ratio_range"]
        a, b = r.get("A", {}), r.get("B", {})
        comp = f"{a.get('seconds', 0):.2f} / {b.get('seconds', 0):.2f}" if a else "(built)"
        size = f"{a.get('bytes', 0)} / {b.get('bytes', 0)}" if a else ""
        lines.append(f"| {r['model']} | {r['config']} | {r['target']} | {r['ratio']:.3f} "
                     f"({lo:.2f}-{hi:.2f}) | {r['ms']['A']:.3f} | {r['ms']['B']:.3f} | {comp} "
                     f"| {size} | {r['max_diff']:.3g} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--a", nargs="*", default=[], metavar="NAME=VALUE",
                    help="environment of setting A's compiler (default: none, the defaults)")
    ap.add_argument("--b", nargs="*", default=[], metavar="NAME=VALUE",
                    help="environment of setting B's compiler")
    ap.add_argument("--models", default="", help="comma-separated models (default: all)")
    ap.add_argument("--targets", default="wasm32,native", help="wasm32, native or both")
    ap.add_argument("--zoo", action="store_true", help="the zoo of exported models instead")
    ap.add_argument("--rounds", type=int, default=9, help="timed rounds per module (9)")
    ap.add_argument("--min-time", type=float, default=0.3,
                    help="seconds per module and round (0.3)")
    ap.add_argument("--warmup", type=float, default=0.5, help="seconds of warm-up per module")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args(argv)
    settings = {"A": setting(args.a), "B": setting(args.b)}
    if settings["A"] == settings["B"]:
        sys.exit("ab.py: settings A and B are the same")
    manifest, models_dir, wanted = bench.model_set(args.zoo, args.models, "ab.py")
    rows = []
    with tempfile.TemporaryDirectory(prefix="symwasm-ab-") as tmp:
        for model in wanted:
            entry = manifest[model]
            for target in args.targets.split(","):
                for cfg in entry["configs"]:
                    bench.progress(f"{model} {cfg['name']} {target}")
                    try:
                        rows.append(compare(model, cfg, models_dir / entry["file"], target,
                                            settings, Path(tmp), args))
                    except Exception as exc:  # one model's failure is its row, not the run's
                        rows.append({"model": model, "config": cfg["name"], "target": target,
                                     "error": str(exc).splitlines()[0] if str(exc) else
                                     type(exc).__name__})
                    r = rows[-1]
                    bench.progress(f"  {r.get('ratio', r.get('error'))}")
    print(table(rows, settings))
    if args.json:
        args.json.write_text(json.dumps({"settings": settings, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
