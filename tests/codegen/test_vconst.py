"""wasm32's vector constants used in loops are loaded once before the loop
(toolkit.codegen.vconst): the rewrite of hand-written IR (where the loads go, which
constants stay), then real kernels, whose loops keep no float constant and whose results
are bitwise those of the module without the rewrite, on wasm32 and its relaxed variant."""
import re

import llvmlite.binding as llvm
import numpy as np
import pytest
from onnx import helper
from util import RELAXED, build, check_model, const, lower_model, make_model, vinfo

from toolkit.codegen import vconst
from toolkit.codegen.target import get_target, optimize

F32 = np.float32
N = helper.make_node

HEAD = 'target datalayout = "e-m:e-p:32:32-p10:8:8-p20:8:8-i64:64-i128:128-n32:64-S128-ni:1:10:20"\n' \
       'target triple = "wasm32-unknown-unknown"\n\n'

# an outer loop over rows whose inner loop scales, offsets, shifts, divides and shuffles a
# vector; the outer loop's own block adds another constant; the entry block one more
NESTED = HEAD + """define void @f(ptr %p, i32 %n, <4 x i32> %v) {
entry:
  %e = fadd <4 x float> zeroinitializer, splat (float 9.0)
  store <4 x float> %e, ptr %p
  br label %outer

outer:
  %i = phi i32 [ 0, %entry ], [ %i1, %outer.latch ]
  br label %inner

inner:
  %j = phi i32 [ 0, %outer ], [ %j1, %inner ]
  %x = load <4 x float>, ptr %p
  %a = fmul <4 x float> %x, splat (float 3.0)
  %b = fadd <4 x float> %a, <float 1.0, float 2.0, float 3.0, float 4.0>
  %c = fmul <4 x float> %b, splat (float 3.0)
  store <4 x float> %c, ptr %p
  %s = shl <4 x i32> %v, splat (i32 23)
  %d = udiv <4 x i32> %s, splat (i32 7)
  %w = shufflevector <4 x i32> %d, <4 x i32> %v, <4 x i32> <i32 0, i32 4, i32 1, i32 5>
  %z = add <4 x i32> %w, zeroinitializer
  %q = getelementptr i8, ptr %p, i32 16
  store <4 x i32> %z, ptr %q
  %j1 = add i32 %j, 1
  %jd = icmp eq i32 %j1, %n
  br i1 %jd, label %outer.latch, label %inner

outer.latch:
  %y = load <4 x float>, ptr %p
  %y2 = fsub <4 x float> %y, splat (float 5.0)
  store <4 x float> %y2, ptr %p
  %i1 = add i32 %i, 1
  %id = icmp eq i32 %i1, %n
  br i1 %id, label %done, label %outer

done:
  ret void
}
"""


def _blocks(text: str) -> dict[str, str]:
    body = text.split("define void @f(")[1].split("\n}\n")[0]
    parts = re.split(r"\n(?=[\w.]+:)", body)
    return {p.split(":")[0].strip() if ":" in p.split("\n")[0] else "head": p for p in parts}


def test_nested_loops_load_before_the_innermost_loop():
    out = vconst.hoist(NESTED)
    llvm.parse_assembly(out).verify()
    blocks = _blocks(out)
    # inner's three float constants (3.0 twice: one load) are loaded in its immediate
    # dominator, the outer loop's header; outer.latch's 5.0 before the outer loop (entry)
    assert blocks["outer"].count("load volatile") == 2, blocks["outer"]
    assert blocks["entry"].count("load volatile") == 1, blocks["entry"]
    assert "splat (float" not in blocks["inner"] and "<float 1.0" not in blocks["inner"]
    assert "splat (float" not in blocks["outer.latch"]
    # the loads precede the terminator of the block they are in
    assert blocks["outer"].rstrip().splitlines()[-1].strip().startswith("br label %inner")
    # constants instruction selection needs stay: shift count, divisor, shuffle mask, zero;
    # and the entry block's own (it runs once)
    for kept in ("shl <4 x i32> %v, splat (i32 23)", "udiv <4 x i32> %s, splat (i32 7)",
                 "<4 x i32> <i32 0, i32 4, i32 1, i32 5>", "%w, zeroinitializer", "splat (float 9.0)"):
        assert kept in out, kept
    # one read-only global per distinct constant
    assert len(re.findall(r"^@__swc\.\d+ = private unnamed_addr constant", out, re.MULTILINE)) == 3


