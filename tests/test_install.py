"""symwasm installed as users install it (issue 10, item 4): a wheel built from this
repository in fresh virtual environments (tests/install_envs.py). The runtime alone (numpy
and wasmtime) runs a committed .wasm and a native library, and has none of the compiler's
packages; with the compiler extra, ``symwasm compile`` works outside the source tree.
Every output is checked against onnx.reference, computed here."""
import importlib.util
import json
import subprocess

import numpy as np
import onnx
import pytest
from onnx import helper

import install_envs
from conftest import ROOT
from util import assert_outputs_match, make_model, reference, vinfo

from toolkit.compiler import compile_model

pytestmark = pytest.mark.check  # make check and the full tier: builds the wheel and installs it in fresh environments

DATA = ROOT / "tests" / "data"
COMPILER_PACKAGES = ("llvmlite", "onnx", "ziglang", "ml_dtypes")


def _runtime_model():
    spec = importlib.util.spec_from_file_location("runtime_model", DATA / "runtime_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def runtime_env():
    return install_envs.venv("runtime")


@pytest.fixture(scope="module")
def compiler_env():
    return install_envs.venv("compiler")


def _in(env, tmp_path, *args, code: str | None = None):
    """Run ``bin/NAME args`` of the environment (or its python with ``-c code args``), in
    ``tmp_path`` (outside the repository), with its own cache directory."""
    cmd = [env / "bin" / "python", "-c", code, *args] if code is not None else [env / "bin" / args[0], *args[1:]]
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=tmp_path,
                          env=install_envs.clean_env(SYMWASM_CACHE=str(tmp_path / "cache")))


# runs the model at argv[1] on the arrays in inputs.npz, writes outputs.npz, and reports where the
# runtime came from, where the compiled code came from, and which of the compiler's packages
# can be imported
RUN = """
import importlib.util, json, sys
{prelude}
import numpy as np
import wasm_runtime
model = wasm_runtime.load(sys.argv[1])
np.savez("outputs.npz", **model.run(dict(np.load("inputs.npz"))))
print(json.dumps({{"runtime": wasm_runtime.__file__, "code_cache": model.code_cache,
                  "importable": [m for m in {packages!r} if importlib.util.find_spec(m)]}}))
"""


def _run_in(env, tmp_path, model_path, feeds, prelude: str = "") -> tuple[dict, dict]:
    np.savez(tmp_path / "inputs.npz", **feeds)
    r = _in(env, tmp_path, model_path, code=RUN.format(prelude=prelude, packages=COMPILER_PACKAGES))
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    with np.load(tmp_path / "outputs.npz") as out:
        return report, dict(out)


def test_the_runtime_alone_runs_the_committed_wasm(runtime_env, tmp_path):
    """numpy and wasmtime are all it has: llvmlite, onnx, ziglang and ml_dtypes cannot be
    imported, and the committed module runs at two batch sizes, matching onnx.reference."""
    rng = np.random.default_rng(3)
    for n in (1, 5):
        feeds = {"x": rng.standard_normal((n, 6)).astype(np.float32)}
        report, out = _run_in(runtime_env, tmp_path, DATA / "runtime_model.wasm", feeds)
        assert report["importable"] == [], report
        assert report["runtime"].startswith(str(install_envs.site_packages(runtime_env))), report
        assert_outputs_match(out, reference(_runtime_model().model(), feeds))
    assert report["code_cache"] == "hit"  # the second load read the compiled code


def test_the_runtime_alone_runs_a_native_library_without_wasmtime(runtime_env, tmp_path):
    """A native library needs numpy alone: wasmtime is made unimportable, and it runs."""
    model = _runtime_model().model()
    lib = tmp_path / "m.so"
    compile_model(model, lib, target="native")
    feeds = {"x": np.random.default_rng(4).standard_normal((7, 6)).astype(np.float32)}
    report, out = _run_in(runtime_env, tmp_path, lib, feeds, prelude="sys.modules['wasmtime'] = None")
    assert report["code_cache"] is None
    assert_outputs_match(out, reference(model, feeds))


def test_the_runtime_cli_runs_and_inspects_and_says_what_compile_needs(runtime_env, tmp_path):
    wasm = DATA / "runtime_model.wasm"
    r = _in(runtime_env, tmp_path, "symwasm", "inspect", wasm)
    assert r.returncode == 0, r.stderr
    assert "x: float32(n, 6)" in r.stdout and "nz: int64(2, nonzero_0)" in r.stdout
    x = np.random.default_rng(5).standard_normal((3, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = _in(runtime_env, tmp_path, "symwasm", "run", wasm, "--input", f"x={tmp_path / 'x.npy'}",
            "--save-dir", tmp_path / "out", "--benchmark", "5")
    assert r.returncode == 0, r.stderr
    assert "steady state: median" in r.stdout and "load:" in r.stdout
    want = reference(_runtime_model().model(), {"x": x})
    assert_outputs_match({k: np.load(tmp_path / "out" / f"{k}.npy") for k in want}, want)
    onnx.save(_runtime_model().model(), tmp_path / "m.onnx")
    r = _in(runtime_env, tmp_path, "symwasm", "compile", "m.onnx")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "pip install 'symwasm[compiler]'" in r.stderr and "no module named 'llvmlite'" in r.stderr, r.stderr


def test_a_small_dtype_needs_ml_dtypes_and_says_so(runtime_env, tmp_path):
    """A model with a bfloat16 output loads only with ml_dtypes, which the runtime alone
    lacks: the error says what to install; here, with ml_dtypes, it runs."""
    m = make_model([helper.make_node("Cast", ["x"], ["y"], to=onnx.TensorProto.BFLOAT16)],
                   [vinfo("x", np.float32, ["n"])], [helper.make_tensor_value_info("y", onnx.TensorProto.BFLOAT16,
                                                                                   ["n"])])
    wasm = tmp_path / "bf16.wasm"
    compile_model(m, wasm, target="wasm32")
    r = _in(runtime_env, tmp_path, "symwasm", "run", wasm, "--random", "n=3")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip() == ("error: bf16.wasm: output 'y': dtype bfloat16 needs the ml_dtypes package (numpy "
                                "has it only through ml_dtypes): pip install ml_dtypes")


def test_the_compiler_extra_compiles_outside_the_source_tree(compiler_env, tmp_path):
    """``symwasm compile`` of the installed wheel, in a directory outside the repository,
    for both targets; the results run and match onnx.reference."""
    model = _runtime_model().model()
    onnx.save(model, tmp_path / "m.onnx")
    feeds = {"x": np.random.default_rng(6).standard_normal((4, 6)).astype(np.float32)}
    for target, out in (("wasm32", "m.wasm"), ("native", "m.so")):
        r = _in(compiler_env, tmp_path, "symwasm", "compile", "m.onnx", "-o", out, "--target", target)
        assert r.returncode == 0, r.stderr
        assert f"wrote {out}" in r.stdout
        report, got = _run_in(compiler_env, tmp_path, tmp_path / out, feeds)
        assert sorted(report["importable"]) == sorted(COMPILER_PACKAGES), report
        assert report["runtime"].startswith(str(install_envs.site_packages(compiler_env))), report
        assert_outputs_match(got, reference(model, feeds))
