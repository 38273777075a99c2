"""How the hosts move data (issue 9, item 5): a run is one export call (format 3.5's
sw_run_io through the io table), each input is copied into linear memory once and each
output out once, and every address the module gives is checked before the host touches it.
Modules of an older format (no sw_run_io) still run the old way."""
import ctypes

import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from util import assert_outputs_match, build, const, make_model, reference, vinfo

INVALID_INPUT, INTERNAL = 1, 5


def _model():
    """Two inputs of different dtypes and symbolic dims, three outputs: y = 2a (float32
    [n, 3]), z = -b (int64 [m]) and the NonZero of b (int64 [1, k], k known after the run)."""
    return make_model(
        [helper.make_node("Mul", ["a", "two"], ["y"]), helper.make_node("Neg", ["b"], ["z"]),
         helper.make_node("NonZero", ["b"], ["nz"])],
        [vinfo("a", np.float32, ["n", 3]), vinfo("b", np.int64, ["m"])],
        [vinfo("y", np.float32, ["n", 3]), vinfo("z", np.int64, ["m"]), vinfo("nz", np.int64, [1, None])],
        [const("two", np.float32(2))])


@pytest.fixture(scope="module", params=["wasm32", "native"])
def model(request):
    return build(_model(), request.param)


def _feeds(rng, n, m):
    return {"a": rng.uniform(-3, 3, (n, 3)).astype(np.float32), "b": rng.integers(-2, 3, m).astype(np.int64)}


class _Calls:
    """Records the exports a model calls (the backend's ``call``) while in a ``with``."""

    def __init__(self, model):
        self.model, self.names = model, []

    def __enter__(self):
        inner = self.model._b.call

        def call(name, *args):
            self.names.append(name)
            return inner(name, *args)

        self.model._b.call = call
        return self

    def __exit__(self, *exc):
        del self.model._b.call


def test_a_run_is_one_export_call(model):
    """With the input buffers big enough, a run calls sw_run_io and nothing else; a bigger
    input first asks for a bigger buffer. Outputs match onnx.reference at every binding."""
    rng = np.random.default_rng(0)
    assert model._io, "a module of this format has the io table"
    for n, m in [(4, 7), (4, 7), (2, 3), (9, 40)]:
        feeds = _feeds(rng, n, m)
        model.run(_feeds(rng, n, m))  # buffers for this size exist afterwards
        with _Calls(model) as calls:
            out = model.run(feeds)
        assert calls.names == ["sw_run_io"], (n, m, calls.names)
        assert_outputs_match(out, reference(_model(), feeds))
    with _Calls(model) as calls:
        model.run(_feeds(rng, 50, 200))
    assert calls.names == ["sw_input_buffer", "sw_input_buffer", "sw_run_io"]


def test_modules_without_the_one_call_run_the_old_way(model):
    """A module of format 3.4 has no sw_run_io: the host declares each input, runs and asks
    for each output (forced here by hiding the io table); the results are the same."""
    rng = np.random.default_rng(1)
    io = model._io
    try:
        model._io = 0
        for n, m in [(3, 5), (1, 0)]:
            feeds = _feeds(rng, n, m)
            with _Calls(model) as calls:
                out = model.run(feeds)
            assert calls.names.count("sw_set_input") == 2 and "sw_run" in calls.names
            assert calls.names.count("sw_output_tensor") == 3 and "sw_run_io" not in calls.names
            assert_outputs_match(out, reference(_model(), feeds))
    finally:
        model._io = io


def test_input_errors_through_one_call_name_the_input(model):
    """sw_run_io declares inputs with sw_set_input's checks and messages."""
    rng = np.random.default_rng(2)
    with pytest.raises(wasm_runtime.ModelError) as e:
        model.run({"a": np.zeros((2, 3, 1), np.float32), "b": np.zeros(2, np.int64)})
    assert e.value.status == INVALID_INPUT and str(e.value) == "input 'a': expected rank 2, got rank 3"
    with pytest.raises(wasm_runtime.ModelError) as e:
        model.run({"a": np.zeros((2, 3), np.float32), "b": np.zeros(2, np.int32)})
    assert e.value.status == INVALID_INPUT and str(e.value) == "input 'b': expected dtype int64, got int32"
    feeds = _feeds(rng, 2, 6)
    assert_outputs_match(model.run(feeds), reference(_model(), feeds))


def test_outputs_are_copies_that_outlive_later_runs(model):
    rng = np.random.default_rng(3)
    first_feeds = _feeds(rng, 5, 9)
    first = model.run(first_feeds)
    kept = {k: v.copy() for k, v in first.items()}
    model.run(_feeds(rng, 5, 9))
    for name, v in first.items():
        assert v.flags.owndata and v.flags.writeable and v.flags.c_contiguous
        np.testing.assert_array_equal(v, kept[name])
    assert_outputs_match(first, reference(_model(), first_feeds))


def test_inputs_are_read_as_given_whatever_their_layout(model):
    """A transposed view, a big-endian array and a 0-stride broadcast each reach the module as
    the values they stand for."""
    rng = np.random.default_rng(4)
    a = rng.uniform(-3, 3, (3, 6)).astype(np.float32).T  # not C-contiguous
    b = rng.integers(-2, 3, 11).astype(">i8")
    for feeds in [{"a": a, "b": b}, {"a": np.broadcast_to(np.float32(1.5), (4, 3)), "b": b[::2]}]:
        want = reference(_model(), {k: np.ascontiguousarray(v).astype(v.dtype.newbyteorder("<"))
                                    for k, v in feeds.items()})
        assert_outputs_match(model.run(feeds), want)


