"""Runs every model of tests/models/exporters on every target, each in a process of its own (a
crash or a hang is a result too), and rewrites the manifest's ``known_failures`` from what fails,
with the error's first lines as the reason. Run with the project's environment:

    .venv/bin/python tests/models/exporters/survey.py [--only REGEX] [--timeout S]

With --only, the entries of the other models are kept.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MANIFEST = Path(__file__).resolve().parent / "exporters.json"
TARGETS = ("wasm32", "native")

# one model on one target; prints nothing and exits 0 when it passes
PROBE = """
import sys
from tests.test_exporters import check_model
try:
    check_model(sys.argv[1], sys.argv[2])
except Exception as e:
    print(f"{type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(1)
"""


def reason(text: str) -> str:
    """The error's first non-empty lines, with numpy's long array dumps and the list of the ops
    symwasm implements (which changes as ops are added) left out."""
    text = re.sub(r"; symwasm implements these of it: [^\n]*", "", text)
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    keep = [ln for ln in lines if not ln.startswith(("x:", "y:", "[", "array("))][:4]
    return re.sub(r"\s+", " ", " ".join(keep))[:400]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="regex of model names to run")
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()
    manifest = json.loads(MANIFEST.read_text())
    known = manifest["known_failures"]
    for name in manifest["models"]:
        if args.only and not re.search(args.only, name):
            continue
        failed = {}
        for target in TARGETS:
            try:
                r = subprocess.run([sys.executable, "-c", PROBE, name, target], cwd=ROOT, capture_output=True,
                                   text=True, timeout=args.timeout)
                if r.returncode != 0:
                    failed[target] = reason(r.stderr) or f"exit code {r.returncode}"
            except subprocess.TimeoutExpired:
                failed[target] = f"no result in {args.timeout:.0f} s"
            print(f"{name:36s} {target:7s} {'FAIL ' + failed[target] if target in failed else 'ok'}", flush=True)
        if not failed:
            known.pop(name, None)
        elif len(failed) == len(TARGETS) and len(set(failed.values())) == 1:
            known[name] = failed[TARGETS[0]]
        else:
            known[name] = failed
    manifest = json.loads(MANIFEST.read_text())  # as it is now: the generator may have added models
    manifest["known_failures"] = {k: known[k] for k in manifest["models"] if k in known}
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
