"""The VM's instruction set table, its generated header, and the load-time verifier."""
import json

import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from toolkit.codegen.embed import embed_program
from toolkit.codegen.target import emit_object, get_target, new_module
from toolkit.frontend.onnx.importer import import_model
from toolkit.frontend.onnx.registry import registry
from toolkit.link import link
from toolkit.lower import Lowerer
from toolkit.vm import isa
from util import _TMP, make_model, vinfo


def test_header_is_generated_from_the_table():
    assert isa.HEADER_PATH.read_text() == isa.c_header()


def test_encode_decode_roundtrip():
    words = (isa.encode("ALLOC", 3, 1, 7, [4, 5]) + isa.encode("CALL", 2, 9, [0, 1, 3], [6])
             + isa.encode("ARITH", "FLOORDIV", 1, 2, 3, 0) + isa.encode("RETURN"))
    decoded = [(op.name, vals) for _, op, vals in isa.decode(words)]
    assert decoded == [("ALLOC", [3, 1, 7, [4, 5]]), ("CALL", [2, 9, [0, 1, 3], [6]]),
                       ("ARITH", [isa.ARITH.index("FLOORDIV"), 1, 2, 3, 0]), ("RETURN", [])]
    assert "FLOORDIV" in isa.disassemble(words)


def _module_with_words(target: str, patch) -> wasm_runtime.Model:
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [vinfo("x", np.float32, ["n"])],
                   [vinfo("y", np.float32, None)])
    graph = import_model(m)
    tgt = get_target(target)
    module = new_module(tgt, "t")
    reg = registry()
    prog = Lowerer(graph, module).lower(lambda node: reg.lookup(node.op, graph.opset).lower)
    patch(prog)
    meta = {"target": target, "inputs": [{"name": "x", "dtype": "float32", "shape": ["n"]}],
            "outputs": [{"name": "y", "dtype": "float32", "shape": ["n"]}]}
    blob = json.dumps(meta).encode()
    embed_program(module, prog, blob)
    path = _TMP / f"corrupt.{target}.{id(patch)}"
    link(tgt, emit_object(module, tgt), path, blob)
    return wasm_runtime.load(path)


@pytest.mark.parametrize("corruption", ["opcode", "register", "slot", "jump-into-operand", "dim-axis",
                                        "no-return"])
def test_verifier_rejects_corrupt_programs(corruption, target):
    def patch(prog):
        if corruption == "opcode":
            prog.words[0] = 99
        elif corruption == "register":
            prog.words[2] = 1000  # INPUT's register operand
        elif corruption == "slot":
            prog.words.extend(isa.encode("DIM", 5000, 0, 0))
        elif corruption == "jump-into-operand":
            prog.words.extend(isa.encode("JUMP", 1))  # word 1 is INPUT's first operand
        elif corruption == "dim-axis":
            prog.words[:0] = isa.encode("DIM", 0, 0, -100000000)
        else:
            assert prog.words[-1] == isa.BY_NAME["RETURN"].code
            prog.words.pop()
    with pytest.raises(wasm_runtime.ModelError, match="failed verification") as e:
        _module_with_words(target, patch)
    assert e.value.status == 4
