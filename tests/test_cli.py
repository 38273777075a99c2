"""The symwasm command: compile, inspect and run, with clear errors and no tracebacks."""
import contextlib
import io
import os
import subprocess
import sys
from unittest import mock

import numpy as np
import onnx
import pytest
from onnx import helper

from conftest import ROOT
from toolkit import cli
from util import make_model, reference, vinfo


def symwasm(*args, check=True, env=None):
    """The command run in this process (``toolkit.cli.main``, what ``python -m toolkit.cli``
    runs: test_help runs that as a process), its Python output captured (what native code
    writes to the descriptors is not); ``env``: variables set for the call. An exception that
    escapes the command fails the test as a traceback would."""
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, env or {}), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main([str(a) for a in args])
        except SystemExit as e:  # as the interpreter ends: a number is the status (argparse:
            code = e.code  # --help 0, a usage error 2), a message goes to stderr with status 1
            if not (code is None or isinstance(code, int)):
                print(code, file=sys.stderr)
                code = 1
    r = subprocess.CompletedProcess(["symwasm", *map(str, args)], code or 0, out.getvalue(), err.getvalue())
    if check:
        assert r.returncode == 0, r.stderr
    return r


def test_help():
    """The command as a process, as users start it."""
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and "compile" in r.stdout, r.stderr
    out = symwasm("--help").stdout
    for cmd in ("compile", "run", "inspect"):
        assert cmd in out
    assert "--bind" in symwasm("compile", "--help").stdout


@pytest.fixture
def model_file(tmp_path):
    m = make_model([helper.make_node("Mul", ["x", "x"], ["sq"], name="square"),
                    helper.make_node("NonZero", ["x"], ["nz"])],
                   [vinfo("x", np.float32, ["n", 3])], [vinfo("sq", np.float32, None), vinfo("nz", np.int64, None)])
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    return m, path


@pytest.mark.parametrize("suffix", [".wasm", ".so"])
def test_compile_inspect_run(model_file, tmp_path, suffix):
    m, path = model_file
    out = tmp_path / f"m{suffix}"
    target = "wasm32" if suffix == ".wasm" else "native"
    r = symwasm("compile", path, "-o", out, "--target", target)
    assert f"wrote {out}" in r.stdout and "nz: int64(2, nonzero_0)" in r.stdout
    assert "import:" in r.stderr and "link:" in r.stderr  # progress per stage
    info = symwasm("inspect", out).stdout
    assert "x: float32(n, 3)" in info and "nonzero_0: computed at run time" in info
    assert "CALL" in info and "ALLOC" in info
    x = np.array([[0, 1, 2], [3, 0, 5]], np.float32)
    np.save(tmp_path / "x.npy", x)
    r = symwasm("run", out, "--input", f"x={tmp_path / 'x.npy'}", "--save-dir", tmp_path / "res")
    assert "sq: float32[2, 3]" in r.stdout
    want = reference(m, {"x": x})
    for name, w in want.items():
        np.testing.assert_array_equal(np.load(tmp_path / "res" / f"{name}.npy"), w)


def test_bind_specializes(model_file, tmp_path):
    _, path = model_file
    out = tmp_path / "b.wasm"
    symwasm("compile", path, "-o", out, "--bind", "n=2", "-q")
    assert "x: float32(2, 3)" in symwasm("inspect", out, "--no-program").stdout
    r = symwasm("compile", path, "-o", out, "--bind", "batch=2", check=False)
    assert r.returncode == 1 and "--bind names unknown symbols: batch" in r.stderr


def test_run_errors_are_messages(model_file, tmp_path):
    _, path = model_file
    out = tmp_path / "m.wasm"
    symwasm("compile", path, "-o", out, "-q")
    np.save(tmp_path / "bad.npy", np.zeros((2, 4), np.float32))
    r = symwasm("run", out, "--input", f"x={tmp_path / 'bad.npy'}", check=False)
    assert r.returncode == 1 and "error: input 'x' dim 1: expected 3, got 4" in r.stderr
    assert "Traceback" not in r.stderr
    r = symwasm("run", out, "--random", "n=4", "--benchmark", "3")
    assert "median" in r.stdout
    r = symwasm("run", tmp_path / "missing.wasm", check=False)
    assert r.returncode == 1 and "cannot load" in r.stderr


