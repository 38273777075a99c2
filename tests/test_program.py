"""The program IR: printing, its verifier, liveness over branches and loops, encoding, and
derived kernel keys. Compile-only: nothing here runs a module."""
import numpy as np
import pytest
from onnx import helper

from toolkit.ir.dtypes import FLOAT32
from toolkit.ir.graph import CompileError
from toolkit.program import liveness
from toolkit.program.ir import Instr, KernelRef, Program, StaticBuffer
from toolkit.vm import isa
from util import lower_model, make_model, vinfo


def _ins(op, *args):
    return Instr(isa.BY_NAME[op], list(args))


def test_dump_of_a_small_static_model():
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [vinfo("x", np.float32, [2, 3])],
                   [vinfo("y", np.float32, None)])
    _, prog, _ = lower_model(m)
    assert prog.dump() == "\n".join([
        "entry:",
        "  %0<x> = INPUT 0",
        "  $0<x.shape[0]> = DIM %0<x>, 0",
        "  CHECK_EQ $0<x.shape[0]>, $1<2>",
        "  $2<x.shape[1]> = DIM %0<x>, 1",
        "  CHECK_EQ $2<x.shape[1]>, $3<3>",
        "  %1<y> = ALLOC_STATIC float32, arena[0:+24], [$1<2>, $3<3>]",
        "  CALL k0_relu_float32, [%0<x>, %1<y>], []",
        "  OUTPUT 0, %1<y>",
        "  RETURN",
    ])


def _program_with(instrs_by_block: dict[str, list], slots=0, regs=0):
    """A hand-built program: blocks in order, each from a function of (prog, blocks)."""
    prog = Program()
    for i in range(slots):
        prog.new_slot(f"s{i}")
    for i in range(regs):
        prog.new_reg(f"r{i}", FLOAT32, (4,))
    prog.kernels.append(KernelRef(0, "k0", 1, 0))
    blocks = {label: prog.new_block(label) for label in instrs_by_block}
    for label, make in instrs_by_block.items():
        blocks[label].instrs = make(prog, blocks)
    return prog


def test_verifier_rejects_a_slot_read_before_it_is_defined():
    prog = _program_with({"entry": lambda p, b: [_ins("ALLOC", p.regs[0], FLOAT32, "m", [p.slots[0]]),
                                                  _ins("RETURN")]}, slots=1, regs=1)
    with pytest.raises(CompileError, match=r"\$0<s0> is read before it is defined"):
        prog.verify()


def test_verifier_rejects_a_write_to_a_constant_slot():
    """A constant slot is shared by every use of its value; a builtin that writes one (as
    RESHAPE's in-place resolution once did, turning the constant 0 into the batch) is a bug."""
    def entry(p, b):
        zero = p.new_slot("0", init=0, const=True)
        return [_ins("INPUT", 0, p.regs[0]), _ins("DIM", p.slots[0], p.regs[0], 0),
                _ins("RESHAPE", "m", [p.slots[0]], [zero]), _ins("RETURN")]

    prog = _program_with({"entry": entry}, slots=1, regs=1)
    prog.inputs.append((FLOAT32, 1, "x"))
    with pytest.raises(CompileError, match=r"RESHAPE .*\$1<0> holds the constant 0 and is written"):
        prog.verify()


def _diamond(define_in_else: bool):
    """entry: s1 := DIM; branch on it to 'else'; 'then' defines s0; 'else' may; join reads s0."""
    def entry(p, b):
        return [_ins("INPUT", 0, p.regs[1]), _ins("DIM", p.slots[1], p.regs[1], 0), _ins("BRANCH", p.slots[1], b["else"])]

    def then(p, b):
        return [_ins("DIM", p.slots[0], p.regs[1], 0), _ins("JUMP", b["join"])]

    def else_(p, b):
        return [_ins("DIM", p.slots[0], p.regs[1], 0)] if define_in_else else [_ins("CHECK_EQ", p.slots[1], p.slots[1], "m")]

    def join(p, b):
        return [_ins("ALLOC", p.regs[0], FLOAT32, "m", [p.slots[0]]), _ins("RETURN")]

    prog = _program_with({"entry": entry, "then": then, "else": else_, "join": join}, slots=2, regs=2)
    prog.inputs.append((FLOAT32, 1, "x"))
    return prog


def test_verifier_follows_every_path():
    _diamond(define_in_else=True).verify()
    with pytest.raises(CompileError, match=r"join: .*\$0<s0> is read before it is defined"):
        _diamond(define_in_else=False).verify()


