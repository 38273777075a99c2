"""The Python host's conveniences (issue 10, item 5), on both targets: inputs by position,
outputs as a list in the model's order (run_list), the signature with its symbolic dims in
repr and summary, and how long the load took."""
import numpy as np
import pytest

import wasm_runtime
from test_host_io import _model  # two inputs of two dtypes, three outputs, one of them data-dependent
from util import assert_outputs_match, build, reference

INVALID_INPUT = 1


@pytest.fixture(scope="module", params=["wasm32", "native"])
def model(request):
    return build(_model(), request.param)


def _feeds(n, m, seed=0):
    rng = np.random.default_rng(seed)
    return {"a": rng.uniform(-3, 3, (n, 3)).astype(np.float32), "b": rng.integers(-2, 3, m).astype(np.int64)}


def test_inputs_by_position_and_outputs_in_order(model):
    for n, m in [(2, 5), (7, 1)]:
        feeds = _feeds(n, m)
        want = reference(_model(), feeds)
        a, b = feeds["a"], feeds["b"]
        for inputs in (feeds, [a, b], (a, b)):
            out = model.run(inputs)
            assert list(out) == ["y", "z", "nz"]
            assert_outputs_match(out, want)
            listed = model.run_list(inputs)
            assert isinstance(listed, list) and len(listed) == 3
            assert_outputs_match(dict(zip(["y", "z", "nz"], listed)), want)
        assert_outputs_match(dict(zip(want, model.run_list([a, b], timeout=10))), want)


def test_positional_inputs_that_do_not_fit(model):
    a, b = _feeds(2, 3).values()
    with pytest.raises(wasm_runtime.ModelError) as e:
        model.run([a])
    assert str(e.value) == "run got 1 arrays, but the model takes 2 inputs: a, b"
    assert e.value.status == INVALID_INPUT
    with pytest.raises(wasm_runtime.ModelError) as e:
        model.run_list([b, a])  # swapped: the first is not the float32 input 'a'
    assert str(e.value).startswith("input 'a'") and e.value.status == INVALID_INPUT, str(e.value)
    with pytest.raises(wasm_runtime.ModelError) as e:
        model.run_list({"a": a})
    assert str(e.value) == "input 'b' is missing"
    assert_outputs_match(model.run([a, b]), reference(_model(), {"a": a, "b": b}))


def test_the_signature_in_repr_and_summary(model):
    meta = model.metadata
    nz = meta["outputs"][2]["shape"][1]  # the symbol the compiler named NonZero's count
    assert isinstance(nz, str)
    signature = f"(a: float32(n, 3), b: int64(m,)) -> (y: float32(n, 3), z: int64(m,), nz: int64(1, {nz}))"
    assert model.signature() == signature
    where = "wasm32, baseline" if model.target == "wasm32" else "native"
    assert repr(model) == f"<symwasm.Model {model.path.name} ({where}): {signature}>"
    lines = model.summary().splitlines()
    if model.target == "wasm32":
        target = "wasm32, baseline variant"
    else:
        target = f"native, CPU {meta['cpu']} (ISA extensions: {', '.join(meta['features'])})"
    assert lines[0] == (f"{model.path.name}: symwasm model 'test' (opset 17), {target}, "
                        f"{model.path.stat().st_size / 1e3:.1f} kB, format {'.'.join(map(str, meta['format_version']))}")
    assert lines[1:9] == ["inputs:", "  a: float32(n, 3)", "  b: int64(m,)", "outputs:", "  y: float32(n, 3)",
                          "  z: int64(m,)", f"  nz: int64(1, {nz})", "symbols:"]
    assert "  m: bound from input shapes, range [0, inf]" in lines
    assert f"  {nz}: computed at run time from tensor values, range [0, inf]" in lines
    plan = model.memory_plan()
    assert any(line.startswith(f"memory: static arena {plan['static_bytes']} bytes") for line in lines)
    assert lines[-1].startswith("loaded in ") and lines[-1].count(" ms") == 1
    assert (f"(compiled code: {model.code_cache})" in lines[-1]) == (model.target == "wasm32")


def test_the_load_is_timed(model):
    assert model.load_seconds > 0
    assert (model.code_cache is None) == (model.target == "native")
