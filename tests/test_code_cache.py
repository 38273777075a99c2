"""The compiled-code cache (wasm_runtime/cache.py, issue 10 item 5): a second load of a .wasm
maps the code compiled at the first; an entry is deserialized only when its seal vouches for
it, and anything else (corrupt, truncated, foreign, unsealed) is compiled and written again;
an unsafe directory is not used; the cache can be turned off."""
import os
import shutil
import threading
import time

import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from toolkit.compiler import compile_model
from util import assert_outputs_match, const, make_model, reference, vinfo
from wasm_runtime import cache as cache_module
from wasm_runtime.cache import CodeCache
from wasm_runtime.wasm_host import code_key


def _model(scale: float):
    return make_model([helper.make_node("Mul", ["x", "k"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
                      [vinfo("x", np.float32, ["n", 3])], [vinfo("z", np.float32, ["n", 3])],
                      [const("k", np.float32(scale))])


@pytest.fixture(scope="module")
def wasm(tmp_path_factory):
    path = tmp_path_factory.mktemp("cache") / "m.wasm"
    compile_model(_model(2.0), path, target="wasm32")
    return path


def _check(model, scale: float = 2.0):
    feeds = {"x": np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)}
    assert_outputs_match(model.run(feeds), reference(_model(scale), feeds))


def _entry(directory, wasm):
    c = CodeCache(directory)
    return c.dir / f"{code_key(c.file_sha256(wasm))}.cwasm"


@pytest.fixture
def deserialized(monkeypatch):
    """The paths wasmtime deserialized compiled code from, while the test runs."""
    import wasmtime

    calls = []
    real = wasmtime.Module.deserialize_file.__func__

    def spy(cls, engine, path):
        calls.append(path)
        return real(cls, engine, path)

    monkeypatch.setattr(wasmtime.Module, "deserialize_file", classmethod(spy))
    return calls


def test_a_second_load_maps_the_code_compiled_at_the_first(wasm, tmp_path, deserialized):
    directory = tmp_path / "c"
    first = wasm_runtime.load(wasm, cache=directory)
    assert first.code_cache == "stored" and deserialized == []
    second = wasm_runtime.load(wasm, cache=directory)
    assert second.code_cache == "hit" and len(deserialized) == 1
    _check(first)
    _check(second)
    assert directory.stat().st_mode & 0o777 == 0o700
    assert (directory / "secret").stat().st_mode & 0o777 == 0o600
    assert _entry(directory, wasm).exists()


def test_the_default_directory_and_turning_it_off(wasm, tmp_path, monkeypatch, deserialized):
    monkeypatch.setenv("SYMWASM_CACHE", str(tmp_path))
    assert wasm_runtime.load(wasm).code_cache == "stored"
    assert _entry(tmp_path / "code", wasm).exists()
    assert wasm_runtime.load(wasm).code_cache == "hit"
    assert wasm_runtime.load(wasm, cache=False).code_cache == "off"
    monkeypatch.setenv("SYMWASM_CODE_CACHE", "0")
    model = wasm_runtime.load(wasm)
    assert model.code_cache == "off" and len(deserialized) == 1
    _check(model)


def _corrupt_byte(path, at_fraction=0.5):
    with open(path, "r+b") as f:
        f.seek(int(path.stat().st_size * at_fraction))
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x5A]))


@pytest.mark.parametrize("damage", ["flip a byte", "truncate", "empty", "no seal", "edit the seal",
                                    "another model's entry"])
