"""symwasm as users install it: a wheel built from this repository, and fresh virtual
environments with it installed (the runtime alone, or with the compiler extra), for
tests/test_install.py.

Both are kept under build/install/ between runs. The wheel is rebuilt when a file it is built
from changes (its name holds their hash). An environment is made once per set of
dependencies (pyproject.toml and the Python version are in its name): pip installs the wheel
into it with its dependencies, exactly as a user's ``pip install``; a later wheel replaces
the package alone, since the dependencies it declares are the same. A lock serializes the
pytest workers. Run as a script, it prints what each environment's site-packages holds.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "install"
SOURCES = ("pyproject.toml", "README.md", "toolkit", "wasm_runtime")  # what the wheel is built from
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
EXTRAS = {"runtime": "", "compiler": "[compiler]"}


@contextmanager
def _locked():
    BUILD.mkdir(parents=True, exist_ok=True)
    with open(BUILD / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _run(cmd: list, **kw) -> None:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")


def _files(copy: Path) -> list[Path]:
    return sorted(p for p in copy.rglob("*") if p.is_file())


def wheel() -> Path:
    """The wheel of the working tree's sources, built with pip from a copy of them (the
    tree stays clean), once per content."""
    with _locked(), tempfile.TemporaryDirectory(prefix="symwasm-wheel-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        for name in SOURCES:
            if (ROOT / name).is_dir():
                shutil.copytree(ROOT / name, src / name, ignore=IGNORED)
            else:
                shutil.copy2(ROOT / name, src / name)
        h = hashlib.sha256()
        for p in _files(src):
            h.update(str(p.relative_to(src)).encode() + b"\0" + p.read_bytes() + b"\0")
        out = BUILD / f"wheel-{h.hexdigest()[:16]}"
        found = sorted(out.glob("symwasm-*.whl"))
        if found:
            return found[0]
        for old in BUILD.glob("wheel-*"):
            shutil.rmtree(old, ignore_errors=True)
        _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check",
              "-w", out, src])
        return next(out.glob("symwasm-*.whl"))


def venv(kind: str) -> Path:
    """A virtual environment with the wheel installed: ``kind`` "runtime" (no extras) or
    "compiler" (``symwasm[compiler]``). Returns its directory."""
    whl = wheel()
    with _locked():
        deps = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + sys.version.encode()).hexdigest()[:12]
        env = BUILD / f"venv-{kind}-{deps}"
        installed = env / ".symwasm-wheel"
        python = env / "bin" / "python"
        pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        if not installed.exists():
            for old in BUILD.glob(f"venv-{kind}-*"):
                shutil.rmtree(old, ignore_errors=True)
            _run([sys.executable, "-m", "venv", env])
            _run(pip + [f"symwasm{EXTRAS[kind]} @ {whl.as_uri()}"])
        elif installed.read_text() != whl.parent.name:
            _run(pip + ["--no-deps", "--force-reinstall", whl])
        installed.write_text(whl.parent.name)
        return env


def site_packages(env: Path) -> Path:
    return next(env.glob("lib/python*/site-packages"))


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for a command in one of these venvs: nothing pointing into this
    repository or into the test run's own environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(extra)
    return env


def main() -> None:
    """Each environment's site-packages in MiB: all of it, and without the pip and
    setuptools every venv starts with."""
    for kind in EXTRAS:
        site = site_packages(venv(kind))
        sizes = {}
        for p in site.iterdir():
            out = subprocess.run(["du", "-sk", p], capture_output=True, text=True, check=True)
            sizes[p.name] = int(out.stdout.split()[0]) / 1024
        own = sum(v for k, v in sizes.items() if k.split("-")[0] not in VENV_OWN)
        print(f"{kind}: {sum(sizes.values()):.1f} MiB, {own:.1f} MiB without pip and setuptools ({site})")


VENV_OWN = ("pip", "setuptools", "pkg_resources", "_distutils_hack", "distutils-precedence.pth")


if __name__ == "__main__":
    main()
