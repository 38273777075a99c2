"""LLVM options reach LLVM: SYMWASM_LLVM_OPTIONS, the knob benchmarks/ab.py compares two
settings with, set after the compiler's own (toolkit.codegen.target.LLVM_OPTIONS, none today).
Without O3's nontrivial loop unswitching a broadcasting Add over symbolic dims is one loop nest
where LLVM's defaults make one per run-time stride condition, a third of the code on wasm32
(D92). Each side compiles in a process of its own, since LLVM's options are process-wide."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

NO_UNSWITCHING = "-unswitch-threshold=1 -enable-unswitch-cost-multiplier=false"

# the kernel's object file, the kernel made external so that LLVM keeps it alone
SIZE = """
import json, sys
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests"]
from onnx import TensorProto, helper
from util import lower_model
from toolkit.codegen.target import emit_object, get_target
g = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"])], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["a", "b", "c"]),
     helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "d"])],
    [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
sizes = {}
for target in ("wasm32", "native"):
    _, _, module = lower_model(model, target)
    sizes[target] = len(emit_object(str(module).replace("define internal", "define"), get_target(target)))
print(json.dumps(sizes))
"""


def _object_bytes(llvm_options: str) -> dict[str, int]:
    """The kernel's object size on each target, with these options after the compiler's."""
    env = {**os.environ, "SYMWASM_LLVM_OPTIONS": llvm_options}
    r = subprocess.run([sys.executable, "-c", SIZE, str(ROOT)], env=env, capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.splitlines()[-1])


@pytest.mark.check  # two processes that import and lower: seconds for a knob of experiments
def test_options_from_the_environment_reach_llvm():
    one, unswitched = _object_bytes(NO_UNSWITCHING), _object_bytes("")
    # wasm32: 1,233 bytes against 3,428 (16 versions of the nest); natively 3,560 against 5,064
    for target in ("wasm32", "native"):
        assert one[target] < 0.8 * unswitched[target], (target, one, unswitched)


# the symbolic broadcast's kernel optimized by LLVM's own O3 (before the compiler sets any
# option), then with the compiler's setting on, off and on again. On must give the very same
# IR: this tells the threshold of LLVM 22's default, 50, from 60 or from the cost multiplier
# off (tried), though not from 40
TOGGLE = SIZE.split("sizes = {}")[0] + """
import llvmlite.binding as llvm
from toolkit.codegen import target as T
_, _, module = lower_model(model, "native")
ir_text = str(module).replace("define internal", "define")
tgt = get_target("native")
T._init()
default = llvm.parse_assembly(ir_text)
pto = llvm.create_pipeline_tuning_options(speed_level=3)
pto.loop_vectorization = pto.slp_vectorization = True
pb = llvm.create_pass_builder(tgt.machine(), pto)
pb.getModulePassManager().run(default, pb)
on, off, again = (str(T.optimize(ir_text, tgt, unswitch=u)) for u in (True, False, True))
print(json.dumps([on == str(default), off.count("\\n") / on.count("\\n"), again == on]))
"""


@pytest.mark.check  # a process that imports and lowers, for what an LLVM upgrade could change
def test_unswitching_toggles_and_on_is_llvm_s_default():
    """target.UNSWITCHING[True] is what LLVM does unasked (so the kernels that want it get O3
    as it is), [False] takes most of the cloned loop nests out, and one process switches both
    ways (parts are optimized one after another in this process when a fork fails)."""
    env = {k: v for k, v in os.environ.items() if k != "SYMWASM_LLVM_OPTIONS"}
    r = subprocess.run([sys.executable, "-c", TOGGLE, str(ROOT)], env=env, capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    same, ratio, again = json.loads(r.stdout.splitlines()[-1])
    assert same and again and ratio < 0.6, (same, ratio, again)
