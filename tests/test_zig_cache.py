"""Linking leaves zig's global cache as it was: zig keeps every object it builds in
``~/.cache/zig/o`` and never evicts them, so a model's weights assembled there once per
compile filled this machine's disk (56 GB). The link runs zig with its per-invocation cache
in the link's temporary directory (link._zig's ``scratch``)."""
import os
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from toolkit.compiler import compile_model
from util import const, make_model, vinfo


def _global_cache() -> Path:
    if os.environ.get("ZIG_GLOBAL_CACHE_DIR"):
        return Path(os.environ["ZIG_GLOBAL_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "zig"


def _weights_objects() -> set[str]:
    o = _global_cache() / "o"
    return {d.name for d in o.iterdir() if (d / "weights.o").exists()} if o.is_dir() else set()


@pytest.mark.parametrize("target", ["wasm32", "native"])
def test_a_compile_stores_no_weights_in_zigs_global_cache(tmp_path, target):
    # weights no other compile has: zig would store them under a new hash
    k = np.random.default_rng().standard_normal((64, 64)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["x", "k"], ["y"])], [vinfo("x", np.float32, ["n", 64])],
                       [vinfo("y", np.float32, ["n", 64])], [const("k", k)])
    before = _weights_objects()
    out = tmp_path / ("m.wasm" if target == "wasm32" else "m.so")
    compile_model(model, out, target=target)
    assert out.stat().st_size > k.nbytes
    assert _weights_objects() - before == set()
