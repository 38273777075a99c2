"""wasm32 module variants: ``compile --relaxed-simd`` writes NAME.relaxed.wasm beside
NAME.wasm, the same program whose multiply-adds are ``f32x4.relaxed_madd``; the Python host
picks the best variant its engine runs (wasmtime has relaxed SIMD) or the one asked for, and
refuses a variant file that is not the model's. The kernels' numerics in the relaxed variant
are tested with the GEMM and convolution tests (their ``wasm32-relaxed`` target)."""
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import wasmtime
from onnx import helper

import wasm_runtime
from toolkit.compiler import compile_model
from toolkit.link import custom_section
from wasm_runtime.metadata import SECTION as METADATA_SECTION
from wasm_runtime.metadata import VARIANT_SECTION, wasm_custom_sections
from util import const, make_model, vinfo

F32 = np.float32


def _dense(seed=0, k=24, n=20):
    rng = np.random.default_rng(seed)
    w, b = rng.uniform(-1, 1, (k, n)).astype(F32), rng.uniform(-1, 1, n).astype(F32)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["u"]),
                        helper.make_node("Relu", ["u"], ["y"])], [vinfo("x", F32, ["m", k])], [vinfo("y", F32, None)],
                       [const("w", w), const("b", b)])
    return model, lambda x: np.maximum(x.astype(np.float64) @ w + b, 0)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("variants")
    model, ref = _dense()
    r = compile_model(model, d / "dense.wasm", "wasm32", relaxed=True)
    return d, r, ref


def _validates(path, relaxed: bool) -> bool:
    cfg = wasmtime.Config()
    cfg.wasm_relaxed_simd = relaxed
    try:
        wasmtime.Module.from_file(wasmtime.Engine(cfg), str(path))
        return True
    except wasmtime.WasmtimeError:
        return False


def test_two_files_one_metadata(pair):
    d, r, _ = pair
    assert r.variants == {"baseline": d / "dense.wasm", "relaxed-simd": d / "dense.relaxed.wasm"}
    base, relaxed = (wasm_runtime.read_metadata(p) for p in r.variants.values())
    assert base == relaxed
    assert base["variants"] == {"baseline": {"file": "dense.wasm", "features": base["features"]},
                                "relaxed-simd": {"file": "dense.relaxed.wasm",
                                                 "features": base["features"] + ["relaxed-simd"]}}
    # only the relaxed file needs relaxed SIMD: an engine without it rejects that one alone
    assert _validates(d / "dense.wasm", relaxed=False)
    assert not _validates(d / "dense.relaxed.wasm", relaxed=False)
    assert _validates(d / "dense.relaxed.wasm", relaxed=True)


@pytest.mark.parametrize("given,want,runs", [
    ("dense.wasm", "auto", "relaxed-simd"), ("dense.wasm", "baseline", "baseline"),
    ("dense.wasm", "relaxed-simd", "relaxed-simd"), ("dense.relaxed.wasm", "baseline", "baseline"),
    ("dense.relaxed.wasm", "auto", "relaxed-simd")])
def test_the_host_picks_a_variant(pair, given, want, runs):
    d, _, ref = pair
    m = wasm_runtime.load(d / given, variant=want)
    assert m.variant == runs and m.path.name == {"baseline": "dense.wasm", "relaxed-simd": "dense.relaxed.wasm"}[runs]
    assert f"(wasm32, {runs})" in repr(m)
    for rows in (1, 7, 30):
        x = np.random.default_rng(rows).uniform(-1, 1, (rows, 24)).astype(F32)
        np.testing.assert_allclose(m.run({"x": x})["y"], ref(x), rtol=1e-5, atol=1e-5)


def test_a_missing_or_foreign_variant_file(pair, tmp_path):
    d, _, _ = pair
    shutil.copy(d / "dense.wasm", tmp_path / "dense.wasm")
    # without its relaxed file: auto runs the baseline, asking for the relaxed one fails
    assert wasm_runtime.load(tmp_path / "dense.wasm").variant == "baseline"
    with pytest.raises(wasm_runtime.ModelError) as e:
        wasm_runtime.load(tmp_path / "dense.wasm", variant="relaxed-simd")
    assert e.value.status == wasm_runtime.STATUS["INVALID_PROGRAM"]
    assert str(e.value) == (f"{tmp_path / 'dense.wasm'}: cannot load the model: cannot run the relaxed-simd variant: "
                            f"its relaxed-simd file {tmp_path / 'dense.relaxed.wasm'} is missing")
    # another model's relaxed file under this model's name: not taken
    other, _ = _dense(seed=1)
    compile_model(other, tmp_path / "other.wasm", "wasm32", relaxed=True)
    shutil.copy(tmp_path / "other.relaxed.wasm", tmp_path / "dense.relaxed.wasm")
    assert wasm_runtime.load(tmp_path / "dense.wasm").variant == "baseline"
    with pytest.raises(wasm_runtime.ModelError, match="is not the relaxed-simd variant of this model "
                                                      r"\(its metadata differs\)"):
        wasm_runtime.load(tmp_path / "dense.wasm", variant="relaxed-simd")
    with pytest.raises(wasm_runtime.ModelError, match=r"unknown variant 'fast' \(choose auto, relaxed-simd\+threads, threads, relaxed-simd, baseline\)"):
        wasm_runtime.load(tmp_path / "dense.wasm", variant="fast")


