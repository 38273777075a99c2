"""Targets and object emission: one LLVM module per model, optimized with the new pass
manager and emitted as an object for wasm32 or a native CPU (this host's, or one named)."""
from __future__ import annotations

import os
import platform
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import llvmlite.binding as llvm
from llvmlite import ir

from wasm_runtime.cpu import CPU_FLAGS

from .. import zig
from . import vconst


# LLVM command-line options, set once per process before any pass runs: none of the
# compiler's own (LLVM_OPTIONS), then SYMWASM_LLVM_OPTIONS (space-separated), for experiments;
# benchmarks/ab.py times two settings side by side (LLVM ignores an option it does not know
# and only prints a bad value: ab.py's module sizes show whether one took).
LLVM_OPTIONS: tuple[str, ...] = ()
# O3's nontrivial loop unswitching, per module optimized (LLVM's options are process-wide, so
# a module's kernels share one setting: codegen.parallel puts the kernels that want it in parts
# of their own). On, LLVM's defaults: a loop nest is cloned per loop-invariant condition, which
# the convolutions, products and broadcasts over symbolic dims need (the zoo's ResNet-18 ran
# 7-15% slower without); off for the other kernels, which it only makes bigger. D92.
UNSWITCHING: dict[bool, tuple[str, ...]] = {
    True: ("-unswitch-threshold=50", "-enable-unswitch-cost-multiplier=true"),
    False: ("-unswitch-threshold=1", "-enable-unswitch-cost-multiplier=false"),
}


def _environment_options() -> tuple[str, ...]:
    return tuple(os.environ.get("SYMWASM_LLVM_OPTIONS", "").split())


@lru_cache(maxsize=None)
def _init() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    for option in LLVM_OPTIONS + _environment_options():
        llvm.set_option("", option)


def _unswitching(on: bool) -> None:
    """Nontrivial loop unswitching on or off for the passes that run next; an experiment's
    SYMWASM_LLVM_OPTIONS still have the last word."""
    _init()
    for option in UNSWITCHING[on] + _environment_options():
        llvm.set_option("", option)


@dataclass(frozen=True)
class Target:
    name: str  # "wasm32" or "native"
    triple: str
    cpu: str
    features: str
    zig_target: str  # for `zig cc -target`
    wasm_features: tuple[str, ...] = ()  # what a host must support, for the metadata
    # native: the ISA extensions the code may use (LLVM names, wasm_runtime.cpu.CPU_FLAGS'
    # order), which a loader checks against the CPU it runs on
    isa: tuple[str, ...] = ()

    @property
    def is_wasm(self) -> bool:
        return self.name == "wasm32"

    @property
    def f32_lanes(self) -> int:
        """float32 lanes of the widest vectors tiled kernels use: SIMD128 on wasm32, AVX-512
        or AVX2 registers on x86 CPUs that have them."""
        if self.is_wasm or not self.triple.startswith("x86_64"):
            return 4
        if "avx512f" in self.isa:
            return 16
        return 8 if "avx2" in self.isa else 4

    def machine(self) -> llvm.TargetMachine:
        _init()
        return llvm.Target.from_triple(self.triple).create_target_machine(
            cpu=self.cpu, features=self.features, opt=3, reloc="pic", codemodel="default")


WASM_FEATURES = ("simd128", "bulk-memory", "nontrapping-fptoint", "sign-ext", "mutable-globals")


PSABI_LEVELS = ("x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4")
CPU_EXAMPLES = "native (this machine), " + ", ".join(PSABI_LEVELS) + ", skylake, znver3, sapphirerapids"


