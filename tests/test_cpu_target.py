"""Native code for a named CPU (--cpu): the x86-64 psABI levels and LLVM CPU names, the CPU
and ISA extensions recorded in the library, and the refusal to load on a CPU that lacks one,
before the library is mapped."""
import platform
import re
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper

import wasm_runtime
from conftest import ROOT
from toolkit.codegen.target import get_target
from toolkit.compiler import compile_model
from util import const, make_model, vinfo
from wasm_runtime import cpu as cpuinfo

pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64") or
                                platform.system() != "Linux", reason="x86-64 Linux CPUs")

V2 = ["sse3", "ssse3", "sse4.1", "sse4.2", "popcnt"]
V3 = V2 + ["avx", "avx2", "fma", "f16c", "bmi", "bmi2", "lzcnt", "movbe"]
V4 = V3 + ["avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"]
LEVELS = {"x86-64": [], "x86-64-v2": V2, "x86-64-v3": V3, "x86-64-v4": V4}


@pytest.mark.parametrize("level", LEVELS)
def test_psabi_levels(level):
    t = get_target("native", level)
    assert t.cpu == level and list(t.isa) == LEVELS[level]
    assert t.f32_lanes == (16 if "avx512f" in LEVELS[level] else 8 if "avx2" in LEVELS[level] else 4)


def test_host_cpu_is_the_default():
    host, named = get_target("native"), get_target("native", "native")
    assert host == named and host.cpu not in ("", "native")
    # every extension recorded for this machine's own code is one it has
    assert cpuinfo.missing_features(list(host.isa)) == []


def test_named_cpu_from_llvm():
    t = get_target("native", "sapphirerapids")
    assert set(V4) < set(t.isa) and "avx512fp16" in t.isa and t.f32_lanes == 16


@pytest.mark.parametrize("bad", ["bogus", "x86_64_v3", "x86-64-v3,+avx512f", ""])
def test_unknown_cpu(bad):
    with pytest.raises(ValueError, match=f"unknown CPU {re.escape(repr(bad))}.*x86-64-v3"):
        get_target("native", bad)


def test_wasm32_takes_no_cpu():
    with pytest.raises(ValueError, match="only the native target takes a CPU"):
        get_target("wasm32", "x86-64-v3")


