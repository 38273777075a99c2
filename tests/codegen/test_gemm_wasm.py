"""The wasm32 GEMM microkernel's k loop as LLVM emits it: each panel row's vectors and a
tile's elements of A are read at constant offsets from one pointer (the loads' offset
immediates, toolkit.codegen.kernel.pinned), not each through an ``i32.add`` of its own that
loop strength reduction would make. Cranelift turns each such add into an ``lea`` (four more
instructions in a loop of about forty). Results are checked in tests/test_gemm_kernel.py."""
import re

import llvmlite.binding as llvm
import numpy as np
import pytest
from onnx import helper
from util import const, lower_model, make_model, vinfo

from toolkit.codegen.target import get_target, optimize, relaxed_simd

F32 = np.float32
N = helper.make_node


def _k_loops(model, relaxed: bool) -> list[list[str]]:
    """The innermost loops of the emitted wasm that hold a GEMM step (8 multiply-adds), as
    lists of instructions (local moves dropped)."""
    _, _, module = lower_model(model, "wasm32")
    for f in module.functions:  # no program calls the kernels here: keep them
        if f.blocks:
            f.linkage = ""
    target = get_target("wasm32")
    mod = optimize(module, target)
    asm = (relaxed_simd(target) if relaxed else target).machine().emit_assembly(llvm.parse_assembly(str(mod)))
    loops = []
    for body in re.findall(r"\n\tloop\s*\n((?:(?!\n\tloop\s).)*?)\n\tend_loop", asm, re.DOTALL):
        lines = [ln.strip() for ln in body.split("\n") if ln.strip() and not ln.strip().startswith(("local.", "#"))]
        madds = sum(ln.startswith(("f32x4.relaxed_madd", "f32x4.mul")) for ln in lines)
        if madds >= 8:
            loops.append(lines)
    return loops


def _matmul(runtime_b: bool):
    rng = np.random.default_rng(1)
    if runtime_b:
        return make_model([N("MatMul", ["a", "b"], ["y"])], [vinfo("a", F32, ["m", 64]), vinfo("b", F32, [64, 48])],
                          [vinfo("y", F32, None)])
    return make_model([N("MatMul", ["a", "w"], ["y"])], [vinfo("a", F32, ["m", 64])], [vinfo("y", F32, None)],
                      [const("w", rng.uniform(-1, 1, (64, 48)).astype(F32))])


@pytest.mark.parametrize("relaxed", [False, True], ids=["baseline", "relaxed"])
@pytest.mark.parametrize("runtime_b", [False, True], ids=["const_b", "runtime_b"])
def test_k_loop_loads_at_constant_offsets(runtime_b, relaxed):
    loops = _k_loops(_matmul(runtime_b), relaxed)
    assert loops, "no GEMM k loop found"
    two_row = [lines for lines in loops if sum(ln.startswith("f32.load") or "load32_splat" in ln for ln in lines) == 2]
    assert two_row, "no 2-row tile's k loop"
    for lines in loops:
        # B's panel row: four vectors at offsets 0, 16, 32 and 48 of one pointer (made by
        # adds, each load's offset would be 0)
        offsets = {int(m) for ln in lines for m in re.findall(r"^v128\.load\s+(\d+)", ln)}
        assert {0, 16, 32, 48} <= offsets, (offsets, lines)
    for lines in two_row:
        # A's two rows: K = 64 floats apart, the second at offset 256 of the first
        a_offsets = sorted(int(m) for ln in lines for m in re.findall(r"(?:f32\.load|load32_splat)\s+(\d+)", ln))
        assert a_offsets == [0, 256], (a_offsets, lines)


@pytest.mark.parametrize("relaxed", [False, True], ids=["baseline", "relaxed"])
def test_lone_row_settles_each_panel(relaxed):
    """A lone row against several panels (M = 1, B packed): each panel's multiply-adds end
    in a join (``end_block``, from kernel.settle) before the next panel's vectors are loaded.
    Cranelift places the multiply-adds where that join needs them; without it, it loads all
    the panels' vectors first and spills an accumulator (mlp at batch 1 under wasmtime took
    1.38x the time)."""
    lone = [lines for lines in _k_loops(_matmul(False), relaxed)
            if sum(ln.startswith("f32.load") or "load32_splat" in ln for ln in lines) == 1]
    assert lone, "no lone row's k loop"
    for lines in lone:
        loads = [i for i, ln in enumerate(lines) if re.match(r"v128\.load\s", ln)]
        madds = [i for i, ln in enumerate(lines) if ln.startswith(("f32x4.relaxed_madd", "f32x4.mul"))]
        joins = [i for i, ln in enumerate(lines) if ln == "end_block"]
        assert len(loads) == len(madds) >= 8 and len(loads) % 4 == 0, lines
        for q in range(len(loads) // 4 - 1):  # panel q's last multiply-add, panel q + 1's first load
            done, next_load = madds[4 * q + 3], loads[4 * (q + 1)]
            assert any(done < j < next_load for j in joins), (q, lines)