def get_target(name: str, cpu: str | None = None) -> Target:
    """The target ``name`` (wasm32 or native). ``cpu`` (native only) is an LLVM CPU name
    (``skylake``, ``znver3``) or an x86-64 psABI level (``x86-64-v3``); None or ``native``
    is this machine's CPU with every feature it has. ValueError for anything else."""
    if name == "wasm32":
        if cpu is not None:
            raise ValueError(f"CPU '{cpu}': only the native target takes a CPU (a .wasm runs on any CPU; "
                             "its engine chooses the instructions)")
        return Target("wasm32", "wasm32-unknown-unknown", "generic",
                      ",".join("+" + f for f in WASM_FEATURES), "wasm32-freestanding",
                      WASM_FEATURES)
    if name == "native":
        _init()
        arch = platform.machine().lower()
        arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)
        if platform.system() != "Linux":
            raise ValueError(f"native target: only Linux hosts are supported, not {platform.system()}")
        zig_target = f"{arch}-linux-gnu"
        if cpu is None or cpu == "native":
            host = llvm.get_host_cpu_features()
            isa = tuple(f for f in CPU_FLAGS if host.get(f))
            return Target("native", llvm.get_process_triple(), llvm.get_host_cpu_name(),
                          host.flatten() + _vector_width(isa), zig_target, isa=isa)
        # LLVM derives the named CPU's features itself; features="" adds none
        isa = cpu_features(cpu, zig_target)
        return Target("native", llvm.get_process_triple(), cpu, _vector_width(isa).lstrip(","), zig_target, isa=isa)
    raise ValueError(f"unknown target '{name}' (choose wasm32 or native)")


def _vector_width(isa: Sequence[str]) -> str:
    """The features that let LLVM's vectorizers use 512-bit vectors on an AVX-512 CPU, which
    LLVM's Intel CPUs otherwise keep to 256 bits (``prefer-256-bit``): the kernels' own
    vectors are 16 lanes there already, and the loops LLVM vectorizes (exp, erf, tanh,
    sigmoid, GELU over 256 x 1024) took 0.75-0.92x the time with 512."""
    return ",-prefer-256-bit" if "avx512f" in isa else ""


