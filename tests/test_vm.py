"""The VM's instruction set table, its generated headers, and the load-time verifier: each
corruption below breaks exactly one rule, and the module must refuse to run with status 4."""
import json

import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from toolkit import abi, generate
from toolkit.codegen.embed import embed_program
from toolkit.codegen.target import emit_object, get_target
from toolkit.link import link
from toolkit.vm import isa
from util import _TMP, lower_model, make_model, vinfo


def test_generated_files_are_current():
    """sw_abi.h, sw_isa.h, wasm_runtime/_abi.py and js_loader/abi.js match their tables."""
    for path, text in generate.generated_files().items():
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
    link(tgt, [emit_object(module, tgt)], path, blob, weights)
    return wasm_runtime.load(path)


def _before_return(enc, words):
    assert enc.words[-1] == isa.BY_NAME["RETURN"].code
    enc.words[-1:-1] = words


def test_uncorrupted_control_runs(target):
    mod = _module(target, lambda enc: None)
    np.testing.assert_array_equal(mod.run({"x": np.array([-1, 2], np.float32)})["y"], [0, 2])


# Each corrupts the program before it is embedded, so its checksum matches: what a forger
# could do, caught by the structural checks (the checksum is tested on the linked file).
DEFS = "a register is read before it is defined on some path"
WALK = "an instruction, operand, jump target or kernel arity is malformed"
CORRUPTIONS = {
    "opcode": (lambda enc: enc.words.__setitem__(0, 99), WALK),
    "register": (lambda enc: enc.words.__setitem__(2, 1000), WALK),  # INPUT's register
    "slot": (lambda enc: _before_return(enc, isa.encode("DIM", 5000, 0, 0)), WALK),
    # word 1 is INPUT's operand
    "jump-into-operand": (lambda enc: _before_return(enc, isa.encode("JUMP", 1)), WALK),
    "dim-axis": (lambda enc: _before_return(enc, isa.encode("DIM", 0, 0, -100000000)), WALK),
    # the Relu kernel takes 2 tensors
    "kernel-arity": (lambda enc: enc.kernel_info.__setitem__(0, 3), "a kernel's arity or signature"),
    "kernel-outputs": (lambda enc: enc.kernel_info.__setitem__(2, 5), "a kernel's arity or signature"),
    "kernel-signature": (lambda enc: enc.kernel_sigs.__setitem__(1, 99), "a kernel's arity or signature"),
    "no-return": (lambda enc: enc.words.pop(), WALK),
    # DIM reads y (register 1) before its ALLOC
    "read-before-def": (lambda enc: enc.words.__setitem__(slice(3, 3), isa.encode("DIM", 0, 1, 0)),
                        DEFS),
    "read-after-free": (lambda enc: _before_output(enc, isa.encode("FREE", 1)),
                        DEFS),
    # a branch that skips y's ALLOC on one path: y is then read undefined on that path
    "defined-on-one-path": (lambda enc: _skip_alloc(enc), DEFS),
    # z := MOVE y empties y, which OUTPUT then reads
    "read-after-move": (lambda enc: _move_before_output(enc), DEFS),
}


def _move_before_output(enc):
    enc.reg_names.append("z")
    _before_output(enc, isa.encode("MOVE", 2, 1))


def _before_output(enc, words):
    at = _find(enc, "OUTPUT")
    enc.words[at:at] = words


def _find(enc, name):
    return next(pc for pc, op, _ in isa.decode(enc.words) if op.name == name)


def _owned_y(enc):
    """y's buffer from the run-time allocator (an ALLOC) instead of the dynamic arena (its
    ALLOC_AT, of the same length): what the guards of owned buffers are tested on."""
    at = _find(enc, "ALLOC_AT")
    enc.words[at] = isa.BY_NAME["ALLOC"].code
    enc.words[at + 3] = 0  # ALLOC's message (any string)


def _skip_alloc(enc):
    """BRANCH on slot 0 (n) straight to the CALL, past the ALLOC; every jump target is an
    instruction start."""
    _owned_y(enc)
    alloc, call = _find(enc, "ALLOC"), _find(enc, "CALL")
    branch = isa.encode("BRANCH", 0, call + 3)
    enc.words[alloc:alloc] = branch


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_verifier_rejects_corrupt_programs(corruption, target):
    patch, why = CORRUPTIONS[corruption]
    with pytest.raises(wasm_runtime.ModelError, match="the embedded program failed verification: " + why) as e:
        _module(target, patch)
    assert e.value.status == abi.STATUSES[4].code == 4


