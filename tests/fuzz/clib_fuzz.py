"""A fuzz campaign of the C libraries (wasm_runtime/clib: the image decoders, the regex Pike
VM, the string kernels), natively under sanitizers: natively, an image parser reading
untrusted bytes runs in the host's process.

The libraries and a driver (tests/fuzz/clib_fuzz.c, which says what a case is and which
oracles it checks) are compiled into one executable:

- ``--cc gcc`` (the default when gcc can link AddressSanitizer): ``gcc -fsanitize=address,
  undefined -fno-sanitize-recover=all``: any out-of-bounds access, use after free or
  undefined behaviour is fatal;
- ``--cc zig`` (zig's clang, the compiler the modules are built with): zig 0.17 links no
  AddressSanitizer runtime (``-fsanitize=address`` fails at the link with undefined
  ``__asan_*``), so ``-fsanitize=undefined`` only; the driver then places every buffer
  the libraries read or write right before a page that cannot be read, so an access past
  its end faults.

The cases are mutations of a seed corpus: images of every format the decoder reads (BMP:
24/32-bit, bitfields, 16-bit, 1/4/8-bit palettes, OS/2, top-down, RLE4/RLE8; PNM P1-P6;
TIFF little- and big-endian, strips, planar, 1-16 bits, palette; PNG of every colour type
and depth, interlaced, with every filter, stored/fixed/dynamic deflate; JPEG baseline,
progressive, restart intervals, every sampling layout, grayscale, Adobe), written by Pillow
and by tests/test_clib_image.py's writers; RegexFullMatch programs the compiler makes for a
set of patterns (sometimes with words changed, which the VM must verify away) over mutated
strings; StringSplit, StringNormalizer, StringConcat and Equal over mutated text; string
constants' packed bytes, sometimes tampered with. The mutations: bit flips, byte sets to boundary values, truncations, insertions, deletions,
duplications, splices of two seeds, and length fields corrupted where the formats keep them
(PNG chunk lengths, with the chunk's CRC recomputed half the time so the decoder reads on;
JPEG segment lengths; TIFF entry counts and offsets; BMP and PNM header numbers), and for
PNG, the inflated image data itself mutated and compressed again.

    python -m tests.fuzz.clib_fuzz [--cases N (20,000)] [--seed S] [--cc gcc|zig|coverage|auto] [--out DIR]
    python -m tests.fuzz.clib_fuzz --replay FILE [--cc ...]

``--cc coverage`` builds without sanitizers and with gcc's line counts, and prints how many
of each library's lines the cases ran (gcov).

A finding is a sanitizer report, a crash (a signal), a hang (a case past the driver's alarm)
or a failed oracle; each is saved as DIR/finding-SEED-CASE.bin (the driver's input: replay
it with --replay) with the report beside it (.txt). The same seed draws the same cases.
Exits 1 if there is a finding.
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter
from pathlib import Path

import numpy as np

from toolkit import zig
from toolkit.link import CLIB, VM

DRIVER = Path(__file__).with_name("clib_fuzz.c")
CLIB_DIR, CLIB_SOURCES, VM_DIR = CLIB.dir, CLIB.sources, VM.dir  # the unit as the modules build it
DEFAULT_OUT = Path(tempfile.gettempdir()) / "symwasm-clib-fuzz"
BATCH = 100  # cases per driver process
STATUS = {0: "ok", 1: "refused", 5: "internal", 6: "cancelled", 100: "too large to decode"}


# ---- building the driver ------------------------------------------------------------------


@functools.cache
def _gcc_has_asan() -> bool:
    gcc = shutil.which("gcc")
    if not gcc:
        return False
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "t.c"
        src.write_text("int main(void) { return 0; }\n")
        r = subprocess.run([gcc, "-fsanitize=address,undefined", str(src), "-o", str(Path(tmp) / "t")],
                           capture_output=True)
        return r.returncode == 0


def compiler(choice: str = "auto") -> str:
    if choice == "auto":
        return "gcc" if _gcc_has_asan() else "zig"
    return choice


def sanitizers(cc: str) -> str:
    return {"gcc": "AddressSanitizer + UndefinedBehaviorSanitizer",
            "zig": "UndefinedBehaviorSanitizer + guard pages (zig links no AddressSanitizer runtime)",
            "coverage": "none (gcc --coverage: guard pages only, line counts)"}[cc]


@functools.cache
def build(cc: str, clib_dir: Path = CLIB_DIR) -> Path:
    """The driver executable for ``cc`` ("gcc", "zig", or "coverage": gcc's line counts,
    no sanitizer), cached by the sources' hash. ``clib_dir``: the libraries' sources (a
    test gives a copy with a bug put in)."""
    sources = [clib_dir / s for s in CLIB_SOURCES] + [DRIVER]
    common = ["-O1", "-g", "-std=c11", "-fno-omit-frame-pointer", "-I", str(clib_dir), "-I", str(VM_DIR)]
    if cc == "gcc":
        cmd = ["gcc", *common, "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
    elif cc == "coverage":
        cmd = ["gcc", *common, "-O0", "--coverage"]
    else:
        cmd = [*zig.command(), "cc", *common, "-fsanitize=undefined"]
    h = hashlib.sha256(" ".join(cmd).encode())
    for path in sources + sorted(clib_dir.glob("*.h")) + sorted(VM_DIR.glob("*.h")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    out = Path(tempfile.gettempdir()) / f"symwasm-clib-fuzz-{cc}-{h.hexdigest()[:12]}"
    if cc == "coverage":  # its own directory: the counts (.gcda) are written beside the objects
        out.mkdir(exist_ok=True)
        for stale in out.glob("*.gcda"):
            stale.unlink()
        out = out / "clib_fuzz"
    if not out.exists():
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        r = subprocess.run(cmd + [str(s) for s in sources] + ["-o", str(tmp)], capture_output=True, text=True,
                           cwd=out.parent)
        if r.returncode != 0:
            raise RuntimeError(f"building the fuzz driver with {cc} failed:\n{r.stderr}")
        os.replace(tmp, out)
    return out


# ---- the seed corpus -------------------------------------------------------------------------


@functools.cache
def image_seeds() -> tuple[tuple[str, bytes], ...]:
    """Valid files of every format and layout the decoder reads."""
    from tests import test_clib_image as ti  # its writers (and Pillow)

    rng = np.random.default_rng(2026)
    seeds: dict[str, bytes] = dict(ti.sample_files())
    im = ti.random_image(rng, 21, 17)
    small = ti.random_image(rng, 9, 11)
    for mode in ("RGB", "L", "P", "1", "RGBA", "LA", "I;16"):
        try:
            seeds[f"png-{mode}"] = ti.saved(small.convert(mode), "PNG")
        except (OSError, ValueError):
            pass
    for mode in ("RGB", "L", "1", "P"):
        seeds[f"bmp-{mode}"] = ti.saved(small.convert(mode), "BMP")
        seeds[f"tiff-{mode}"] = ti.saved(small.convert(mode), "TIFF")
    seeds["tiff-rgba"] = ti.saved(small.convert("RGBA"), "TIFF")
    for mode in ("L", "1"):
        seeds[f"pnm-{mode}"] = ti.saved(small.convert(mode), "PPM")
    for q, sub in ((50, 0), (90, 1), (75, 2)):
        seeds[f"jpeg-q{q}-s{sub}"] = ti.saved(im, "JPEG", quality=q, subsampling=sub)
    seeds["jpeg-gray"] = ti.saved(im.convert("L"), "JPEG")
    seeds["jpeg-gray-prog"] = ti.saved(im.convert("L"), "JPEG", progressive=True)
    seeds["jpeg-prog-444"] = ti.saved(im, "JPEG", progressive=True, subsampling=0, quality=95)
    seeds["jpeg-cmyk"] = ti.saved(small.convert("CMYK"), "JPEG")
    # layouts Pillow does not write
    h, w = 3, 5
    px = rng.integers(0, 256, (h, w, 4), dtype=np.uint8)
    rows24 = [px[y, :, :3].tobytes() for y in range(h)]
    rows32 = [px[y].tobytes() for y in range(h)]
    seeds["bmp-topdown"] = ti.bmp_file(24, w, h, rows24, top_down=True)
    seeds["bmp-os2"] = ti.bmp_file(24, w, h, rows24, header=12)
    seeds["bmp-bitfields"] = ti.bmp_file(32, w, h, rows32, compression=3,
                                         masks=struct.pack("<IIII", 0xFF000000, 0xFF00, 0xFF, 0xFF0000), header=124)
    v16 = rng.integers(0, 65536, (h, w), dtype=np.uint16)
    seeds["bmp-565"] = ti.bmp_file(16, w, h, [v16[y].astype("<u2").tobytes() for y in range(h)], compression=3,
                                   masks=struct.pack("<III", 0xF800, 0x7E0, 0x1F))
    pal = rng.integers(0, 256, (16, 4), dtype=np.uint8).tobytes()
    seeds["bmp-4bit"] = ti.bmp_file(4, w, h, [rng.integers(0, 256, 3, dtype=np.uint8).tobytes() for _ in range(h)],
                                    palette=pal, colors=16)
    rgb = rng.integers(0, 256, (h, w, 3))
    seeds["pnm-p3"] = b"P3\n# c\n%d %d\n255\n" % (w, h) + " ".join(map(str, rgb.reshape(-1))).encode()
    seeds["pnm-p2"] = b"P2 %d %d 100 " % (w, h) + " ".join(map(str, (rgb[:, :, 0] * 100 // 255).reshape(-1))).encode()
    seeds["pnm-p1"] = b"P1\n%d %d\n" % (w, h) + "".join(map(str, rng.integers(0, 2, h * w))).encode()
    seeds["pnm-p6-16"] = b"P6\n%d %d\n65535\n" % (w, h) + rng.integers(0, 256, h * w * 6, dtype=np.uint8).tobytes()
    rgb8 = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
    for be in (False, True):
        e = "be" if be else "le"
        seeds[f"tiff-strips-{e}"] = ti.tiff_file(5, 6, 2, 8, 3, rgb8.tobytes(), big_endian=be, rows_per_strip=4)
        seeds[f"tiff-planar-{e}"] = ti.tiff_file(5, 6, 2, 8, 3, rgb8.transpose(2, 0, 1).tobytes(), big_endian=be,
                                                 planar=2, rows_per_strip=4)
        seeds[f"tiff-16-{e}"] = ti.tiff_file(5, 6, 2, 16, 3, rng.integers(0, 65536, (6, 5, 3)).astype(
            ">u2" if be else "<u2").tobytes(), big_endian=be)
    v = rng.integers(0, 4, (6, 5)).astype(np.uint8)
    seeds["tiff-gray2"] = ti.tiff_file(5, 6, 1, 2, 1, np.packbits(
        np.unpackbits(v[:, :, None], 2)[:, :, 6:].reshape(6, -1), axis=1).tobytes(), rows_per_strip=3)
    for ct, depth, ch in ((0, 1, 1), (0, 4, 1), (2, 16, 3), (3, 2, 1), (4, 8, 2), (6, 16, 4)):
        top = 1 << depth
        samples = rng.integers(0, top, (5, 7, ch)).astype(np.uint16 if depth == 16 else np.uint8)
        palette = rng.integers(0, 256, 3 * top, dtype=np.uint8).tobytes() if ct == 3 else None
        for interlace in (False, True):
            seeds[f"png-t{ct}-d{depth}-i{int(interlace)}"] = ti.png_file(samples, depth, ct, interlace=interlace,
                                                                         palette=palette, seed=depth, idat_split=5)
    seeds["png-stored"] = ti.png_file(rng.integers(0, 256, (4, 6, 3), dtype=np.uint8), 8, 2, level=0)
    for factors in (((2, 2), (1, 1), (1, 1)), ((1, 2), (1, 1), (1, 1)), ((4, 1), (1, 1), (1, 1)),
                    ((2, 2), (2, 1), (1, 1)), ((2, 2),)):
        planes = ti.sampled_planes(rng, list(factors), 13, 9)
        name = "x".join(f"{a}{b}" for a, b in factors)
        seeds[f"jpeg-{name}"] = ti.jpeg_file(planes, list(factors), 13, 9, restart=2,
                                             ids=(1, 2, 3)[:len(factors)])
        seeds[f"jpeg-{name}-scans"] = ti.jpeg_file(planes, list(factors), 13, 9, interleaved=False,
                                                   ids=(1, 2, 3)[:len(factors)])
    seeds["tiff-fill2"] = ti.tiff_file(5, 6, 0, 1, 1, rng.integers(0, 256, 6, dtype=np.uint8).tobytes(), fill=2)
    seeds["tiff-big"] = b"II+\0\x08\0\0\0" + bytes(24)  # BigTIFF: refused
    seeds["webp"] = b"RIFF\x10\0\0\0WEBPVP8 " + bytes(8)
    seeds["jp2"] = b"\0\0\0\x0CjP  \r\n\x87\n" + bytes(8)
    seeds["pfm"] = b"Pf\n2 2\n-1.0\n" + bytes(16)
    seeds["jpeg-adobe"] = ti.jpeg_file(ti.sampled_planes(rng, [(1, 1)] * 3, 8, 8), [(1, 1)] * 3, 8, 8, jfif=False,
                                       adobe=0, ids=(82, 71, 66))
    return tuple(sorted(seeds.items()))


PATTERNS = (r"a+b", r"(a|b)*c[^x-z]+\b(?m)$\d{1,3}", r"[\p{L}\d_]+@\w+\.(com|org)", r"(?i)straße|ΣΑΣ",
            r"^\s*(\d+)(\.\d*)?\s*$", r"(?s).{2,5}", r"[^\x00-\x7f]+", r"\Bfoo\b|x{0,3}y", r"(ab|a)*b?",
            r"[[:alpha:]][[:alnum:]]{0,7}", r"(?m)^a+$\n?^b|\bc\b")
WORDS = ("", " ", "a", "bé", "日本語", "x y  z", "emoji 🎉!", "Straße", "ΑΒΓ δ", "ΣΑΣ Σ", "İi", "tab\tsep",
         "end ", "\u2028line\u3000sep\x1c", "ﬃ", "ǅ", "aaab", "foo bar", "12.5", "user_1@ex.org", "\x00nul",
         "aa\nb", "\n", "c", " c ")
RAW = (b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe6\x97", b"\x80abc", b"\xce\xa3")


@functools.cache
def regex_programs() -> tuple[tuple[int, ...], ...]:
    from toolkit.regex import compile_pattern

    return tuple(tuple(compile_pattern(p)) for p in PATTERNS)


# ---- mutations -----------------------------------------------------------------------------

INTERESTING8 = (0, 1, 0x7F, 0x80, 0xFF, 0x10, 0x40)
INTERESTING32 = (0, 1, 2, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000,
                 0xFFFFFFFF, 0xFFFFFFFE, 0x40000000)


def _png_chunks(data: bytes) -> list[tuple[int, int]]:
    """(offset, length) of each chunk of a PNG, as far as they parse."""
    out, at = [], 8
    while at + 12 <= len(data):
        n = struct.unpack(">I", data[at:at + 4])[0]
        out.append((at, n))
        if at + 12 + n > len(data):
            break
        at += 12 + n
    return out


def _fix_png_crcs(b: bytearray) -> None:
    for at, n in _png_chunks(bytes(b)):
        if at + 12 + n <= len(b):
            b[at + 8 + n:at + 12 + n] = struct.pack(">I", zlib.crc32(bytes(b[at + 4:at + 8 + n])))


def _length_fields(data: bytes) -> list[tuple[int, int, str]]:
    """(offset, bytes, endianness '<' or '>') of the length, count and offset fields a
    format keeps in this file."""
    fields = []
    if data.startswith(b"\x89PNG"):
        for at, _ in _png_chunks(data):
            fields.append((at, 4, ">"))
        fields += [(16, 4, ">"), (20, 4, ">")]  # IHDR width, height
    elif data.startswith(b"\xff\xd8"):
        i = 2
        while i + 4 <= len(data):
            if data[i] == 0xFF and data[i + 1] not in (0x00, 0xFF, 0xD8, 0xD9) and not 0xD0 <= data[i + 1] <= 0xD7:
                fields.append((i + 2, 2, ">"))
                if data[i + 1] in (0xC0, 0xC1, 0xC2):  # frame: precision, height, width
                    fields += [(i + 5, 2, ">"), (i + 7, 2, ">")]
                if data[i + 1] == 0xDA:  # a scan: the entropy-coded data follows
                    i += 2 + int.from_bytes(data[i + 2:i + 4], "big")
                    continue
                i += 2 + int.from_bytes(data[i + 2:i + 4], "big")
            else:
                i += 1
    elif data[:2] in (b"II", b"MM"):
        e = "<" if data[:2] == b"II" else ">"
        if len(data) >= 8:
            ifd = struct.unpack(e + "I", data[4:8])[0]
            fields.append((4, 4, e))
            if ifd + 2 <= len(data):
                fields.append((ifd, 2, e))
                count = struct.unpack(e + "H", data[ifd:ifd + 2])[0]
                for k in range(min(count, 64)):
                    at = ifd + 2 + 12 * k
                    if at + 12 <= len(data):
                        fields += [(at + 2, 2, e), (at + 4, 4, e), (at + 8, 4, e)]  # type, count, value/offset
    elif data.startswith(b"BM"):
        fields += [(2, 4, "<"), (10, 4, "<"), (14, 4, "<"), (18, 4, "<"), (22, 4, "<"), (28, 2, "<"),
                   (30, 4, "<"), (34, 4, "<"), (46, 4, "<")]
    return [f for f in fields if f[0] + f[1] <= len(data)]


def _pnm_numbers(data: bytes, rng) -> bytes:
    """A PNM with one of its header numbers replaced."""
    import re

    nums = list(re.finditer(rb"\d+", data[:64]))
    if not nums:
        return data
    m = nums[int(rng.integers(len(nums)))]
    new = str(int(rng.choice([0, 1, 2, 255, 256, 65535, 65536, 2**31 - 1, 2**32, 10**12]))).encode()
    return data[:m.start()] + new + data[m.end():]


def _mutate_png_pixels(data: bytes, rng) -> bytes | None:
    """The PNG with its inflated IDAT data changed (filter bytes, samples) and compressed again."""
    chunks = _png_chunks(data)
    idat = [(at, n) for at, n in chunks if data[at + 4:at + 8] == b"IDAT" and at + 12 + n <= len(data)]
    if not idat:
        return None
    try:
        raw = bytearray(zlib.decompress(b"".join(data[at + 8:at + 8 + n] for at, n in idat)))
    except zlib.error:
        return None
    if not raw:
        return None
    for _ in range(int(rng.integers(1, 6))):
        k = int(rng.integers(len(raw)))
        raw[k] = int(rng.choice([0, 1, 2, 3, 4, 5, 0xFF, int(rng.integers(256))]))
    if rng.random() < 0.3:
        raw = raw[:int(rng.integers(len(raw) + 1))] if rng.random() < 0.5 else raw + bytes(int(rng.integers(1, 64)))
    body = zlib.compress(bytes(raw), int(rng.integers(0, 10)))
    chunk = struct.pack(">I", len(body)) + b"IDAT" + body + struct.pack(">I", zlib.crc32(b"IDAT" + body))
    first, last = idat[0][0], idat[-1][0] + 12 + idat[-1][1]
    return data[:first] + chunk + data[last:]


def mutate_bytes(data: bytes, rng, other: bytes = b"", structured: bool = True) -> bytes:
    """``data`` with one to a few mutations."""
    b = bytearray(data)
    for _ in range(int(rng.integers(1, 4))):
        kind = int(rng.integers(11 if structured else 7))
        n = len(b)
        if kind == 0 and n:  # bit flips
            for _ in range(int(rng.integers(1, 5))):
                k = int(rng.integers(n))
                b[k] ^= 1 << int(rng.integers(8))
        elif kind == 1 and n:  # a byte set to a boundary value
            b[int(rng.integers(n))] = int(rng.choice(INTERESTING8))
        elif kind == 2 and n:  # truncation
            del b[int(rng.integers(n)):]
        elif kind == 3:  # insertion
            k = int(rng.integers(n + 1))
            b[k:k] = rng.integers(0, 256, int(rng.integers(1, 32)), dtype=np.uint8).tobytes()
        elif kind == 4 and n:  # deletion
            k = int(rng.integers(n))
            del b[k:k + int(rng.integers(1, 64))]
        elif kind == 5 and n:  # duplication of a chunk
            k = int(rng.integers(n))
            piece = b[k:k + int(rng.integers(1, 256))]
            j = int(rng.integers(n + 1))
            b[j:j] = piece
        elif kind == 6 and other:  # splice: this file's head, another's tail
            k, j = int(rng.integers(len(b) + 1)), int(rng.integers(len(other) + 1))
            b = b[:k] + bytearray(other[j:])
        elif kind in (7, 8):  # a length, count or offset field corrupted
            fields = _length_fields(bytes(b))
            if fields:
                at, size, e = fields[int(rng.integers(len(fields)))]
                old = int.from_bytes(b[at:at + size], "little" if e == "<" else "big")
                choice = rng.random()
                new = int(rng.choice(INTERESTING32)) if choice < 0.5 else old + int(rng.integers(-16, 17))
                new %= 1 << (8 * size)
                b[at:at + size] = new.to_bytes(size, "little" if e == "<" else "big")
            elif b[:1] == b"P":
                b = bytearray(_pnm_numbers(bytes(b), rng))
        elif kind == 9 and bytes(b[:4]) == b"\x89PNG":
            new = _mutate_png_pixels(bytes(b), rng)
            if new is not None:
                b = bytearray(new)
        elif kind == 10 and b[:1] == b"P":
            b = bytearray(_pnm_numbers(bytes(b), rng))
    if structured and bytes(b[:4]) == b"\x89PNG" and rng.random() < 0.5:
        _fix_png_crcs(b)  # so that the decoder reads past the chunk it would refuse
    return bytes(b)


# ---- cases -------------------------------------------------------------------------------------


def _blob(b: bytes) -> bytes:
    return struct.pack("<I", len(b)) + b


def _strings(items: list[bytes]) -> bytes:
    return struct.pack("<I", len(items)) + b"".join(_blob(s) for s in items)


def encode_image(data: bytes, pixel_format: int, cancel: bool = False) -> bytes:
    return b"I" + bytes([pixel_format, int(cancel)]) + data


def encode_regex(program, strings: list[bytes], tampered: bool) -> bytes:
    return (b"R" + struct.pack("<I", len(program)) + struct.pack(f"<{len(program)}q", *program)
            + bytes([int(tampered)]) + _strings(strings))


def encode_split(strings: list[bytes], delimiter: bytes | None, maxsplit: int) -> bytes:
    return (b"T\0" + bytes([delimiter is not None]) + struct.pack("<q", maxsplit) + _blob(delimiter or b"")
            + _strings(strings))


def encode_normalize(strings: list[bytes], case_change: int, case_sensitive: bool, stopwords: list[bytes]) -> bytes:
    return (b"T\1" + bytes([case_change, int(case_sensitive)]) + struct.pack("<I", len(stopwords))
            + b"".join(_blob(s) for s in stopwords) + _strings(strings))


def encode_binary(a: list[bytes], b: list[bytes], concat: bool) -> bytes:
    return b"T" + bytes([2 if concat else 3]) + _strings(a) + _strings(b)


def packed_strings(items: list[bytes]) -> bytes:
    """A string constant as the weights hold it (codegen/clib.pack_strings): the elements
    {offset, length} from the start of these bytes, then the text."""
    head, text, at = b"", b"", 16 * len(items)
    for s in items:
        head += struct.pack("<qq", at + len(text), len(s))
        text += s
    return head + text


def encode_unpack(count: int, packed: bytes, tampered: bool) -> bytes:
    return b"T\4" + bytes([int(tampered)]) + struct.pack("<I", count) + _blob(packed)


def _text(rng) -> bytes:
    """A string: words and raw bytes joined, then mutated sometimes."""
    parts = []
    for _ in range(int(rng.integers(0, 5))):
        parts.append(WORDS[int(rng.integers(len(WORDS)))].encode() if rng.random() < 0.8
                     else RAW[int(rng.integers(len(RAW)))])
    s = b"".join(parts)
    if rng.random() < 0.4:
        s = mutate_bytes(s, rng, structured=False)
    return s


def _texts(rng, n: int | None = None) -> list[bytes]:
    return [_text(rng) for _ in range(int(rng.integers(0, 8)) if n is None else n)]


def make_case(seed: int, index: int) -> tuple[str, bytes]:
    """(what, driver input) of case ``index``: the same for the same seed and checkout."""
    rng = np.random.default_rng([seed, index])
    r = rng.random()
    if r < 0.7:
        seeds = image_seeds()
        name, data = seeds[int(rng.integers(len(seeds)))]
        other = seeds[int(rng.integers(len(seeds)))][1]
        mutated = mutate_bytes(data, rng, other)
        return f"image {name}", encode_image(mutated, int(rng.integers(3)), cancel=rng.random() < 0.02)
    if r < 0.8:
        programs = regex_programs()
        k = int(rng.integers(len(programs)))
        program = list(programs[k])
        tampered = rng.random() < 0.3
        if tampered:
            for _ in range(int(rng.integers(1, 4))):
                j = int(rng.integers(len(program)))
                program[j] = int(rng.choice([program[j] ^ (1 << int(rng.integers(64 if j else 32))),
                                             int(rng.integers(-5, len(program) + 5))]))
                program[j] = (program[j] + (1 << 63)) % (1 << 64) - (1 << 63)
        return f"regex {PATTERNS[k]!r}{' tampered' if tampered else ''}", encode_regex(program, _texts(rng), tampered)
    op = int(rng.integers(5))
    if op == 4:  # a string constant, its packed bytes sometimes tampered with (the module's weights)
        items = _texts(rng)
        packed = packed_strings(items)
        tampered = rng.random() < 0.5
        if tampered:
            packed = mutate_bytes(packed, rng, structured=False)
        count = len(items) + (int(rng.integers(-1, 3)) if tampered else 0)
        return "text unpack", encode_unpack(max(count, 0), packed, tampered)
    if op == 0:
        delimiter = None if rng.random() < 0.4 else _text(rng)[:int(rng.integers(0, 6))]
        maxsplit = int(rng.choice([-1, 0, 1, 2, 5, -(2**63), 2**63 - 1]))
        return "text split", encode_split(_texts(rng), delimiter, maxsplit)
    if op == 1:
        stop = [_text(rng) for _ in range(int(rng.integers(0, 4)))]
        return "text normalize", encode_normalize(_texts(rng), int(rng.integers(3)), rng.random() < 0.5, stop)
    a = _texts(rng)
    b = _texts(rng, 1 if rng.random() < 0.5 else len(a))
    return f"text {'concat' if op == 2 else 'equal'}", encode_binary(a, b, op == 2)


# ---- running ----------------------------------------------------------------------------------


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"exit {code}"


def run_batch(exe: Path, files: list[Path], timeout: float) -> tuple[dict[int, int], int | None, str]:
    """Run the driver on files: ({index: status} of the cases done, the index of the case it
    died on or None, its report)."""
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:symbolize=1:allocator_may_return_null=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    try:
        r = subprocess.run([str(exe), *map(str, files)], capture_output=True, text=True, timeout=timeout, env=env,
                           errors="replace")
        out, err, code = r.stdout, r.stderr, r.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err, code = "the batch ran past its timeout", -signal.SIGKILL
    done, started = {}, None
    for line in out.splitlines():
        parts = line.split()
        if parts[:1] == ["start"]:
            started = int(parts[1])
        elif parts[:1] == ["done"]:
            done[int(parts[1])] = int(parts[2])
            started = None
    if code == 0 and started is None:
        return done, None, ""
    oracle = [line for line in out.splitlines() if line.startswith("ORACLE")]
    report = "\n".join(oracle) + ("\n" if oracle else "") + f"driver ended with {_signal_name(code)}\n" + err[-20000:]
    return done, started if started is not None else len(done), report


def campaign(cases: int, seed: int = 0, cc: str = "auto", out: Path = DEFAULT_OUT, progress=print,
             clib_dir: Path = CLIB_DIR) -> dict:
    """Run ``cases`` cases; returns the figures (and saves each finding under ``out``)."""
    cc = compiler(cc)
    exe = build(cc, clib_dir)
    t0 = last = time.monotonic()
    outcomes: Counter = Counter()
    findings: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="symwasm-clib-fuzz-") as tmp:
        tmp = Path(tmp)
        next_case = 0
        while next_case < cases:
            batch = list(range(next_case, min(cases, next_case + BATCH)))
            whats, files = {}, []
            for i in batch:
                what, data = make_case(seed, i)
                f = tmp / f"case-{i}.bin"
                f.write_bytes(data)
                whats[i] = what
                files.append(f)
            done, died, report = run_batch(exe, files, timeout=60 + 30 * len(files))
            for k, status in done.items():
                outcomes[(whats[batch[k]].split()[0], STATUS.get(status, f"status {status}"))] += 1
            if died is None:
                next_case = batch[-1] + 1
            else:
                i = batch[died]
                out.mkdir(parents=True, exist_ok=True)
                repro = out / f"finding-{seed}-{i}.bin"
                repro.write_bytes(files[died].read_bytes())
                repro.with_suffix(".txt").write_text(f"case {i} of seed {seed}: {whats[i]}\n{report}")
                first = next((ln for ln in report.splitlines() if "ERROR" in ln or "ORACLE" in ln
                              or "runtime error" in ln or "panic" in ln), report.splitlines()[0])
                findings.append({"case": i, "what": whats[i], "reproducer": str(repro), "first": first})
                outcomes[(whats[i].split()[0], "FINDING")] += 1
                progress(f"finding: case {i} ({whats[i]}): {first}\n  reproducer: {repro}")
                next_case = i + 1
            for f in files:
                f.unlink(missing_ok=True)
            if time.monotonic() - last > 30:
                last = time.monotonic()
                progress(f"{next_case} cases, {last - t0:.0f} s, {len(findings)} findings")
    result = {"cases": cases, "seed": seed, "cc": cc, "sanitizers": sanitizers(cc), "seconds": time.monotonic() - t0,
              "outcomes": outcomes, "findings": findings, "image_seeds": len(image_seeds())}
    if cc == "coverage":
        result["coverage"] = line_coverage(exe.parent)
    return result


def line_coverage(build_dir: Path) -> dict[str, str]:
    """gcov's "Lines executed" of each library source after a coverage run."""
    r = subprocess.run(["gcov", "-n", *sorted(str(p) for p in build_dir.glob("*.gcda"))], capture_output=True,
                       text=True, cwd=build_dir)
    out, name = {}, None
    for line in r.stdout.splitlines():
        if line.startswith("File "):
            name = Path(line.split("'")[1]).name
        elif line.startswith("Lines executed") and name in CLIB_SOURCES:
            out[name] = line.split(":", 1)[1]
            name = None
    return out


