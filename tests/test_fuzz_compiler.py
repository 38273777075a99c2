"""The compiler answers malformed models with a CompileError naming what is wrong: the
failures fuzzing found, pinned, and a slice of the ONNX mutator campaign (``make fuzz`` runs
the full one)."""
import resource
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from conftest import ROOT
from tests.fuzz.onnx_mutator import compile_to_program, mutants
from toolkit.compiler import compile_model
from toolkit.ir.graph import CompileError
from util import _TMP, assert_outputs_match, build, const, make_model, reference, vinfo

pytestmark = pytest.mark.check  # make check and the full tier: a fuzz campaign's slice

# messages of the catch-all wrappers: a mutant reaching one has found a bug
BUG_MARKERS = ("translation failed", "shape inference failed", "internal")


def test_mutator_slice_gives_only_modules_or_compile_errors():
    compiled = errors = 0
    for i, what, data in mutants(400, seed=11):
        try:
            compile_to_program(data)
            compiled += 1
        except CompileError as e:
            assert not any(k in str(e) for k in BUG_MARKERS), f"mutant {i} ({what}): {e}"
            errors += 1
    # the campaign must reach both outcomes, or it tests nothing
    assert compiled > 50 and errors > 50, (compiled, errors)


def _relu(shape=(2,), name="x"):
    return make_model([helper.make_node("Relu", [name], ["y"], name="r")], [vinfo(name, np.float32, list(shape))],
                      [vinfo("y", np.float32, None)])


def _corrupt_constant():
    t = onnx.TensorProto(name="v", data_type=TensorProto.FLOAT, dims=[3])
    t.float_data.extend([1.0, 2.0])
    return make_model([helper.make_node("Constant", [], ["c"], value=t, name="k")], [vinfo("x", np.float32, [1])],
                      [vinfo("c", np.float32, None)])


def _with(model, edit):
    edit(model)
    return model


CASES = {
    "static buffer beyond the address space": (
        make_model([helper.make_node("Expand", ["x", "s"], ["y"], name="e")], [vinfo("x", np.float32, [1])],
                   [vinfo("y", np.float32, None)], [const("s", np.array([2 ** 31]))]),
        r"node 'e' \(Expand\): 'y' float32\(2147483648,\) needs 8589934592 bytes, more than the 2147483647"),
    "Constant whose dims do not match its data": (
        _corrupt_constant(), r"node 'k' \(Constant\): attribute 'value' cannot be read"),
    "empty input name": (_relu(name=""), r"graph input 0 has an empty name"),
    "missing required attribute": (
        make_model([helper.make_node("Cast", ["x"], ["y"], name="c")], [vinfo("x", np.float32, [2])],
                   [vinfo("y", np.float32, None)]), r"node 'c' \(Cast\): attribute 'to' is required"),
    "missing required input": (
        make_model([helper.make_node("Gemm", ["x"], ["y"], name="g")], [vinfo("x", np.float32, [2, 2])],
                   [vinfo("y", np.float32, None)]), r"node 'g' \(Gemm\): input 1 \(B\) is required"),
    "attribute of the wrong type": (
        make_model([helper.make_node("Transpose", ["x"], ["y"], perm=1, name="t")], [vinfo("x", np.float32, [2, 2])],
                   [vinfo("y", np.float32, None)]), r"node 't' \(Transpose\): attribute 'perm' is INT; Transpose takes INTS"),
    "unknown attribute": (
        make_model([helper.make_node("Relu", ["x"], ["y"], alpha=1.0, name="r")], [vinfo("x", np.float32, [2])],
                   [vinfo("y", np.float32, None)]), r"'alpha' is not an attribute of Relu-14 \(it has: none\)"),
    "an output defined twice": (
        make_model([helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Neg", ["x"], ["y"], name="b")],
                   [vinfo("x", np.float32, [2])], [vinfo("y", np.float32, None)]),
        r"node 'b' \(Neg\): output 'y' is already defined"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_models_are_compile_errors(case, target):
    model, message = CASES[case]
    with pytest.raises(CompileError, match=message):
        compile_model(model, _TMP / f"malformed.{target}")


def test_huge_static_shape_fails_fast_within_bounded_memory(tmp_path):
    """The 89-byte model (Expand to 2**31 elements) drove the compiler to 24 GB: the CLI now
    fails in a process capped at 6 GiB of address space (llvmlite and wasmtime reserve much of
    that), with a message and no traceback."""
    model = CASES["static buffer beyond the address space"][0]
    path = tmp_path / "huge.onnx"
    onnx.save(model, path)

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))

    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "compile", str(path), "-o", str(tmp_path / "h.wasm")],
                       capture_output=True, text=True, cwd=ROOT, preexec_fn=cap, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "needs 8589934592 bytes" in r.stderr


def test_a_symbol_is_kept_alive_by_the_node_that_defines_it(target):
    """Range(0, Shape(NonZero(x))[1], 1): no tensor of NonZero is read, but the length is its
    count; dead-code elimination removed NonZero and the symbol had no value."""
    m = make_model([helper.make_node("Greater", ["x", "zero"], ["mask"]), helper.make_node("NonZero", ["mask"], ["nz"]),
                    helper.make_node("Shape", ["nz"], ["sh"]), helper.make_node("Gather", ["sh", "one"], ["cnt"]),
                    helper.make_node("Range", ["zero_i", "cnt", "one"], ["y"])],
                   [vinfo("x", np.float32, ["n", 3])], [vinfo("y", np.int64, None)],
                   [const("zero", np.float32(0)), const("zero_i", np.int64(0)), const("one", np.int64(1))])
    mod = build(m, target)
    for n in (0, 2, 5):
        feeds = {"x": np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)}
        assert_outputs_match(mod.run(feeds), reference(m, feeds))