def test_memory_that_grows_during_a_run_is_read_at_its_new_size():
    """A run whose outputs need more linear memory than the module had: the host finds the
    outputs after the memory grew (it asks for the size again when an output lies past the
    size it knew), and the memory's base did not move (the engine's memory_may_move is off,
    which the host's copies and the cancel flag rely on)."""
    m = build(_model(), "wasm32")
    rng = np.random.default_rng(5)
    small = _feeds(rng, 1, 4)
    m.run(small)

    def base() -> int:
        return ctypes.addressof(m._b.memory.data_ptr(m._b.store).contents)
    before, at = m._b.memory.data_len(m._b.store), base()
    feeds = {"a": rng.uniform(-1, 1, (2, 3)).astype(np.float32), "b": np.ones(3_000_000, np.int64)}
    out = m.run(feeds)
    assert m._b.memory.data_len(m._b.store) > before
    assert base() == at
    np.testing.assert_array_equal(out["nz"], np.arange(3_000_000).reshape(1, -1))
    np.testing.assert_array_equal(out["z"], -feeds["b"])
    assert_outputs_match(m.run(small), reference(_model(), small))


def test_wasmtimes_public_call_path_gives_the_same_results():
    """The host calls exports through wasmtime's C API with values it builds (checked against
    the ABI at load); with that off it uses wasmtime-py's Func.__call__. Same results."""
    m = build(_model(), "wasm32")
    assert m._b.fast, "the installed wasmtime-py has the bindings the fast path uses"
    rng = np.random.default_rng(6)
    feeds = _feeds(rng, 6, 13)
    fast = m.run(feeds)
    m._b.fast = False
    try:
        assert_outputs_match(m.run(feeds), fast)
        assert_outputs_match(fast, reference(_model(), feeds))
    finally:
        m._b.fast = True


def test_an_output_outside_linear_memory_is_an_internal_error_and_the_model_restarts():
    """The host reads an output only if its bytes lie inside the module's memory: a
    descriptor pointing past the end (written into the io table after the run, as a corrupt
    module could) is refused, and the model is restarted and runs right."""
    m = build(_model(), "wasm32")
    rng = np.random.default_rng(7)
    feeds = _feeds(rng, 2, 5)
    m.run(feeds)
    inner = m._b.call
    layout = wasm_runtime.TENSOR_LAYOUT[4]

    def corrupt(name, *args):
        r = inner(name, *args)
        if name == "sw_run_io":
            size = m._b.memory.data_len(m._b.store)
            at = ctypes.addressof(m._b.memory.data_ptr(m._b.store).contents) + m._io + 2 * layout["size"]
            ctypes.c_uint32.from_address(at + layout["data"]).value = size - 8
        return r

    m._b.call = corrupt
    try:
        with pytest.raises(wasm_runtime.ModelError) as e:
            m.run(feeds)
    finally:
        del m._b.call
    assert e.value.status == INTERNAL
    assert "outside its" in str(e.value) and "the model was restarted" in str(e.value), str(e.value)
    assert_outputs_match(m.run(feeds), reference(_model(), feeds))


def _wasm(sig_params: bytes, sig_results: bytes) -> bytes:
    """A module exporting memory and sw_format_version of the given type."""
    def section(i, body):
        return bytes([i, len(body)]) + body

    def name(s):
        return bytes([len(s)]) + s.encode()

    func_type = b"\x60" + bytes([len(sig_params)]) + sig_params + bytes([len(sig_results)]) + sig_results
    code = b"\x00" + {b"": b"", b"\x7f": b"\x41\x00", b"\x7e": b"\x42\x00"}[sig_results] + b"\x0b"
    return (b"\x00asm\x01\x00\x00\x00" + section(1, b"\x01" + func_type) + section(3, b"\x01\x00")
            + section(5, b"\x01\x00\x01")
            + section(7, b"\x02" + name("memory") + b"\x02\x00" + name("sw_format_version") + b"\x00\x00")
            + section(10, b"\x01" + bytes([len(code)]) + code))


@pytest.mark.parametrize("params, results, shown", [
    (b"\x7e", b"\x7f", "(i64) -> (i32)"), (b"", b"\x7e", "() -> (i64)"), (b"", b"", "() -> ()")])
def test_an_export_of_another_signature_is_refused_at_load(tmp_path, params, results, shown):
    """Exports are called with values built for the ABI's signature, so one of another type
    is refused when the module is loaded, naming it."""
    from wasm_runtime.wasm_host import WasmBackend

    path = tmp_path / "odd.wasm"
    path.write_bytes(_wasm(params, results))
    with pytest.raises(ValueError) as e:
        WasmBackend(path)
    assert str(e.value) == (f"export sw_format_version is {shown} but the ABI says () -> (i32); not a symwasm "
                            f"module of this format")
    ok = tmp_path / "ok.wasm"
    ok.write_bytes(_wasm(b"", b"\x7f"))
    assert WasmBackend(ok).call("sw_format_version") == 0