def _view_of_freed(enc):
    """z := a view of y; FREE y; output z: statically z is defined, but its buffer is gone."""
    _owned_y(enc)
    enc.reg_names.append("z")
    at = _find(enc, "OUTPUT")
    enc.words[at:at] = isa.encode("VIEW", 2, 1, [0]) + isa.encode("FREE", 1)
    at = _find(enc, "OUTPUT")
    enc.words[at + 2] = 2


def _big_slot(enc, value=1000):
    enc.heap_init.append(value)
    return len(enc.heap_init) - 1


def _view_too_big(enc):
    s = _big_slot(enc)
    _before_output(enc, isa.encode("VIEW", 1, 1, [s]))


def _alloc_wrong_size(enc):
    """y allocated with 1000 elements, not n: the Relu kernel was compiled for x and y of one
    length _0."""
    _owned_y(enc)
    at = _find(enc, "ALLOC")
    enc.words[at + 5] = _big_slot(enc)


def _outside_dynamic_arena(enc):
    """y planned in the dynamic arena with 1000 elements, more than the arena sized for n."""
    at = _find(enc, "ALLOC_AT")
    enc.words[at + 5] = _big_slot(enc)


def _append_to_a_view(enc):
    """APPEND x to y, which is not an owned accumulator of rank 2 (y is a planned buffer)."""
    _before_output(enc, isa.encode("APPEND", 1, 0, 0, 0))


def _write_to_input(enc):
    at = _find(enc, "CALL")
    enc.words[at + 5] = 0  # CALL relu [x, x]: the output is the input


# Programs that pass verification but would touch memory they do not own: the VM stops each
# with INVALID_PROGRAM naming the register, and the model runs again afterwards.
RUNTIME_GUARDS = {
    "view-of-freed-buffer": (_view_of_freed, "register 2 is read while empty"),
    "view-larger-than-buffer": (_view_too_big, "register 1 is viewed with more bytes than it holds"),
    "kernel-types": (_alloc_wrong_size, "register 1 does not have the dtype, rank or dims its kernel"),
    "write-to-input": (_write_to_input, "register 0 is written but holds a constant or an input"),
    "outside-dynamic-arena": (_outside_dynamic_arena, "a planned buffer lies outside the dynamic arena"),
    "append-to-non-accumulator": (_append_to_a_view, "APPEND to a register that is not an owned accumulator"),
}


@pytest.mark.parametrize("corruption", sorted(RUNTIME_GUARDS))
def test_run_time_guards(corruption, target):
    patch, why = RUNTIME_GUARDS[corruption]
    mod = _module(target, patch)
    x = np.array([-1, 2, -3], np.float32)
    for _ in range(2):
        with pytest.raises(wasm_runtime.ModelError, match="invalid program: " + why) as e:
            mod.run({"x": x})
        assert e.value.status == 4


def test_checksum_catches_a_corrupt_file(target):
    """One program word changed in the linked file, to another valid operand (INPUT's
    register 0 -> 1): only the checksum can tell."""
    mod = _module(target, lambda enc: None)
    path = mod.path
    _, prog, _ = lower_model(make_model([helper.make_node("Relu", ["x"], ["y"])], [vinfo("x", np.float32, ["n"])],
                                        [vinfo("y", np.float32, None)]), target)
    words = np.asarray(prog.encode().words, "<i4")
    data = path.read_bytes()
    at = data.find(words.tobytes())
    assert at >= 0 and data.count(words.tobytes()) == 1
    bad = words.copy()
    bad[2] = 1
    tampered = path.with_name(path.name + ".tampered")
    tampered.write_bytes(data[:at] + bad.tobytes() + data[at + len(bad.tobytes()):])
    with pytest.raises(wasm_runtime.ModelError, match="failed verification: its checksum does not match") as e:
        wasm_runtime.load(tampered)
    assert e.value.status == 4