def test_range_flag(model_file, tmp_path):
    _, path = model_file
    out = tmp_path / "r.wasm"
    symwasm("compile", path, "-o", out, "--range", "n=1:64", "-q")
    assert "n: bound from input shapes, range [1, 64]" in symwasm("inspect", out, "--no-program").stdout
    r = symwasm("compile", path, "-o", out, "--range", "n=64", check=False)
    assert r.returncode != 0 and "--range expects NAME=MIN:MAX" in r.stderr


def test_static_flag(model_file, tmp_path):
    """--static fails with the dynamic values and their causes, no traceback; after --bind a
    model whose only dynamic dims are its inputs' compiles, and inspect says it is static."""
    _, path = model_file
    assert "--static" in symwasm("compile", "--help").stdout
    r = symwasm("compile", path, "-o", tmp_path / "m.wasm", "--static", "--bind", "n=2", check=False)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "error: --static: this model is not static" in r.stderr
    assert "value 'nz' dim 1 (nonzero_0) depends on data: NonZero 'NonZero_1' counts its non-zero elements " \
           "at run time" in r.stderr
    m = make_model([helper.make_node("MatMul", ["x", "y"], ["z"], name="mm")],
                   [vinfo("x", np.float32, ["batch", "k"]), vinfo("y", np.float32, ["k", 2])],
                   [vinfo("z", np.float32, None)])
    onnx.save(m, tmp_path / "mm.onnx")
    r = symwasm("compile", tmp_path / "mm.onnx", "-o", tmp_path / "mm.wasm", "--static", "--bind", "k=3", check=False)
    assert r.returncode == 1 and "value 'z' dim 0 (batch) is input 'x' dim 0, the symbol 'batch': bind it with " \
                                 "--bind batch=<value>" in r.stderr
    r = symwasm("compile", tmp_path / "mm.onnx", "-o", tmp_path / "mm.wasm", "--static", "--bind", "k=3,batch=1", "-q")
    assert "static: every shape is known at compile time" in r.stdout
    info = symwasm("inspect", tmp_path / "mm.wasm", "--no-program").stdout
    assert "x: float32(1, 3)" in info and "nothing: every shape is known at compile time" in info


def test_inspect_says_what_stays_dynamic(model_file, tmp_path):
    _, path = model_file
    out = tmp_path / "m.wasm"
    r = symwasm("compile", path, "-o", out, "-q")
    assert "dynamic: 3 dims known only at run time, from symbols n, nonzero_0" in r.stdout
    info = symwasm("inspect", out, "--no-program").stdout
    section = info.split("dynamic (known only at run time, and why):\n")[1].split("\n\n")[0].splitlines()
    assert section == [
        "  symbol n: input 'x' dim 0, the symbol 'n': bind it with --bind n=<value>",
        "  symbol nonzero_0: data: NonZero 'NonZero_1' counts its non-zero elements at run time",
        "  input 'x' dim 0 (n) is the symbol 'n': bind it with --bind n=<value>",
        "  node 'square' (Mul): value 'sq' dim 0 (n) is input 'x' dim 0, the symbol 'n': bind it with --bind n=<value>",
        "  node 'NonZero_1' (NonZero): value 'nz' dim 1 (nonzero_0) depends on data: NonZero 'NonZero_1' counts "
        "its non-zero elements at run time"]


def test_run_threads(model_file, tmp_path):
    """--threads N: natively the calls run on N threads; a .wasm without its threads variant
    runs on one and says why on stderr, and with it (compile --threads) on N; a count below 1
    is a usage error naming the option."""
    m, path = model_file
    x = np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    for suffix, extra, want, note in ((".so", ["--target", "native"], 2, ""),
                                      (".wasm", [], 1, "note: 1 of 2 threads: this .wasm has no threads (compile with "
                                                       "--threads"),
                                      (".threads-source.wasm", ["--threads"], 2, "")):
        out = tmp_path / f"m{suffix}"
        symwasm("compile", path, "-o", out, *extra, "-q")
        r = symwasm("run", out, "--input", f"x={tmp_path / 'x.npy'}", "--threads", "2", "--benchmark", "2")
        assert r.stdout.splitlines()[-3].endswith(f"calls run on {want} thread{'s' if want > 1 else ''}"), r.stdout
        assert (note in r.stderr) if note else "note:" not in r.stderr, r.stderr
    r = symwasm("run", out, "--threads", "0", check=False)
    assert r.returncode == 2 and "argument --threads: expected a positive number of threads, got '0'" in r.stderr, \
        r.stderr


