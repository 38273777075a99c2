"""The hosts trust nothing a file says without checking it, turn every load failure into the
library's own error naming the file, check sizes before copying, and count everything a
model holds against its memory limit (issue 6)."""
import json

import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from toolkit.compiler import compile_model
from util import _TMP, assert_outputs_match, make_model, reference, vinfo

INVALID_PROGRAM, INVALID_INPUT, OUT_OF_MEMORY = 4, 1, 3


def _two_inputs():
    """a - b, so swapping the inputs would change the result."""
    return make_model([helper.make_node("Sub", ["a", "b"], ["y"])],
                      [vinfo("a", np.float32, ["n"]), vinfo("b", np.float32, ["n"])], [vinfo("y", np.float32, None)])


def _compiled(target, tag, model=None):
    path = _TMP / f"robust_{tag}.{'wasm' if target == 'wasm32' else 'so'}"
    compile_model(model or _two_inputs(), path, target=target)
    return path


def _rewrite(path, old: bytes, new: bytes, tag):
    """A copy of the module with every occurrence of ``old`` replaced (same length, so the
    file's structure holds)."""
    assert len(old) == len(new)
    data = path.read_bytes()
    assert old in data
    out = path.with_name(f"{tag}_{path.name}")
    out.write_bytes(data.replace(old, new))
    return out


def test_metadata_that_disagrees_with_the_program_is_refused(target):
    """Inputs reordered in the metadata: a and b would be fed to each other's place."""
    path = _compiled(target, "swap")
    meta = wasm_runtime.read_metadata(path)
    old = json.dumps(meta["inputs"], separators=(",", ":")).encode()
    new = json.dumps(meta["inputs"][::-1], separators=(",", ":")).encode()
    with pytest.raises(wasm_runtime.ModelError, match=r"metadata disagrees with its program: input 0 is 'a' "
                                                       r"\(dtype code 1, rank 1\) in the program but 'b'") as e:
        wasm_runtime.load(_rewrite(path, old, new, "swapped"))
    assert e.value.status == INVALID_PROGRAM


@pytest.mark.parametrize("damage", ["bad json", "bad utf-8", "no inputs list"])
def test_broken_metadata_is_a_model_error_naming_the_file(damage, target):
    path = _compiled(target, "meta")
    old = b'"format":"symwasm"'
    new = {"bad json": b'"format"#"symwasm"', "bad utf-8": b'"format":"symw\xffsm"',
           "no inputs list": b'"format":"symwasm"'}[damage]
    if damage == "no inputs list":
        old, new = b'"inputs":[{', b'"inputz":[{'
    broken = _rewrite(path, old, new, damage.replace(" ", "_"))
    with pytest.raises(wasm_runtime.ModelError, match=rf"{broken}: ") as e:
        wasm_runtime.load(broken)
    assert e.value.status == INVALID_PROGRAM


@pytest.mark.parametrize("content", [b"", b"\0asm\x01\0\0\0\x99", b"\x7fELF" + b"\0" * 60, b"hello"])
def test_files_that_are_not_modules(content, tmp_path):
    path = tmp_path / "m.bin"
    path.write_bytes(content)
    with pytest.raises(wasm_runtime.ModelError, match=rf"{path}: cannot load the model"):
        wasm_runtime.load(path)


def test_truncated_module(target):
    path = _compiled(target, "trunc")
    cut = path.with_name(f"cut_{path.name}")
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(wasm_runtime.ModelError, match=rf"{cut}: cannot load the model"):
        wasm_runtime.load(cut)


def test_feeds_that_are_not_arrays(target):
    m = wasm_runtime.load(_compiled(target, "feeds"))
    with pytest.raises(wasm_runtime.ModelError) as e:
        m.run(np.ones(2, np.float32))
    assert str(e.value) == ("run takes a mapping of input names to arrays, or a list of arrays in the model's input "
                            "order (a, b), not ndarray")
    assert e.value.status == INVALID_INPUT
    with pytest.raises(wasm_runtime.ModelError, match=r"input 'a': dtype object is not supported"):
        m.run({"a": {"not": "an array"}, "b": np.ones(2, np.float32)})
    feeds = {"a": np.arange(3, dtype=np.float32), "b": np.ones(3, np.float32)}
    assert_outputs_match(m.run(feeds), reference(_two_inputs(), feeds))