def test_frees_on_both_sides_of_a_branch():
    """A buffer read on one side of a branch dies after that read there, and on entry to the
    other side; never twice on one path."""
    def entry(p, b):
        return [_ins("INPUT", 0, p.regs[1]), _ins("DIM", p.slots[0], p.regs[1], 0),
                _ins("ALLOC", p.regs[0], FLOAT32, "m", [p.slots[0]]), _ins("BRANCH", p.slots[0], b["else"])]

    prog = _program_with({
        "entry": entry,
        "then": lambda p, b: [_ins("CALL", p.kernels[0], "m", [p.regs[0]], []), _ins("JUMP", b["join"])],
        "else": lambda p, b: [_ins("CHECK_EQ", p.slots[0], p.slots[0], "m")],
        "join": lambda p, b: [_ins("RETURN")],
    }, slots=1, regs=2)
    prog.inputs.append((FLOAT32, 1, "x"))
    liveness.insert_frees(prog)
    prog.verify()
    text = prog.dump()
    assert "then:\n  CALL k0, [%0<r0>], []\n  FREE %0<r0>\n  JUMP join" in text
    assert "else:\n  FREE %0<r0>\n  CHECK_EQ" in text
    assert text.count("FREE") == 2


def test_no_free_inside_a_loop_for_a_buffer_the_loop_reads():
    """A back-edge keeps a buffer read in the loop body alive through the loop."""
    def entry(p, b):
        return [_ins("INPUT", 0, p.regs[1]), _ins("DIM", p.slots[0], p.regs[1], 0),
                _ins("ALLOC", p.regs[0], FLOAT32, "m", [p.slots[0]])]

    prog = _program_with({
        "entry": entry,
        "head": lambda p, b: [_ins("BRANCH", p.slots[0], b["exit"])],
        "body": lambda p, b: [_ins("CALL", p.kernels[0], "m", [p.regs[0]], []), _ins("JUMP", b["head"])],
        "exit": lambda p, b: [_ins("RETURN")],
    }, slots=1, regs=2)
    prog.inputs.append((FLOAT32, 1, "x"))
    liveness.insert_frees(prog)
    body = prog.blocks[2].instrs
    assert [i.name for i in body] == ["CALL", "JUMP"]
    assert [i.name for i in prog.blocks[3].instrs] == ["FREE", "RETURN"]
    span = liveness.intervals(prog)[prog.regs[0]]
    assert span[0] <= 2 and span[1] >= 6  # from its ALLOC to the loop's jump back


def test_encode_resolves_blocks_to_offsets():
    prog = _diamond(define_in_else=True)
    enc = prog.encode()
    starts = {label: pc for pc, label in enc.blocks.items()}
    decoded = list(isa.decode(enc.words))
    branch = next(vals for _, op, vals in decoded if op.name == "BRANCH")
    jump = next(vals for _, op, vals in decoded if op.name == "JUMP")
    assert branch[1] == starts["else"] and jump[0] == starts["join"]
    assert "else:" in isa.disassemble(enc.words, blocks=enc.blocks)


def test_arena_offsets_are_planned_after_the_program_is_complete():
    # float64: the two ops do not fuse into one (float32 chains do)
    m = make_model([helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Neg", ["t"], ["y"])],
                   [vinfo("x", np.float64, [8])], [vinfo("y", np.float64, None)])
    _, prog, _ = lower_model(m)
    bufs = [ins.args[2] for _, _, ins in prog.instrs() if ins.name == "ALLOC_STATIC"]
    assert all(isinstance(b, StaticBuffer) and b.offset is not None for b in bufs)
    # t and y are alive together (y is written from t): different places
    assert bufs[0].offset != bufs[1].offset and prog.arena_size == 128


# ----------------------------------------------------------------------------- kernel keys


def test_kernel_keys_ignore_symbol_names():
    """Add over (n, 10) and over (m, 10): one kernel."""
    m = make_model([helper.make_node("Add", ["a", "a"], ["y"]), helper.make_node("Add", ["b", "b"], ["z"])],
                   [vinfo("a", np.float32, ["n", 10]), vinfo("b", np.float32, ["m", 10])],
                   [vinfo("y", np.float32, None), vinfo("z", np.float32, None)])
    _, prog, _ = lower_model(m)
    assert len(prog.kernels) == 1


def test_kernel_keys_hold_every_parameter():
    """Two LeakyRelus differing only in alpha: two kernels (a key written by hand could forget alpha)."""
    m = make_model([helper.make_node("LeakyRelu", ["a"], ["y"], alpha=0.1),
                    helper.make_node("LeakyRelu", ["a"], ["z"], alpha=0.2)],
                   [vinfo("a", np.float32, ["n", 10])], [vinfo("y", np.float32, None), vinfo("z", np.float32, None)])
    _, prog, _ = lower_model(m)
    assert len(prog.kernels) == 2


def test_kernel_keys_keep_static_dims_and_equalities():
    """(n, 10) + (n, 10) and (n, 10) + (m, 10) are different patterns (the second may broadcast)."""
    m = make_model([helper.make_node("Add", ["a", "a"], ["y"]), helper.make_node("Add", ["a", "b"], ["z"])],
                   [vinfo("a", np.float32, ["n", 10]), vinfo("b", np.float32, ["m", 10])],
                   [vinfo("y", np.float32, None), vinfo("z", np.float32, None)])
    _, prog, _ = lower_model(m)
    assert len(prog.kernels) == 2