def test_a_model_without_variants(tmp_path):
    model, _ = _dense()
    compile_model(model, tmp_path / "one.wasm", "wasm32")
    meta = wasm_runtime.read_metadata(tmp_path / "one.wasm")
    assert list(meta["variants"]) == ["baseline"] and not (tmp_path / "one.relaxed.wasm").exists()
    assert wasm_runtime.load(tmp_path / "one.wasm").variant == "baseline"
    with pytest.raises(wasm_runtime.ModelError, match="the model has no relaxed-simd variant"):
        wasm_runtime.load(tmp_path / "one.wasm", variant="relaxed-simd")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "toolkit.cli", *map(str, args)], capture_output=True, text=True)


def test_cli(pair, tmp_path):
    d, _, _ = pair
    src = tmp_path / "dense.onnx"
    src.write_bytes(_dense()[0].SerializeToString())
    r = _cli("compile", src, "--relaxed-simd", "-o", tmp_path / "out.wasm")
    assert r.returncode == 0, r.stderr
    assert f"wrote {tmp_path / 'out.relaxed.wasm'} (the relaxed-simd variant" in r.stdout
    r = _cli("compile", src, "--relaxed-simd", "--target", "native", "-o", tmp_path / "out.so")
    assert r.returncode == 2 and r.stderr.strip() == ("error: --relaxed-simd is a wasm32 variant; the native target "
                                                      "uses the CPU's own FMA (see --cpu)")
    assert not (tmp_path / "out.so").exists()
    r = _cli("inspect", tmp_path / "out.wasm")
    assert r.returncode == 0, r.stderr
    assert "variants: baseline (out.wasm), relaxed-simd (out.relaxed.wasm: + relaxed-simd)" in r.stdout
    meta = json.loads(_cli("inspect", "--json", tmp_path / "out.wasm").stdout)
    assert {k: v["file"] for k, v in meta["variants"].items()} == {"baseline": "out.wasm",
                                                                   "relaxed-simd": "out.relaxed.wasm"}


def test_the_sections_lead_each_file_and_files_with_them_at_the_end_still_load(pair, tmp_path):
    """link.py writes the metadata and variant sections right after the header, so that a host
    reading a file from a stream (the JS loader, given a URL) has them first; an older symwasm
    put them at the end, after the weights. Hosts find them by name wherever they are:
    the same files with the sections moved to the end load, run both variants and inspect the
    same."""
    d, _, ref = pair
    old = tmp_path / "old"
    old.mkdir()
    for name, variant in (("dense.wasm", "baseline"), ("dense.relaxed.wasm", "relaxed-simd")):
        data = (d / name).read_bytes()
        front = (custom_section(METADATA_SECTION, wasm_custom_sections(d / name)[METADATA_SECTION])
                 + custom_section(VARIANT_SECTION, variant.encode()))
        assert data[8:8 + len(front)] == front, name
        (old / name).write_bytes(data[:8] + data[8 + len(front):] + front)
        assert wasm_custom_sections(old / name) == wasm_custom_sections(d / name)
    for variant, file in (("baseline", "dense.wasm"), ("relaxed-simd", "dense.relaxed.wasm")):
        m = wasm_runtime.load(old / "dense.wasm", variant=variant)
        assert m.variant == variant and m.path == old / file
        x = np.random.default_rng(3).uniform(-1, 1, (5, 24)).astype(F32)
        np.testing.assert_allclose(m.run({"x": x})["y"], ref(x), rtol=1e-5, atol=1e-5)
    for how in ([], ["--json"]):
        now, before = (_cli("inspect", *how, where / "dense.wasm") for where in (d, old))
        assert now.returncode == before.returncode == 0, now.stderr + before.stderr
        assert before.stdout.replace(str(old), str(d)) == now.stdout
