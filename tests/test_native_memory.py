"""The native VM's large buffers get transparent huge pages (wasm_runtime/vm/sw_alloc.c): a
model whose arena spans several huge pages, run natively, adds huge pages to this process
where the kernel grants them on request (THP "madvise"), and its outputs are right."""
import re
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from util import assert_outputs_match, build, make_model, reference, vinfo

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def _huge_kb() -> int:
    """This process's anonymous memory in huge pages, in kB."""
    text = Path("/proc/self/smaps_rollup").read_text()
    return int(re.search(r"^AnonHugePages:\s+(\d+) kB", text, re.M).group(1))


@pytest.mark.skipif(not THP.exists() or "[madvise]" not in THP.read_text(),
                    reason="huge pages are granted on request only where THP is in madvise mode")
def test_large_arena_gets_huge_pages():
    # 4 MiB intermediate values in the arena, a small output: numpy asks for huge pages for
    # its own large arrays, so the input exists before counting and the output is small
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
             helper.make_node("Sigmoid", ["b"], ["c"]), helper.make_node("Add", ["c", "x"], ["d"]),
             helper.make_node("ReduceSum", ["d"], ["y"], keepdims=0)]
    model = make_model(nodes, [vinfo("x", np.float32, [1024, 1024])], [vinfo("y", np.float32, None)], opset=18)
    m = build(model, "native")
    x = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    want = reference(model, {"x": x})
    before = _huge_kb()
    got = m.run({"x": x})
    assert_outputs_match(got, want, rtol=1e-4, atol=1e-2)
    assert _huge_kb() - before >= 2048, "the arena was not given a huge page"