def test_an_entry_the_seal_does_not_vouch_for_is_never_deserialized(wasm, tmp_path, deserialized, damage):
    """The entry is damaged right after it was written (within the window where its times
    cannot be trusted, so it is hashed): the load compiles the module again, never
    deserializing the entry, and writes it again; the next load maps it."""
    assert wasm_runtime.load(wasm, cache=tmp_path).code_cache == "stored"
    entry = _entry(tmp_path, wasm)
    seal = entry.with_suffix(".seal")
    good = entry.read_bytes()
    if damage == "flip a byte":
        _corrupt_byte(entry)
    elif damage == "truncate":
        os.truncate(entry, len(good) // 2)
    elif damage == "empty":
        os.truncate(entry, 0)
    elif damage == "no seal":
        seal.unlink()
    elif damage == "edit the seal":
        seal.write_bytes(seal.read_bytes().replace(b'"sha256": "', b'"sha256": "0'))
    else:  # another model's sealed entry, copied in under this model's key
        other = tmp_path / "other.wasm"
        compile_model(_model(3.0), other, target="wasm32")
        assert wasm_runtime.load(other, cache=tmp_path).code_cache == "stored"
        shutil.copy(_entry(tmp_path, other), entry)
        shutil.copy(_entry(tmp_path, other).with_suffix(".seal"), seal)
    model = wasm_runtime.load(wasm, cache=tmp_path)
    assert model.code_cache == "replaced" and deserialized == []
    _check(model)
    assert entry.read_bytes() == good  # written again (Cranelift's output is deterministic)
    again = wasm_runtime.load(wasm, cache=tmp_path)
    assert again.code_cache == "hit" and len(deserialized) == 1
    _check(again)


def test_an_old_entry_is_trusted_by_its_identity_until_it_changes(wasm, tmp_path, monkeypatch, deserialized):
    """Past the racy window, a sealed file (the .wasm's hash, the entry) is trusted without
    hashing it as long as it is the same file with the same times; a change to it is seen."""
    monkeypatch.setattr(cache_module, "RACY_NS", 200_000_000)
    hashed = []
    real = cache_module._sha256
    monkeypatch.setattr(cache_module, "_sha256", lambda f: hashed.append(f.name) or real(f))
    assert wasm_runtime.load(wasm, cache=tmp_path).code_cache == "stored"
    time.sleep(0.25)
    assert wasm_runtime.load(wasm, cache=tmp_path).code_cache == "hit"  # hashed, then sealed again
    hashed.clear()
    model = wasm_runtime.load(wasm, cache=tmp_path)
    assert model.code_cache == "hit" and hashed == [] and len(deserialized) == 2
    _check(model)
    _corrupt_byte(_entry(tmp_path, wasm))  # its change time is now the write's, not the store's
    model = wasm_runtime.load(wasm, cache=tmp_path)
    assert model.code_cache == "replaced" and len(deserialized) == 2
    _check(model)


def test_a_changed_model_file_is_compiled_again(tmp_path):
    path = tmp_path / "m.wasm"
    compile_model(_model(2.0), path, target="wasm32")
    _check(wasm_runtime.load(path, cache=tmp_path / "c"), 2.0)
    compile_model(_model(-1.5), path, target="wasm32")
    model = wasm_runtime.load(path, cache=tmp_path / "c")
    assert model.code_cache == "stored"
    _check(model, -1.5)


@pytest.mark.parametrize("what", ["directory", "secret"])
def test_a_directory_others_may_write_is_not_used(wasm, tmp_path, what):
    directory = tmp_path / "c"
    wasm_runtime.load(wasm, cache=directory)
    target, mode = (directory, 0o777) if what == "directory" else (directory / "secret", 0o644)
    os.chmod(target, mode)
    with pytest.warns(RuntimeWarning, match="compiled code is not cached"):
        model = wasm_runtime.load(wasm, cache=directory)
    kind = "the cache directory" if what == "directory" else "the cache's secret"
    assert model.code_cache == f"unusable: {kind} {target} has mode {oct(mode)}: others may change it"
    _check(model)


def test_loads_racing_on_an_empty_cache(wasm, tmp_path):
    results = []

    def load():
        results.append(wasm_runtime.load(wasm, cache=tmp_path))

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    for model in results:
        assert model.code_cache in ("stored", "hit", "replaced")
        _check(model)
    assert wasm_runtime.load(wasm, cache=tmp_path).code_cache == "hit"


def test_eviction_keeps_the_most_recently_used(tmp_path):
    c = CodeCache(tmp_path, max_bytes=2500)
    for key in ("a" * 64, "b" * 64, "c" * 64):
        c.store(key, os.urandom(1000))
        time.sleep(0.02)  # past the file system's time resolution
    assert sorted(p.name for p in tmp_path.glob("*.cwasm")) == ["b" * 64 + ".cwasm", "c" * 64 + ".cwasm"]
    with c.entry("b" * 64) as (path, state):  # used: now the most recent
        assert state == "hit" and path is not None
    stale = tmp_path / ".old-x.tmp"
    stale.write_bytes(b"left by a writer that died")
    os.utime(stale, (time.time() - 2 * cache_module.STALE_TEMP_SECONDS,) * 2)
    time.sleep(0.02)
    c.store("d" * 64, os.urandom(1000))
    assert sorted(p.stem for p in tmp_path.glob("*.cwasm")) == ["b" * 64, "d" * 64]
    assert sorted(p.stem for p in tmp_path.glob("*.seal")) == ["b" * 64, "d" * 64]
    assert not stale.exists()


def test_a_change_within_the_file_systems_time_resolution_is_seen(wasm, tmp_path, monkeypatch, deserialized):
    """On a file system whose times have a resolution of a second (simulated), an entry
    damaged in the second it was written keeps its identity: it is hashed anyway, since it
    changed too close to its sealing to be told apart by its times."""
    monkeypatch.setattr(cache_module, "_identity", lambda st: [st.st_dev, st.st_ino, st.st_size,
                                                               st.st_mtime_ns // 10**9 * 10**9,
                                                               st.st_ctime_ns // 10**9 * 10**9])
    assert wasm_runtime.load(wasm, cache=tmp_path).code_cache == "stored"
    _corrupt_byte(_entry(tmp_path, wasm))
    model = wasm_runtime.load(wasm, cache=tmp_path)
    assert model.code_cache == "replaced" and deserialized == []
    _check(model)