def _matmuls():
    rng = np.random.default_rng(3)
    b = rng.standard_normal((70, 37)).astype(np.float32)
    const_b = make_model([helper.make_node("MatMul", ["x", "B"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
                         [vinfo("x", np.float32, ["m", 70])], [vinfo("z", np.float32, ["m", 37])], [const("B", b)])
    run_b = make_model([helper.make_node("MatMul", ["x", "b"], ["y"])],
                       [vinfo("x", np.float32, ["m", "k"]), vinfo("b", np.float32, ["k", 19])],
                       [vinfo("y", np.float32, ["m", 19])])
    return [(const_b, lambda m: {"x": rng.standard_normal((m, 70)).astype(np.float32)},
             lambda f: {"z": np.maximum(f["x"] @ b, 0)}),
            (run_b, lambda m: {"x": rng.standard_normal((m, 300)).astype(np.float32),
                               "b": rng.standard_normal((300, 19)).astype(np.float32)},
             lambda f: {"y": f["x"] @ f["b"]})]


@pytest.mark.parametrize("cpu", ["x86-64", "x86-64-v3"])
def test_levels_run(cpu, tmp_path):
    if cpuinfo.missing_features(LEVELS[cpu]):
        pytest.skip(f"this machine is not {cpu}")
    for i, (model, feeds, want) in enumerate(_matmuls()):
        path = tmp_path / f"m{i}.so"
        r = compile_model(model, path, target="native", cpu=cpu)
        assert r.metadata["cpu"] == cpu and r.metadata["features"] == LEVELS[cpu]
        m = wasm_runtime.load(path)
        assert m.metadata["cpu"] == cpu
        for rows in (1, 23):  # fewer rows than a register tile, and several tiles and a rest
            f = feeds(rows)
            for name, w in want(f).items():
                np.testing.assert_allclose(m.run(f)[name], w, rtol=1e-4, atol=1e-4)


def _foreign_cpu():
    """A CPU this machine is not, and the extensions it lacks of it, in CPU_FLAGS' order."""
    for cpu in ("x86-64-v4", "sapphirerapids", "diamondrapids"):
        try:
            missing = cpuinfo.missing_features(list(get_target("native", cpu).isa))
        except ValueError:  # a CPU newer than this LLVM
            continue
        if missing:
            return cpu, missing
    pytest.skip("this machine has every extension of the newest CPUs tried")


def _mapped(path) -> bool:
    with open("/proc/self/maps") as f:
        return str(path) in f.read()


def test_foreign_cpu_refused_before_loading(tmp_path):
    cpu, missing = _foreign_cpu()
    model, feeds, _ = _matmuls()[0]
    path = tmp_path / "foreign.so"
    compile_model(model, path, target="native", cpu=cpu)
    with pytest.raises(wasm_runtime.ModelError) as e:
        wasm_runtime.load(path)
    assert str(e.value) == (f"{path}: cannot load the model: it was compiled for CPU '{cpu}', and this "
                            f"machine's CPU lacks {', '.join(missing)} (recompile it for this machine: "
                            f"--cpu native)")
    assert not _mapped(path)
    # inspect still reads it, and says what is missing
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "inspect", str(path), "--no-program"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert f"CPU {cpu}, requires ISA extensions: " in r.stdout
    assert f"(this machine lacks {', '.join(missing)}: it cannot load the library)" in r.stdout
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "run", str(path), "--random", "m=2"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"it was compiled for CPU '{cpu}', and this machine's CPU lacks {', '.join(missing)}" in r.stderr


def test_missing_extension_named(tmp_path, monkeypatch):
    """A machine without AVX2 and FMA (its flags simulated) refuses x86-64-v3 code, naming
    exactly those, and still loads x86-64 code."""
    flags = cpuinfo.host_flags()
    if flags is None:
        pytest.skip("no /proc/cpuinfo")
    model, feeds, want = _matmuls()[0]
    for cpu in ("x86-64", "x86-64-v3"):
        compile_model(model, tmp_path / f"{cpu}.so", target="native", cpu=cpu)
    monkeypatch.setattr(cpuinfo, "host_flags", lambda: flags - {"avx2", "fma"})
    with pytest.raises(wasm_runtime.ModelError, match=r"compiled for CPU 'x86-64-v3', and this machine's "
                       r"CPU lacks avx2, fma \(recompile"):
        wasm_runtime.load(tmp_path / "x86-64-v3.so")
    f = feeds(5)
    np.testing.assert_allclose(wasm_runtime.load(tmp_path / "x86-64.so").run(f)["z"], want(f)["z"],
                               rtol=1e-4, atol=1e-4)


def test_cpuinfo_names():
    flags = frozenset({"pni", "sse4_1", "sse4_2", "abm", "bmi1", "avx512_vnni"})
    assert cpuinfo.missing_features(["sse3", "sse4.1", "sse4.2", "lzcnt", "bmi", "avx512vnni", "avx2"],
                                    flags) == ["avx2"]
    assert cpuinfo.missing_features(["avx2"], frozenset()) == ["avx2"]
    assert cpuinfo.missing_features(["no-such-extension"], frozenset()) == []


def test_cli_cpu_errors(tmp_path):
    model, _, _ = _matmuls()[0]
    onnx.save(model, tmp_path / "m.onnx")

    def compile_(*args):
        return subprocess.run([sys.executable, "-m", "toolkit.cli", "compile", str(tmp_path / "m.onnx"), "-q",
                               *args], capture_output=True, text=True, cwd=ROOT)

    r = compile_("--target", "native", "--cpu", "pentium9000", "-o", str(tmp_path / "m.so"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith("error: unknown CPU 'pentium9000' for x86_64: give an LLVM CPU name or an "
                               "x86-64 psABI level, e.g. native (this machine), x86-64, x86-64-v2, x86-64-v3")
    assert not (tmp_path / "m.so").exists()
    r = compile_("--cpu", "x86-64-v3", "-o", str(tmp_path / "m.wasm"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr == ("error: CPU 'x86-64-v3': only the native target takes a CPU (a .wasm runs on any CPU; "
                        "its engine chooses the instructions)\n")
    r = compile_("--target", "native", "--cpu", "x86-64-v2", "-o", str(tmp_path / "m.so"))
    assert r.returncode == 0, r.stderr
    info = subprocess.run([sys.executable, "-m", "toolkit.cli", "inspect", str(tmp_path / "m.so"), "--json"],
                          capture_output=True, text=True, cwd=ROOT).stdout
    assert '"cpu": "x86-64-v2"' in info
