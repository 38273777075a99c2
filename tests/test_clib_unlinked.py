"""The C libraries (wasm_runtime/clib: strings, regular expressions, images) are one unit
behind a boundary (issue 35, item 4): sw_lib.h is their whole interface, the VM includes
none of their headers, and a model without their ops links none of their code, on wasm32
and natively.

Each library has markers that only its code holds, read from its sources so they follow the
code: a table of its read-only data (the image decoder's JPEG zigzag order and inflate's
code-length order; the text kernels' white space ranges), a constant of its code (the regex
program's header word, an ``i64.const`` in wasm, an immediate natively) and, natively, its
functions' names (the symbol table keeps local symbols). Natively, no module holds the
libraries' debug info either (their sources' paths): the linker keeps every object's DWARF,
used or not, and before toolkit/link.py built them with -g0 every native module did.
A plain model holds none of them; a model with the library's op holds its markers, which
proves each marker is real, and none of the other libraries', so each is dropped on its own.
"""
from __future__ import annotations

import re
import struct
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from util import const, make_model, vinfo
from toolkit.compiler import compile_model
from toolkit.link import CLIB, VM

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ("wasm32", "native")
LIBRARIES = ("image", "regex", "text")
# the sw_lib.h functions each library's model (library_models) calls
CALLED = {"image": ("sw_image_probe", "sw_image_decode"), "regex": ("sw_regex_full_match",),
          "text": ("sw_text_split_count", "sw_text_split")}


def _sleb128(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        if (n == 0 and not byte & 0x40) or (n == -1 and byte & 0x40):
            return bytes(out + bytes([byte]))
        out.append(byte | 0x80)


def _c_array(source: str, name: str) -> list[int]:
    """The integers of a C array initializer ``name[...] = {...};`` in clib/``source``."""
    text = (CLIB.dir / source).read_text()
    m = re.search(rf"\b{name}\[\w*\] = \{{(.*?)\}};", text, re.S)
    assert m, f"{source} no longer defines {name}: choose another marker"
    return [int(v, 0) for v in re.findall(r"0x[0-9A-Fa-f]+|\d+", m[1])]


def _define(header: str, name: str) -> int:
    m = re.search(rf"^#define {name} (0x[0-9a-fA-F]+|\d+)", (CLIB.dir / header).read_text(), re.M)
    assert m, f"{header} no longer defines {name}"
    return int(m[1], 0)


def lib_functions() -> list[str]:
    """The functions sw_lib.h declares: the unit's interface."""
    return re.findall(r"^sw_status_t (sw_\w+)\(SW_LIB_ARGS\);", (CLIB.dir / "sw_lib.h").read_text(), re.M)


@cache
def markers(library: str, target: str) -> dict[str, bytes]:
    """What only ``library``'s code puts in a module for ``target``, by what it is."""
    native = target != "wasm32"
    if library == "image":
        out = {"JPEG zigzag table": bytes(_c_array("sw_image.c", "ZIGZAG")[:24]),
               "inflate code-length order": bytes(_c_array("sw_image.c", "CLEN_ORDER"))}
    elif library == "regex":
        word = _define("sw_regex_ops.h", "SW_RX_HEADER_WORD")
        out = {"program header word": struct.pack("<I", word) if native else b"\x42" + _sleb128(word)}
    else:
        out = {"white space ranges": struct.pack("<6I", *_c_array("sw_case_table.h", "sw_space")[:6])}
    if native:  # the functions the library's model (library_models) calls
        for fn in CALLED[library]:
            assert fn in lib_functions(), f"sw_lib.h no longer declares {fn}"
            out[f"symbol {fn}"] = fn.encode() + b"\0"
    return out


def _sv(name: str, shape):
    return helper.make_tensor_value_info(name, TensorProto.STRING, shape)


def plain_models() -> dict:
    rng = np.random.default_rng(0)
    conv = make_model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                       helper.make_node("Relu", ["c"], ["y"])],
                      [vinfo("x", np.float32, ["n", 3, "h", "w"])], [vinfo("y", np.float32, None)],
                      [const("w", rng.standard_normal((8, 3, 3, 3)).astype(np.float32)),
                       const("b", rng.standard_normal(8).astype(np.float32))])
    add = make_model([helper.make_node("Add", ["a", "b"], ["y"])],
                     [vinfo("a", np.float32, ["n"]), vinfo("b", np.float32, ["n"])], [vinfo("y", np.float32, None)])
    return {"conv_relu": conv, "add": add}


