"""The VM's instruction set table, its generated headers, and the load-time verifier: each
corruption below breaks exactly one rule, and the module must refuse to run with status 4."""
import json

import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from toolkit import abi
from toolkit.codegen.embed import embed_program
from toolkit.codegen.target import emit_object, get_target
from toolkit.link import link
from toolkit.vm import isa
from util import _TMP, lower_model, make_model, vinfo


def test_generated_files_are_current():
    """sw_abi.h, sw_isa.h, wasm_runtime/_abi.py and js_loader/abi.js match their tables."""
    for path, text in abi.generated_files().items():
        assert path.read_text() == text, f"{path} is stale: run python -m toolkit.abi"


def test_layouts_follow_c_alignment():
    assert abi.layout("sw_tensor", 4) == {"data": 0, "dtype": 4, "rank": 8, "shape": 16, "size": 80}
    assert abi.layout("sw_tensor", 8) == {"data": 0, "dtype": 8, "rank": 12, "shape": 16, "size": 80}


def test_encode_decode_roundtrip():
    words = (isa.encode("ALLOC", 3, 1, 7, [4, 5]) + isa.encode("CALL", 2, 9, [0, 1, 3], [6])
             + isa.encode("ARITH", "FLOORDIV", 1, 2, 3, 0) + isa.encode("RETURN"))
    decoded = [(op.name, vals) for _, op, vals in isa.decode(words)]
    assert decoded == [("ALLOC", [3, 1, 7, [4, 5]]), ("CALL", [2, 9, [0, 1, 3], [6]]),
                       ("ARITH", [isa.ARITH.index("FLOORDIV"), 1, 2, 3, 0]), ("RETURN", [])]
    assert "FLOORDIV" in isa.disassemble(words)


def test_operand_roles():
    assert isa.roles(isa.BY_NAME["ALLOC"]) == ("def", "", "", "use")
    assert isa.roles(isa.BY_NAME["CALL"]) == ("", "", "use", "usedef")


def _module(target: str, patch) -> wasm_runtime.Model:
    """A Relu model whose encoded program ``patch`` corrupts, linked and loaded."""
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [vinfo("x", np.float32, ["n"])],
                   [vinfo("y", np.float32, None)])
    _, prog, module = lower_model(m, target)
    enc = prog.encode()
    patch(enc)
    meta = {"format": "symwasm", "format_version": list(abi.FORMAT_VERSION), "target": target,
            "inputs": [{"name": "x", "dtype": "float32", "shape": ["n"]}],
            "outputs": [{"name": "y", "dtype": "float32", "shape": ["n"]}]}
    blob = json.dumps(meta).encode()
    weights = embed_program(module, enc, blob)
    tgt = get_target(target)
    path = _TMP / f"corrupt.{target}.{id(patch)}"
    link(tgt, emit_object(module, tgt), path, blob, weights)
    return wasm_runtime.load(path)


def _before_return(enc, words):
    assert enc.words[-1] == isa.BY_NAME["RETURN"].code
    enc.words[-1:-1] = words


def test_uncorrupted_control_runs(target):
    mod = _module(target, lambda enc: None)
    np.testing.assert_array_equal(mod.run({"x": np.array([-1, 2], np.float32)})["y"], [0, 2])


CORRUPTIONS = {
    "opcode": lambda enc: enc.words.__setitem__(0, 99),
    "register": lambda enc: enc.words.__setitem__(2, 1000),  # INPUT's register operand
    "slot": lambda enc: _before_return(enc, isa.encode("DIM", 5000, 0, 0)),
    "jump-into-operand": lambda enc: _before_return(enc, isa.encode("JUMP", 1)),  # word 1: INPUT's operand
    "dim-axis": lambda enc: _before_return(enc, isa.encode("DIM", 0, 0, -100000000)),
    "kernel-arity": lambda enc: enc.kernel_arity.__setitem__(0, 3),  # the Relu kernel takes 2 tensors
    "no-return": lambda enc: enc.words.pop(),
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_verifier_rejects_corrupt_programs(corruption, target):
    with pytest.raises(wasm_runtime.ModelError, match="the embedded program failed verification") as e:
        _module(target, CORRUPTIONS[corruption])
    assert e.value.status == abi.STATUSES[4].code == 4