def test_a_huge_broadcast_view_is_refused_before_any_copy(target):
    """A stride-0 view of 2**31 elements holds 4 bytes but stands for 8 GiB: refused on its
    size, not copied first."""
    m = wasm_runtime.load(_compiled(target, "view"))
    huge = np.broadcast_to(np.float32(1), (2 ** 31,))
    with pytest.raises(wasm_runtime.ModelError, match=r"input 'a': cannot allocate 8589934592 bytes \(memory limit "
                                                       r"2147483648\)") as e:
        m.run({"a": huge, "b": huge})
    assert e.value.status == OUT_OF_MEMORY


def test_input_buffers_count_against_the_limit(target):
    """A 1 MiB limit held 3 MB of inputs: now the inputs are refused, naming the input."""
    m = wasm_runtime.load(_compiled(target, "inputs"))
    m.set_memory_limit(1 << 20)
    big = np.ones(400_000, np.float32)  # 1.6 MB each
    with pytest.raises(wasm_runtime.ModelError, match=r"input 'a': cannot allocate 1600000 bytes \(memory limit "
                                                       r"1048576"):
        m.run({"a": big, "b": big})
    small = {"a": np.ones(50_000, np.float32), "b": np.ones(50_000, np.float32)}  # 200 KB each, 200 KB out
    assert_outputs_match(m.run(small), reference(_two_inputs(), small))
    # natively inputs this large are read where the caller holds them (IN_PLACE_BYTES): only
    # the output is the module's
    assert (200_000 if target == "native" else 600_000) <= m.memory_held() <= 1 << 20


def test_the_static_arena_counts_against_the_limit(target):
    """A static model holds its arena; a limit below it leaves no room for the inputs (16 KB:
    copied into the module's buffer on both targets, below IN_PLACE_BYTES). float64: two
    kernels and two arena buffers (float32 would fuse into one)."""
    assert 32 * 64 * 8 < wasm_runtime.IN_PLACE_BYTES
    model = make_model([helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Neg", ["t"], ["y"])],
                       [vinfo("x", np.float64, [32, 64])], [vinfo("y", np.float64, None)])
    m = wasm_runtime.load(_compiled(target, "arena", model))
    arena = m.metadata["program"]["arena_size"]
    assert arena >= 2 * 32 * 64 * 8 and m.memory_held() == arena
    m.set_memory_limit(arena + 100)
    feeds = {"x": np.ones((32, 64), np.float64)}
    with pytest.raises(wasm_runtime.ModelError, match=rf"input 'x': cannot allocate 16384 bytes .*model holds {arena}"):
        m.run(feeds)
    m.set_memory_limit(arena + 16384)
    assert_outputs_match(m.run(feeds), reference(model, feeds))


def test_trim_gives_memory_back_and_the_model_still_runs(target):
    path = _compiled(target, "trim")
    m = wasm_runtime.load(path)
    big = {"a": np.ones(4_000_000, np.float32), "b": np.ones(4_000_000, np.float32)}
    m.run(big)
    # the 16 MB output, and on wasm32 the two 16 MB inputs (natively read in place)
    assert m.memory_held() >= (16_000_000 if target == "native" else 48_000_000)
    if target == "wasm32":
        grown = m._b.memory.data_len(m._b.store)
        assert grown >= 48_000_000
    m.set_memory_limit(1 << 27)
    m.trim()
    assert m.memory_held() == 0
    if target == "wasm32":
        assert m._b.memory.data_len(m._b.store) < grown // 4
    small = {"a": np.arange(5, dtype=np.float32), "b": np.ones(5, np.float32)}
    assert_outputs_match(m.run(small), reference(_two_inputs(), small))
    with pytest.raises(wasm_runtime.ModelError, match="memory limit 134217728"):  # the limit survived the trim
        # (an output of 80 MB, and on wasm32 two inputs as large: 240 MB)
        m.run({"a": np.ones(20_000_000, np.float32), "b": np.ones(20_000_000, np.float32)} if target == "wasm32"
              else {"a": np.ones(40_000_000, np.float32), "b": np.ones(40_000_000, np.float32)})