@lru_cache(maxsize=None)
def cpu_features(cpu: str, zig_target: str) -> tuple[str, ...]:
    """The ISA extensions (CPU_FLAGS' names and order) of the named CPU, as LLVM defines the
    CPU: llvmlite offers only the host's, so clang (the ziglang package's, on the same LLVM)
    is asked which feature macros (``__AVX2__``) the CPU defines."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", cpu):
        raise ValueError(f"unknown CPU '{cpu}': give an LLVM CPU name or an x86-64 psABI level, "
                         f"e.g. {CPU_EXAMPLES}")
    # zig spells LLVM's CPU names with '_' ('-' would start a feature to remove)
    r = subprocess.run([*zig.command(), "cc", "-target", zig_target,
                        f"-mcpu={cpu.replace('-', '_')}", "-dM", "-E", "-x", "c", "-"],
                       input="", capture_output=True, text=True)
    if r.returncode != 0:
        if "unknown CPU" in r.stderr:
            raise ValueError(f"unknown CPU '{cpu}' for {zig_target.split('-')[0]}: give an LLVM CPU name or "
                             f"an x86-64 psABI level, e.g. {CPU_EXAMPLES}")
        raise RuntimeError(f"asking clang for the features of CPU '{cpu}' failed:\n{r.stderr.strip()}")
    macros = set(re.findall(r"#define (__\w+__) ", r.stdout))
    return tuple(f for f in CPU_FLAGS if "__" + f.upper().replace(".", "_") + "__" in macros)


RELAXED_SIMD = "relaxed-simd"  # the module variant (and wasm feature) name


def relaxed_simd(target: Target) -> Target:
    """wasm32 with relaxed SIMD: from the same IR, LLVM turns the kernels' contractible
    multiply-adds (``contract`` fmul + fadd on f32x4) into ``f32x4.relaxed_madd``, a fused
    multiply-add on hosts with FMA. An engine without relaxed SIMD rejects such a module, so
    it is a second file next to the baseline (see toolkit.compiler)."""
    if not target.is_wasm:
        raise ValueError("relaxed SIMD is a wasm32 feature")
    return replace(target, features=target.features + ",+" + RELAXED_SIMD,
                   wasm_features=target.wasm_features + (RELAXED_SIMD,))


THREADS = "threads"  # the module variant with shared memory and atomics (wasm's threads feature)


def with_threads(target: Target) -> Target:
    """wasm32 with shared memory: kernels and VM compiled with atomics, the memory imported and
    shared, so a host can run the context's threads as instances of the module over one
    memory (``vm/sw_pool.c``). An engine without threads rejects such a module, and a host must
    supply the memory, so it is a file of its own next to the others (see toolkit.compiler)."""
    if not target.is_wasm:
        raise ValueError("the threads variant is a wasm32 one; native libraries always have threads")
    return replace(target, features=target.features + ",+atomics", wasm_features=target.wasm_features + (THREADS,))


def baseline(target: Target) -> Target:
    """``target`` without relaxed SIMD (the VM's own C code is compiled for it)."""
    if RELAXED_SIMD not in target.wasm_features:
        return target
    return replace(target, features=target.features.replace(",+" + RELAXED_SIMD, ""),
                   wasm_features=tuple(f for f in target.wasm_features if f != RELAXED_SIMD))


def variant(target: Target) -> str:
    """The variant's name: baseline, relaxed-simd, threads or relaxed-simd+threads."""
    return "+".join(f for f in (RELAXED_SIMD, THREADS) if f in target.wasm_features) or "baseline"


def new_module(target: Target, name: str) -> ir.Module:
    m = ir.Module(name=name)
    m.triple = target.triple
    m.data_layout = str(target.machine().target_data)
    return m


def emit_object(module: ir.Module | str, target: Target, opt: int = 3, unswitch: bool = True) -> bytes:
    """Verify, optimize (O``opt``) and emit ``module`` (or its text) as an object file."""
    return emit_variants(module, [target], opt, unswitch)[0]


def optimize(module: ir.Module | str, target: Target, opt: int = 3, unswitch: bool = True) -> llvm.ModuleRef:
    """``module`` (or its text) verified and optimized (O``opt``) for ``target``, with O3's
    nontrivial loop unswitching or without (``unswitch``, see :data:`UNSWITCHING`). On wasm32
    the vector constants of its loops are then loaded before them (:func:`.vconst.hoist`)."""
    mod = llvm.parse_assembly(module if isinstance(module, str) else str(module))
    mod.verify()
    if opt:
        _unswitching(unswitch)
        pto = llvm.create_pipeline_tuning_options(speed_level=opt)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pb = llvm.create_pass_builder(target.machine(), pto)
        try:
            pb.getModulePassManager().run(mod, pb)
        finally:
            _unswitching(True)  # LLVM's own default again, for passes run elsewhere in this process
        if target.is_wasm and vconst.ENABLED:
            mod = llvm.parse_assembly(vconst.hoist(str(mod)))
            mod.verify()
    return mod


def emit_variants(module: ir.Module | str, targets: Sequence[Target], opt: int = 3,
                  unswitch: bool = True) -> list[bytes]:
    """``module`` (or its text) verified and optimized (O``opt``) once, for the last target,
    then emitted as an object file for each target. The wasm32 variants differ only in
    instruction selection (relaxed SIMD turns the optimized IR's ``contract`` multiply-adds
    into ``f32x4.relaxed_madd``), so one optimization, most of an emission's time (bert2: 0.97
    of 1.55 s), serves both. The last target's object is the one a separate emission gives;
    the others come from a bitcode copy of the optimized module, since code generation
    rewrites the module it runs on (LSR, CodeGenPrepare)."""
    machines = [t.machine() for t in targets]
    mod = optimize(module, targets[-1], opt, unswitch)
    copies = [llvm.parse_bitcode(mod.as_bitcode()) for _ in targets[:-1]]
    return [tm.emit_object(m) for tm, m in zip(machines, copies + [mod])]
