"""ONNX conformance: every node test case of the installed onnx package, compiled and run
on each target, each case in a worker process (a crash or a hang costs that case only).

    PYTHONPATH=. .venv/bin/python -m tests.conformance.run [--targets wasm32,native] [--jobs 2]
        [--only REGEX] [--results FILE] [--timeout S]

Prints a per-op table and a closing line ``N passed, M failed`` (skipped cases count as not
passed). A case is skipped only when tests/conformance/exclusions.txt names it, with the
reason on its line. Every case that runs and fails must be explained by a line of
tests/conformance/known_failures.txt (a regex and the reason); the runner lists failures no
line explains, and lines that explain nothing, and exits 1 if there is an unexplained one.
Outcomes: pass; unsupported (the op, version or dtype symwasm refuses at
compile time, by name); compile error (any other CompileError); wrong (outputs differ from
the case's expected outputs); run error (a ModelError on a valid input); crash or hang (the
worker died or timed out); skipped.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import pickle
import re
import sys
import tempfile
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXCLUSIONS = HERE / "exclusions.txt"
KNOWN_FAILURES = HERE / "known_failures.txt"
# relative tolerance of two ULPs for the 16-bit floats' results: onnx's own backend runner
# allows bfloat16 this much (its intermediate roundings depend on the order of operations)
ULP2 = {"bfloat16": 2.0 ** -6, "float16": 2.0 ** -9}
OUTCOMES = ("pass", "unsupported", "compile error", "wrong", "run error", "crash or hang", "skipped")


def exclusions() -> dict[str, str]:
    """case name -> reason, from the exclusion file (``name  # reason``)."""
    out = {}
    if EXCLUSIONS.exists():
        for line in EXCLUSIONS.read_text().splitlines():
            name, _, reason = line.partition("#")
            if name.strip():
                out[name.strip()] = reason.strip() or "(no reason given)"
    return out


def known_failures() -> list[tuple[re.Pattern, str]]:
    """(pattern, reason) per line of the known-failures file (``regex  # reason``); a pattern
    must match a whole case name."""
    out = []
    if KNOWN_FAILURES.exists():
        for line in KNOWN_FAILURES.read_text().splitlines():
            pattern, _, reason = line.partition("#")
            if pattern.strip():
                out.append((re.compile(pattern.strip()), reason.strip() or "(no reason given)"))
    return out


def explain(outcome: dict[tuple[str, str], tuple[str, str]]) -> tuple[list[str], list[str]]:
    """(failures no known-failures line explains, lines that explain no failure). A wrong
    result, crash or run error is never explained by a line: only refusals are."""
    known = known_failures()
    used: set[int] = set()
    unexplained = []
    for (name, t), (o, detail) in sorted(outcome.items()):
        if o in ("pass", "skipped"):
            continue
        hit = next((i for i, (p, _) in enumerate(known) if p.fullmatch(name)), None)
        if hit is None or o not in ("unsupported", "compile error"):
            unexplained.append(f"{name} [{t}]: {o}: {detail[:200]}")
        else:
            used.add(hit)
    stale = [f"{p.pattern}  # {r}" for i, (p, r) in enumerate(known) if i not in used]
    return unexplained, stale


def cases(only: str | None = None):
    """The installed onnx's node test cases (those whose name ``only`` matches)."""
    pattern = re.compile(only) if only else None
    return [c for c in all_cases() if pattern is None or pattern.search(c.name)]


def all_cases() -> list:
    """Every node test case of the installed onnx. ``collect_testcases`` imports every op's
    case module and runs its generators, 8-10 s a process, so the cases are stored once per
    onnx version under build/ and read from there (a pickle this project writes; an
    unreadable one is made again)."""
    import numpy as np
    import onnx
    from onnx.backend.test.case.node import collect_testcases

    store = HERE.parents[1] / "build" / f"onnx-{onnx.__version__}-node-cases.pickle"
    try:
        with open(store, "rb") as f:
            return pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError):
        pass
    with warnings.catch_warnings(), np.errstate(all="ignore"):  # the generators divide by zero on purpose
        warnings.simplefilter("ignore")
        found = collect_testcases(None)
    store.parent.mkdir(parents=True, exist_ok=True)
    part = store.with_name(f"{store.name}.{os.getpid()}")
    with open(part, "wb") as f:
        pickle.dump(found, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(part, store)  # whole or not at all, whoever writes last
    return found


def _op_of(case) -> str:
    return case.model.graph.node[-1].op_type if case.model.graph.node else "?"


def run_case(args) -> tuple[str, str]:
    """(outcome, detail) of one case on one target; runs in a worker. ``args``: (case name,
    target, a scratch directory the backend does not need)."""
    name, target = args[0], args[1]
    import wasm_runtime
    from toolkit import backend
    from toolkit.ir.graph import CompileError

    case = _CASES[name]
    try:
        rep = backend.prepare(case.model, target=target)
    except CompileError as e:
        text = str(e)
        unsupported = ("unsupported op" in text or "is not supported" in text or "not supported" in text
                       or "has dtype" in text)
        return ("unsupported" if unsupported else "compile error"), text[:300]
    except Exception as e:  # noqa: BLE001 - a compiler bug: reported as such
        return "compile error", f"internal: {type(e).__name__}: {e}"[:300]
    try:
        for feeds, expected in data_sets(case, rep.input_names):
            wrong = compare(case, rep.output_names, rep.run(feeds), expected)
            if wrong:
                return "wrong", wrong
        return "pass", ""
    except wasm_runtime.ModelError as e:
        if e.status == wasm_runtime.STATUS["INVALID_INPUT"] and any(t in str(e) for t in _run_time_refusals()):
            return "unsupported", str(e)[:300]  # a format the module recognizes and refuses by name
        return "run error", str(e)[:300]
    except Exception as e:  # noqa: BLE001 - a host bug
        return "run error", f"internal: {type(e).__name__}: {e}"[:300]
    finally:
        rep.close()


def data_sets(case, input_names) -> list[tuple[dict, list]]:
    """(feeds by name, expected outputs in order) of each of ``case``'s data sets; only the
    inputs the compiled model takes (``input_names``) are fed."""
    names = [i.name for i in case.model.graph.input]
    out = []
    for inputs, expected in case.data_sets:
        feeds = {n: _array(a) for n, a in zip(names, inputs) if n in input_names}
        out.append((feeds, [_array(a) for a in expected]))
    return out


def compare(case, output_names, got, expected) -> str:
    """Why the outputs ``got`` (in the order of ``output_names``) are not ``case``'s
    ``expected`` ones, or "" when they match (the case's tolerances, at least rtol 1e-4 and
    atol 1e-6; two ULPs for the 16-bit floats)."""
    import numpy as np

    rtol, atol = max(case.rtol, 1e-4), max(case.atol, 1e-6)
    for n, g, want in zip(output_names, got, expected):
        if g.shape != want.shape or g.dtype != want.dtype:
            return f"'{n}': got {(g.dtype, g.shape)}, want {(want.dtype, want.shape)}"
        tol = rtol
        if want.dtype.name in ULP2:  # two ULPs of a narrow float, as onnx's runner allows bfloat16
            g, want, tol = g.astype(np.float32), want.astype(np.float32), max(rtol, ULP2[want.dtype.name])
        elif want.dtype.kind not in "fc" and _narrow_float(want.dtype.name):  # ml_dtypes' formats
            g, want = g.astype(np.float32), want.astype(np.float32)
        elif want.dtype.kind == "O":  # strings: the data may hold bytes, the host gives str
            want = np.vectorize(lambda s: s.decode() if isinstance(s, bytes) else s, otypes=[object])(want)
        if want.dtype.kind in "fc":
            if not np.allclose(g, want, rtol=tol, atol=atol, equal_nan=True):
                return f"'{n}': max abs diff {float(np.nanmax(np.abs(g - want))):.3g}"
        elif not np.array_equal(g, want):
            return f"'{n}': values differ"
    return ""


def _run_time_refusals() -> list[str]:
    """The reasons a C kernel gives for input it recognizes but does not support (an image
    format it does not decode): a refusal, like an unsupported op, not a failure."""
    from toolkit.abi import LIB_REASONS

    return [text for reasons in LIB_REASONS.values() for name, text in reasons if name.startswith("UNSUPPORTED")]


def _narrow_float(name: str) -> bool:
    """A float format ml_dtypes holds (bfloat16, float8, float4): compared as float32."""
    from toolkit.ir.dtypes import DTYPES

    return name in DTYPES and DTYPES[name].is_narrow_float and name != "float16"


def _array(a):
    """A case's input or output as numpy (some cases store TensorProtos)."""
    import numpy as np
    from onnx import TensorProto, numpy_helper

    return numpy_helper.to_array(a) if isinstance(a, TensorProto) else np.asarray(a)


def write_results(path: Path, targets, seconds: int, totals, cases: dict) -> None:
    """One line per case (``"name [target]": [outcome, detail]``, the detail only when it did
    not pass), so a diff of two runs reads case by case."""
    head = {"targets": targets, "seconds": seconds, "totals": dict(totals)}
    lines = [json.dumps(head)[:-1] + ', "cases": {']
    items = sorted(cases.items())
    for k, (key, (o, d)) in enumerate(items):
        entry = [o] if o == "pass" else [o, d[:200]]
        lines.append(f"  {json.dumps(key)}: {json.dumps(entry)}" + ("," if k < len(items) - 1 else ""))
    path.write_text("\n".join(lines) + "\n}}\n")


_CASES: dict = {}


def _init(only):
    global _CASES
    _CASES = {c.name: c for c in cases(only)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", default="wasm32,native")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", help="a regex: only the cases whose names match")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per case (compile and run)")
    ap.add_argument("--results", type=Path, help="write the outcome of every case here (JSON)")
    ap.add_argument("--update", action="store_true",
                    help="with --only and --results: rerun the matching cases and replace only their outcomes in the "
                         "results file; the table and totals are then of the whole file")
    args = ap.parse_args(argv)
    if args.update and not (args.results and args.results.exists()):
        ap.error("--update needs an existing --results file")
    targets = args.targets.split(",")
    skip = exclusions()
    all_cases = cases(args.only)
    t0 = time.time()
    outcome: dict[tuple[str, str], tuple[str, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        ctx = mp.get_context("spawn")
        pool = ctx.Pool(args.jobs, initializer=_init, initargs=(args.only,), maxtasksperchild=40)
        pending = {}
        for c in all_cases:
            for t in targets:
                if c.name in skip:
                    outcome[(c.name, t)] = ("skipped", skip[c.name])
                else:
                    pending[(c.name, t)] = pool.apply_async(run_case, ((c.name, t, tmp),))
        done = 0
        for key, res in pending.items():
            try:
                outcome[key] = res.get(timeout=args.timeout)
            except mp.TimeoutError:
                outcome[key] = ("crash or hang", f"no answer in {args.timeout:.0f} s (the worker died or hung)")
            done += 1
            if done % 100 == 0:
                print(f"  {done}/{len(pending)} ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
        pool.terminate()
    seconds = round(time.time() - t0)
    if args.update:  # the other cases keep their recorded outcomes
        old = json.loads(args.results.read_text())
        for key, entry in old["cases"].items():
            name, t = key.rsplit(" [", 1)
            outcome.setdefault((name, t.rstrip("]")), (entry[0], entry[1] if len(entry) > 1 else ""))
        all_cases, seconds = cases(None), old.get("seconds", seconds)
        targets = old.get("targets", targets)
    ops: dict[str, Counter] = defaultdict(Counter)
    op_of = {c.name: _op_of(c) for c in all_cases}
    for (name, _t), (o, _) in outcome.items():
        ops[op_of[name]][o] += 1
    total = Counter(o for o, _ in outcome.values())
    width = max((len(op) for op in ops), default=2)
    print(f"| {'op':<{width}} | " + " | ".join(OUTCOMES) + " |")
    print(f"|{'-' * (width + 2)}|" + "|".join("-" * (len(o) + 2) for o in OUTCOMES) + "|")
    for op in sorted(ops):
        print(f"| {op:<{width}} | " + " | ".join(f"{ops[op][o]:>{len(o)}}" for o in OUTCOMES) + " |")
    failed = sum(total.values()) - total["pass"]
    if args.results:
        write_results(args.results, targets, seconds, total,
                      {f"{n} [{t}]": [o, d] for (n, t), (o, d) in outcome.items()})
    unexplained, stale = explain(outcome)
    if stale and not args.only:
        print(f"\nknown_failures.txt lines that explain no failure (remove them): {len(stale)}")
        print("\n".join(f"- {line}" for line in stale))
    if unexplained:
        print(f"\nfailures not explained by known_failures.txt: {len(unexplained)}")
        print("\n".join(f"- {line}" for line in unexplained))
    print(f"\n{total['pass']} passed, {failed} failed ({', '.join(f'{total[o]} {o}' for o in OUTCOMES[1:] if total[o])}) "
          f"of {len(all_cases)} cases x {len(targets)} targets in {seconds} s; "
          f"{failed - total['skipped'] - len(unexplained)} failures explained by known_failures.txt, "
          f"{total['skipped']} skipped by exclusions.txt, {len(unexplained)} unexplained")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
