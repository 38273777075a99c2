"""The x86 ISA features a native library may require, and whether this machine has them.

The compiler records the features its code may use (LLVM's names, ``CPU_FLAGS``' keys) in
the library; the native host compares them with the ``flags`` line of ``/proc/cpuinfo``
before it loads the library, so a library built for a CPU this machine is not fails with
the features it lacks instead of an illegal instruction in the middle of a run.
"""
from __future__ import annotations

from functools import lru_cache

# LLVM feature name -> Linux's /proc/cpuinfo flag, in the order messages list them. Only
# extensions a CPU may lack (x86-64 itself guarantees SSE2), and only ones LLVM emits for
# ordinary code; each also has a C macro (__SSE4_2__, __AVX512F__) by which the compiler
# learns a named CPU's features from clang.
CPU_FLAGS = {
    "sse3": "pni", "ssse3": "ssse3", "sse4.1": "sse4_1", "sse4.2": "sse4_2", "popcnt": "popcnt",
    "avx": "avx", "avx2": "avx2", "fma": "fma", "f16c": "f16c", "bmi": "bmi1", "bmi2": "bmi2",
    "lzcnt": "abm", "movbe": "movbe", "adx": "adx", "aes": "aes", "pclmul": "pclmulqdq",
    "sha": "sha_ni", "vaes": "vaes", "vpclmulqdq": "vpclmulqdq", "gfni": "gfni",
    "avxvnni": "avx_vnni",
    "avx512f": "avx512f", "avx512cd": "avx512cd", "avx512bw": "avx512bw", "avx512dq": "avx512dq",
    "avx512vl": "avx512vl", "avx512ifma": "avx512ifma", "avx512vbmi": "avx512vbmi",
    "avx512vbmi2": "avx512_vbmi2", "avx512vnni": "avx512_vnni", "avx512bitalg": "avx512_bitalg",
    "avx512vpopcntdq": "avx512_vpopcntdq", "avx512bf16": "avx512_bf16", "avx512fp16": "avx512_fp16",
}


@lru_cache(maxsize=None)
def host_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str] | None:
    """The flags of this machine's first processor, or None where they cannot be read."""
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "flags":
                    return frozenset(value.split())
    except OSError:
        return None
    return None


def missing_features(features: list[str], flags: frozenset[str] | None = None) -> list[str] | None:
    """Those of ``features`` (LLVM names) this machine lacks; None when its flags cannot be
    read. A name this table does not know is not checked."""
    flags = host_flags() if flags is None else flags
    if flags is None:
        return None
    return [f for f in features if f in CPU_FLAGS and CPU_FLAGS[f] not in flags]