def replay(path: Path, cc: str = "auto") -> int:
    exe = build(compiler(cc))
    done, died, report = run_batch(exe, [path], timeout=120)
    if died is not None:
        print(report)
    else:
        status = done.get(0)
        print(f"no finding: status {status} ({STATUS.get(status, '?')})")
    return 1 if died is not None else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cc", choices=("auto", "gcc", "zig", "coverage"), default="auto")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--replay", type=Path)
    args = ap.parse_args(argv)
    if args.replay:
        return replay(args.replay, args.cc)
    r = campaign(args.cases, args.seed, args.cc, args.out)
    print(f"\n{r['cases']} cases (seed {r['seed']}, {r['image_seeds']} seed images) in {r['seconds']:.0f} s, "
          f"built with {r['cc']}: {r['sanitizers']}")
    kinds = sorted({k for k, _ in r["outcomes"]})
    for kind in kinds:
        row = ", ".join(f"{n} {what}" for (k, what), n in sorted(r["outcomes"].items()) if k == kind)
        print(f"  {kind}: {row}")
    for source, lines in r.get("coverage", {}).items():
        print(f"  {source}: lines executed {lines}")
    print(f"findings: {len(r['findings'])}")
    for f in r["findings"]:
        print(f"  case {f['case']} ({f['what']}): {f['first']}\n    {f['reproducer']}")
    return 1 if r["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
