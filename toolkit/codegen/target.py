"""Targets and object emission: one LLVM module per model, optimized with the new pass
manager and emitted as an object for wasm32 or the host."""
from __future__ import annotations

import platform
from dataclasses import dataclass
from functools import lru_cache

import llvmlite.binding as llvm
from llvmlite import ir


@lru_cache(maxsize=None)
def _init() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


@dataclass(frozen=True)
class Target:
    name: str  # "wasm32" or "native"
    triple: str
    cpu: str
    features: str
    zig_target: str  # for `python -m ziglang cc -target`
    wasm_features: tuple[str, ...] = ()  # what a host must support, for the metadata

    @property
    def is_wasm(self) -> bool:
        return self.name == "wasm32"

    @property
    def f32_lanes(self) -> int:
        """float32 lanes of the widest vectors tiled kernels use: SIMD128 on wasm32, AVX2
        registers on x86 hosts that have them (native code is for the host)."""
        if self.is_wasm or not self.triple.startswith("x86_64"):
            return 4
        return 8 if "+avx2" in self.features.split(",") else 4

    def machine(self) -> llvm.TargetMachine:
        _init()
        return llvm.Target.from_triple(self.triple).create_target_machine(
            cpu=self.cpu, features=self.features, opt=3, reloc="pic", codemodel="default")


WASM_FEATURES = ("simd128", "bulk-memory", "nontrapping-fptoint", "sign-ext", "mutable-globals")


def get_target(name: str) -> Target:
    if name == "wasm32":
        return Target("wasm32", "wasm32-unknown-unknown", "generic",
                      ",".join("+" + f for f in WASM_FEATURES), "wasm32-freestanding",
                      WASM_FEATURES)
    if name == "native":
        _init()
        arch = platform.machine().lower()
        arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)
        if platform.system() != "Linux":
            raise ValueError(f"native target: only Linux hosts are supported, not {platform.system()}")
        return Target("native", llvm.get_process_triple(), llvm.get_host_cpu_name(),
                      llvm.get_host_cpu_features().flatten(), f"{arch}-linux-gnu")
    raise ValueError(f"unknown target '{name}' (choose wasm32 or native)")


def new_module(target: Target, name: str) -> ir.Module:
    m = ir.Module(name=name)
    m.triple = target.triple
    m.data_layout = str(target.machine().target_data)
    return m


def emit_object(module: ir.Module, target: Target, opt: int = 3) -> bytes:
    """Verify, optimize (O``opt``) and emit ``module`` as an object file."""
    tm = target.machine()
    mod = llvm.parse_assembly(str(module))
    mod.verify()
    if opt:
        pto = llvm.create_pipeline_tuning_options(speed_level=opt)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
    return tm.emit_object(mod)