def test_run_benchmark(model_file, tmp_path):
    """--benchmark N: the outputs, then the load (and where the compiled code came from),
    the first run and the steady state over N runs, with a progress bar on stderr; the
    compiled-code cache is used unless --no-cache."""
    m, path = model_file
    env = {"SYMWASM_CACHE": str(tmp_path / "cache")}  # an empty compiled-code cache
    for suffix, target in ((".wasm", "wasm32"), (".so", "native")):
        out = tmp_path / f"m{suffix}"
        symwasm("compile", path, "-o", out, "--target", target, "-q")
        x = np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32)
        np.save(tmp_path / "x.npy", x)
        r = symwasm("run", out, "--input", f"x={tmp_path / 'x.npy'}", "--benchmark", "40", "--save-dir",
                    tmp_path / "res", env=env)
        lines = r.stdout.splitlines()[-3:]
        how = "compiled, and stored in the code cache" if target == "wasm32" else "a native library: nothing to compile"
        # the suite loads models on one thread (tests/conftest.py)
        assert lines[0].startswith("load: ") and lines[0].endswith(f" ms ({how}); calls run on 1 thread"), lines
        assert lines[1].startswith("first run: ") and lines[1].endswith(" ms"), lines
        assert lines[2].startswith("steady state: median ") and " ms over 40 runs (quartiles " in lines[2], lines
        bar = r.stderr.splitlines()  # redrawn in place: splitlines splits at each \r too
        assert bar[1] == f"steady state [{'.' * 30}] 0/40" and bar[-1] == f"steady state [{'#' * 30}] 40/40", bar
        for name, want in reference(m, {"x": x}).items():
            np.testing.assert_array_equal(np.load(tmp_path / "res" / f"{name}.npy"), want)
    r = symwasm("run", tmp_path / "m.wasm", "--random", "n=2", "--benchmark", "2", env=env)
    assert "(compiled code from the cache)" in r.stdout
    r = symwasm("run", tmp_path / "m.wasm", "--random", "n=2", "--benchmark", "2", "--no-cache", env=env)
    assert "(compiled; the code cache is off)" in r.stdout
    r = symwasm("run", tmp_path / "m.wasm", "--random", "n=2", "--benchmark", "0", check=False)
    assert r.returncode == 2 and "expected a positive number of runs, got '0'" in r.stderr


def test_compile_says_what_it_chose(model_file, tmp_path):
    """The report names each file written and its variant, what an engine needs, the native
    CPU and its ISA extensions (as the library records them), and the static arena."""
    from wasm_runtime import read_metadata

    _, path = model_file
    out = tmp_path / "m.wasm"
    r = symwasm("compile", path, "-o", out, "--relaxed-simd", "-q")
    meta = read_metadata(out)
    assert f"wrote {tmp_path / 'm.relaxed.wasm'} (the relaxed-simd variant: " in r.stdout
    assert (f"target: wasm32, engines need {', '.join(meta['features'])}; variants: baseline (m.wasm), "
            f"relaxed-simd (m.relaxed.wasm, + relaxed-simd)\n") in r.stdout
    assert f"memory: static arena {meta['memory']['static_bytes']} bytes" in r.stdout
    r = symwasm("compile", path, "-o", out, "-q")
    assert "variants: baseline (m.wasm); --relaxed-simd adds relaxed-simd\n" in r.stdout
    lib = tmp_path / "m.so"
    r = symwasm("compile", path, "-o", lib, "--target", "native", "--cpu", "x86-64-v3", "-q")
    meta = read_metadata(lib)
    assert "avx2" in meta["features"] and "avx512f" not in meta["features"]
    assert f"target: native, CPU x86-64-v3 (given by --cpu), ISA extensions: {', '.join(meta['features'])}\n" \
           in r.stdout
    r = symwasm("compile", path, "-o", lib, "--target", "native", "-q")
    assert f"target: native, CPU {read_metadata(lib)['cpu']} (this machine's CPU), ISA extensions: " in r.stdout