def library_models() -> dict:
    """A model with one op of each library."""
    return {
        "image": make_model([helper.make_node("ImageDecoder", ["data"], ["y"])], [vinfo("data", np.uint8, ["n"])],
                            [vinfo("y", np.uint8, None)], opset=20),
        "regex": make_model([helper.make_node("RegexFullMatch", ["x"], ["y"], pattern="a+[0-9]b")], [_sv("x", ["n"])],
                            [vinfo("y", np.bool_, None)], opset=20),
        "text": make_model([helper.make_node("StringSplit", ["x"], ["y", "z"])], [_sv("x", ["n"])],
                           [_sv("y", None), vinfo("z", np.int64, None)], opset=20),
    }


@pytest.fixture(scope="module")
def modules(tmp_path_factory) -> dict[tuple[str, str], bytes]:
    """(model name, target) -> the module's bytes."""
    tmp = tmp_path_factory.mktemp("unlinked")
    out = {}
    for target in TARGETS:
        for name, model in {**plain_models(), **library_models()}.items():
            path = tmp / f"{name}.{'wasm' if target == 'wasm32' else 'so'}"
            compile_model(model, path, target=target)
            out[name, target] = path.read_bytes()
    return out


def found(data: bytes, library: str, target: str) -> list[str]:
    return [what for what, marker in markers(library, target).items() if marker in data]


def test_a_model_without_their_ops_links_none_of_the_libraries(modules):
    """Every plain model on every target (one test, so that the fast tier runs them all)."""
    for target in TARGETS:
        for model in plain_models():
            data = modules[model, target]
            held = {lib: found(data, lib, target) for lib in LIBRARIES}
            assert not any(held.values()), f"{model} on {target} holds C library code: {held}"
            if target != "wasm32":
                symbols = [fn for fn in lib_functions() if fn.encode() + b"\0" in data]
                assert not symbols, f"{model} natively holds the C libraries' functions {symbols}"
                assert b"wasm_runtime/clib/" not in data, \
                    f"{model} natively carries the C libraries' debug info (-g0)"


def test_a_model_with_one_library_s_op_links_it_alone(modules):
    """Each marker is real (the library's model holds every one), and a library is kept or
    dropped on its own."""
    for target in TARGETS:
        for library in LIBRARIES:
            data = modules[library, target]
            assert found(data, library, target) == list(markers(library, target)), \
                f"the {library} model on {target} lacks some of its library's markers: choose markers its code holds"
            others = {lib: found(data, lib, target) for lib in LIBRARIES if lib != library}
            assert not any(others.values()), f"the {library} model on {target} holds other libraries' code: {others}"


def test_a_native_module_carries_no_debug_info(modules):
    """No DWARF of the VM or the libraries (both compiled -g0): it was 133 kB of a plain
    native module and named the build machine's source directories."""
    for name, target in modules:
        if target != "wasm32":
            data = modules[name, target]
            assert b".debug_info" not in data and str(ROOT).encode() not in data, \
                f"{name} natively carries debug info or the build's paths"


def test_the_committed_runtime_model_links_none_of_them():
    data = (ROOT / "tests" / "data" / "runtime_model.wasm").read_bytes()
    held = {lib: found(data, lib, "wasm32") for lib in LIBRARIES}
    assert not any(held.values()), held


def test_sw_lib_h_is_the_unit_s_whole_interface():
    """Every function a C library defines outside its file is declared in sw_lib.h, and
    every one sw_lib.h declares is defined once; the VM's sources include none of the
    libraries' headers (the build gives the VM no include path to them either)."""
    declared = lib_functions()
    defined = []
    for source in CLIB.sources:
        text = (CLIB.dir / source).read_text()
        for m in re.finditer(r"^([a-z_][\w ]*?[\w*]) ?\**(\w+)\([^;]*?\) \{", text, re.M):
            if not m[1].startswith(("static", "typedef")):
                defined.append(m[2])
    assert sorted(defined) == sorted(declared), \
        f"defined outside their file: {sorted(defined)}; sw_lib.h declares {sorted(declared)}"
    clib_headers = {h.name for h in CLIB.dir.glob("*.h")}
    for path in [VM.dir / s for s in VM.sources] + sorted(VM.dir.glob("*.h")):
        included = set(re.findall(r'^#include "([^"]+)"', path.read_text(), re.M))
        assert not included & clib_headers, f"{path.name} includes {included & clib_headers}"
    assert CLIB.dir not in VM.includes()