def test_function_without_loops_is_unchanged():
    text = HEAD + """define <4 x float> @g(<4 x float> %x, i1 %c) {
entry:
  br i1 %c, label %a, label %b

a:
  %y = fmul <4 x float> %x, splat (float 2.0)
  ret <4 x float> %y

b:
  ret <4 x float> %x
}
"""
    assert vconst.hoist(text) == text


def _kernel_ir(model, target: str = "wasm32") -> str:
    _, _, module = lower_model(model, target)
    for f in module.functions:  # no program calls the kernels here: keep them
        if f.blocks:
            f.linkage = ""
    return str(optimize(module, get_target("wasm32")))


def _unary(op: str):
    return make_model([N(op, ["x"], ["y"])], [vinfo("x", F32, ["n", 37])], [vinfo("y", F32, None)])


def _gelu_matmul():
    """MatMul, bias and erf's GELU: the epilogue's constants inside the GEMM's loops."""
    rng = np.random.default_rng(3)
    nodes = [N("MatMul", ["x", "w"], ["t"]), N("Add", ["t", "b"], ["u"]), N("Div", ["u", "s2"], ["d"]),
             N("Erf", ["d"], ["e"]), N("Add", ["e", "one"], ["e1"]), N("Mul", ["u", "e1"], ["g"]),
             N("Mul", ["g", "half"], ["y"])]
    return make_model(nodes, [vinfo("x", F32, ["m", 40])], [vinfo("y", F32, None)],
                      [const("w", rng.uniform(-1, 1, (40, 36)).astype(F32)), const("b", rng.uniform(-1, 1, 36).astype(F32)),
                       const("s2", np.array(1.4142135, F32)), const("one", np.array(1.0, F32)),
                       const("half", np.array(0.5, F32))])


MODELS = {"Exp": lambda: _unary("Exp"), "Erf": lambda: _unary("Erf"), "Tanh": lambda: _unary("Tanh"),
          "Softmax": lambda: _unary("Softmax"), "gelu_matmul": _gelu_matmul}


@pytest.mark.parametrize("name", ["Exp", "Erf", "Tanh"])
def test_kernel_loops_keep_no_float_constant(name):
    """After the rewrite the vectorized loop of exp, erf and tanh reads its constants from
    locals: no float vector constant is left in any block of a loop."""
    text = _kernel_ir(MODELS[name]())
    kernel = next(f for f in re.findall(r"define [^\n]*@k\d+_\w+\(.*?\n}\n", text, re.DOTALL))
    loads = kernel.count("load volatile")
    assert loads >= 10, loads  # exp alone has 15
    blocks = vconst._blocks(kernel.strip().split("\n"))
    in_loops = vconst._innermost_loops(blocks, vconst._dominators(blocks))
    for blk in blocks:
        if blk.name in in_loops:
            text = "\n".join(blk.lines)
            assert "splat (float" not in text and "<float " not in text, (blk.name, text)


@pytest.mark.parametrize("target", ["wasm32", RELAXED])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_results_bitwise_unchanged(name, target, monkeypatch):
    """The rewrite moves constants, not arithmetic: each kernel's outputs are bitwise those
    of the module compiled without it, and match onnx.reference, at two batch sizes."""
    model = MODELS[name]()
    rng = np.random.default_rng(5)
    width = 40 if name == "gelu_matmul" else 37
    feeds = [{"x": rng.uniform(-5, 5, (m, width)).astype(F32)} for m in (1, 9)]
    hoisted = check_model(model, target, feeds, rtol=1e-5, atol=3e-6)
    monkeypatch.setattr(vconst, "ENABLED", False)
    plain = build(model, target)
    for f in feeds:
        got, want = hoisted.run(f), plain.run(f)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)
