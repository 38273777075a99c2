"""Compile the C VM and the C libraries (two source groups, cached by content hash) and link
one module file.

Three sets of objects go in: the VM's and the C libraries', the kernels and program (from
LLVM), and the weights: their bytes are assembled into an object of their own with
``.incbin`` (defining ``sw_weights``), so they never pass through LLVM IR text.

wasm32: zig's ``wasm-ld`` (:mod:`toolkit.zig`) -> one .wasm with no imports, then the metadata and the
variant's name go in as custom sections at the front of the file (``with_symwasm_sections``).
native: zig's ``cc -shared`` -> a shared library, whose ``.symwasm.cpu`` section
(not loaded, so readable from the file alone) says the CPU its code is for and the ISA
extensions it needs: the native host checks them before it loads the library.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from wasm_runtime.cache import cache_root
from wasm_runtime.metadata import SECTION as METADATA_SECTION
from wasm_runtime.metadata import VARIANT_SECTION

from . import zig
from .abi import EXPORTS
from .codegen.target import THREADS, Target, baseline, variant

RUNTIME_DIR = Path(__file__).resolve().parents[1] / "wasm_runtime"
VM_DIR = RUNTIME_DIR / "vm"
CLIB_DIR = RUNTIME_DIR / "clib"


@dataclass(frozen=True)
class SourceGroup:
    """C sources compiled alike, with one include path: a group sees its own headers and
    those of the groups it ``uses``, nothing else, so a boundary in the tree is one in the build."""

    name: str
    dir: Path
    sources: tuple[str, ...]
    uses: tuple[Path, ...] = ()
    flags: tuple[str, ...] = ()

    def includes(self) -> list[Path]:
        return [self.dir, *self.uses]

    def headers(self) -> list[Path]:
        return sorted(h for d in self.includes() for h in d.glob("*.h"))


# the VM: interpreter, allocator and thread pool. It includes nothing of the C libraries. -g0 as below:
# its debug info was 133 kB of every native module (a plain model: 190 kB -> 57 kB) and
# named the build machine's source paths
VM = SourceGroup("vm", VM_DIR, ("sw_vm.c", "sw_alloc.c", "sw_pool.c"), flags=("-g0",))
# the C libraries (wasm_runtime/clib/sw_lib.h, their whole interface: strings, regular
# expressions, images), which see only the ABI's header of the VM (sw_abi.h). Only kernels
# call them, and a module keeps a function only when its program calls it (--gc-sections).
# -g0: zig cc emits DWARF by default, and the linker keeps every object's debug sections
# whether or not it keeps their code, so a native module would carry the libraries' debug
# info (their names and constants) with none of their code. tests/test_clib_unlinked.py
# checks that a model without those ops holds nothing of them.
CLIB = SourceGroup("clib", CLIB_DIR, ("sw_strconst.c", "sw_text.c", "sw_regex.c", "sw_image.c"), uses=(VM_DIR,),
                   flags=("-g0",))
GROUPS = (VM, CLIB)
# in a .wasm, the interpreter and allocator are optimized for size: they run once per
# instruction or buffer, never per element, and -Os takes 19 KB off every module; the
# kernels written in C (text, regular expressions, image decoding) keep -O2
WASM_SIZE_OPTIMIZED = ("sw_vm.c", "sw_alloc.c", "sw_pool.c", "sw_strconst.c")


WASM_STACK = 1 << 20
WASM32_MAX_MEMORY = 1 << 32  # bytes: the threads variant's shared memory must declare a maximum
WASM_HEADER_SIZE = 8  # the magic "\0asm" and the binary format's version
CPU_SECTION = ".symwasm.cpu"


class LinkError(RuntimeError):
    pass


def cache_dir() -> Path:
    p = cache_root() / "vm"
    p.mkdir(parents=True, exist_ok=True)
    return p


def _zig(*args: str, scratch: Path | None = None, what: str = "") -> subprocess.CompletedProcess:
    """Run zig. With ``scratch``, zig runs there and keeps its per-invocation cache there
    (``ZIG_LOCAL_CACHE_DIR``): otherwise it stores every object it builds, one model's weights
    included, in ``~/.cache/zig`` and never evicts them. Its shared artifacts (compiler-rt,
    libc) stay in the global cache, built once."""
    cmd = [*zig.command(), *args]
    env = None
    if scratch is not None:
        env = dict(os.environ, ZIG_LOCAL_CACHE_DIR=str(Path(scratch) / "zig-cache"))
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=scratch, env=env)
    if r.returncode != 0:
        raise LinkError(f"{what or ' '.join(args[:2])} failed:\n{r.stderr.strip()}")
    return r


@functools.cache
def _zig_version() -> str:
    return _zig("version").stdout


def _cflags(target: Target, group: SourceGroup, src: str = "") -> list[str]:
    opt = "-Os" if target.is_wasm and src in WASM_SIZE_OPTIMIZED else "-O2"
    flags = ["-target", target.zig_target, opt, "-std=c11", "-Wall", "-Werror", "-fno-strict-aliasing",
             *group.flags]
    for d in group.includes():
        flags += ["-I", str(d)]
    if target.is_wasm:
        flags += ["-ffreestanding", "-fno-builtin", "-nostdlib", "-mbulk-memory",
                  "-mnontrapping-fptoint", "-msimd128"]
        if THREADS in target.wasm_features:
            flags.append("-matomics")
    else:
        flags += ["-fPIC", "-fvisibility=hidden", "-ffunction-sections", "-fdata-sections"]
    return flags


def group_objects(target: Target, group: SourceGroup) -> list[Path]:
    """The object files of one source group for ``target``, compiled once per content hash
    (its sources, the headers it can include, the flags and zig's version)."""
    h = hashlib.sha256()
    for path in [group.dir / s for s in group.sources] + group.headers():
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    for src in group.sources:
        h.update(" ".join(_cflags(target, group, src)).encode())
    h.update(_zig_version().encode())
    key = h.hexdigest()[:16]
    out = []
    for src in group.sources:
        obj = cache_dir() / f"{group.name}-{Path(src).stem}-{target.name}-{key}.o"
        if not obj.exists():
            tmp = obj.with_suffix(f".{os.getpid()}.tmp")
            with tempfile.TemporaryDirectory(prefix="symwasm-vm-") as scratch:
                _zig("cc", *_cflags(target, group, src), "-c", str(group.dir / src), "-o", str(tmp),
                     scratch=Path(scratch))
            os.replace(tmp, obj)  # atomic: parallel compiles never see a partial object
        out.append(obj)
    return out


def vm_objects(target: Target) -> list[Path]:
    """The C objects every module links for ``target``: the VM's, then the C libraries'
    (which the link drops unless a kernel calls them)."""
    return [obj for group in GROUPS for obj in group_objects(target, group)]


def weights_object(target: Target, weights: bytes, tmp: Path) -> Path:
    """An object defining ``sw_weights`` (64-byte aligned, read-only) as these bytes, and
    natively the CPU section: ``{"cpu": name, "features": [...]}`` as JSON."""
    (tmp / "weights.bin").write_bytes(weights or b"\0")
    size = max(len(weights), 1)
    if target.is_wasm:
        head = ['.section .rodata.sw_weights,"",@']
    else:
        head = ['.section .rodata.sw_weights,"a",@progbits', ".hidden sw_weights", ".type sw_weights,@object"]
    asm = head + [".globl sw_weights", ".p2align 6", "sw_weights:", '.incbin "weights.bin"',
                  f".size sw_weights, {size}"]
    if not target.is_wasm:
        (tmp / "cpu.json").write_text(json.dumps({"cpu": target.cpu, "features": list(target.isa)}))
        # no "a" flag: not loaded, so --gc-sections keeps it and it costs no memory
        asm += [f'.section {CPU_SECTION},"",@progbits', '.incbin "cpu.json"']
    asm.append("")
    (tmp / "weights.s").write_text("\n".join("\t" + line if not line.endswith(":") else line for line in asm))
    obj = tmp / "weights.o"
    _zig("cc", "-target", target.zig_target, "-c", "weights.s", "-o", "weights.o", scratch=tmp,
         what="assembling the weights")
    return obj


def _weights_key(target: Target) -> tuple:
    """What a weights object depends on besides the weights: natively, the CPU section."""
    return (target.zig_target,) + (() if target.is_wasm else (target.cpu, tuple(target.isa)))


def link(target: Target, kernel_objects: Sequence[bytes], output: Path, metadata: bytes,
         weights: bytes = b"") -> None:
    """The kernels and program (one object, or the parts emitted in parallel), the VM and the
    weights as one module (wasm32: with the metadata and the variant's name as custom
    sections) or shared library at ``output``."""
    link_variants({target: (kernel_objects, Path(output))}, metadata, weights)


def link_variants(jobs: Mapping[Target, tuple[Sequence[bytes], Path]], metadata: bytes,
                  weights: bytes = b"") -> None:
    """:func:`link` for each variant of one model at once: ``{target: (kernel objects,
    output)}``. The variants share one weights object, and the linkers run side by side."""
    with tempfile.TemporaryDirectory(prefix="symwasm-") as tmp:
        tmp = Path(tmp)
        weights_objs: dict[tuple, Path] = {}
        vm: dict[Target, list[Path]] = {}
        for target in jobs:  # here, not in the threads: each compiles what is missing
            # the VM's C code is the same in every variant
            vm[target] = vm_objects(baseline(target))
            if _weights_key(target) not in weights_objs:
                scratch = tmp / f"weights{len(weights_objs)}"
                scratch.mkdir()
                weights_objs[_weights_key(target)] = weights_object(target, weights, scratch)

        def one(i: int, target: Target, kernel_objects: Sequence[bytes], output: Path) -> None:
            scratch = tmp / f"link{i}"
            scratch.mkdir()
            output.parent.mkdir(parents=True, exist_ok=True)
            objs = [str(p) for p in vm[target]]
            for j, data in enumerate(kernel_objects):
                obj = scratch / f"model{j}.o"
                obj.write_bytes(data)
                objs.append(str(obj))
            objs.append(str(weights_objs[_weights_key(target)]))
            linked = scratch / output.name
            if target.is_wasm:
                # the threads variant imports its memory, shared, which the host makes (at
                # most 4 GiB, as wasm32's own); wasm-ld turns the data into passive segments
                # that the first instance copies in, once
                shared = ["--shared-memory", "--import-memory", f"--max-memory={WASM32_MAX_MEMORY}"] \
                    if THREADS in target.wasm_features else []
                _zig("wasm-ld", "--no-entry", "--gc-sections", "--strip-all", "-O2", *shared,
                     *(f"--export={e.name}" for e in EXPORTS), "-z", f"stack-size={WASM_STACK}",
                     *objs, "-o", str(linked), scratch=scratch)
                linked.write_bytes(with_symwasm_sections(linked.read_bytes(), metadata, variant(target)))
            else:
                # -lpthread: the pool's threads (glibc before 2.34 keeps them out of libc)
                _zig("cc", "-target", target.zig_target, "-shared", "-O2", "-Wl,--gc-sections", *objs, "-lpthread",
                     "-o", str(linked), scratch=scratch)
            shutil.move(str(linked), str(output))

        items = list(jobs.items())
        if len(items) == 1:
            (target, (objs, output)), = items
            one(0, target, objs, Path(output))
            return
        # the linkers are child processes: threads only wait for them
        with ThreadPoolExecutor(len(items)) as pool:
            for f in [pool.submit(one, i, t, o, Path(out)) for i, (t, (o, out)) in enumerate(items)]:
                f.result()


def _leb128(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def with_symwasm_sections(module: bytes, metadata: bytes, variant_name: str) -> bytes:
    """``module`` with the metadata and variant sections first, right after the 8-byte
    header (the binary format allows custom sections before, between and after the others).
    The weights come last, in the data section, so a host that reads a model from a stream
    (the JS loader, given a URL) has the metadata in the first kilobytes, picks the variant
    and stops reading a file it will not run. Hosts find the sections by name wherever they
    are: files written before this put them at the end."""
    return (module[:WASM_HEADER_SIZE] + custom_section(METADATA_SECTION, metadata)
            + custom_section(VARIANT_SECTION, variant_name.encode()) + module[WASM_HEADER_SIZE:])


def custom_section(name: str, payload: bytes) -> bytes:
    body = _leb128(len(name.encode())) + name.encode() + payload
    return b"\x00" + _leb128(len(body)) + body
