"""The image kernels of wasm_runtime/clib/sw_image.c (sw_image_probe, sw_image_decode), called
natively through tests/clib.py, against Pillow (the reference onnx uses): onnx's own node test
cases; files Pillow writes and files written here byte by byte (layouts Pillow does not write:
top-down, 16-bit and RLE BMP, bitfields, plain PNM, big-endian and planar TIFF, interlaced PNG
with every filter, JPEG with any sampling factors and one scan per component); JPEG bit-exact
against libjpeg-turbo over qualities, subsamplings, odd sizes, progressive and restart
intervals; refusals, cancellation, and truncated or corrupted files that must give an error,
never a crash or a read past the end.
"""
from __future__ import annotations

import importlib
import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from tests import clib

OK, INVALID_INPUT, INTERNAL, CANCELLED = 0, 1, 5, 6
UNRECOGNIZED, UNSUPPORTED_FORMAT, UNSUPPORTED_FEATURE, CORRUPT, TOO_LARGE = 1, 2, 3, 4, 5
PIXEL_FORMATS = ("RGB", "BGR", "Grayscale")


@pytest.fixture(scope="module")
def lib():
    """sw_image.c alone, so these tests do not depend on the other C files."""
    return clib.library(("sw_image.c",))


# ---- calling the kernels ------------------------------------------------------------------


def probe(lib, data: bytes):
    """(status, (height, width, scratch bytes) or None, reason)."""
    x = clib.Arg(np.frombuffer(data, np.uint8))
    status, scalars, detail = clib.call("image_probe", [x], lib=lib)
    return status, (tuple(scalars[:3]) if status == OK else None), detail[0]


def decode(lib, data: bytes, pixel_format: str = "RGB", cancel: int = 0):
    """(status, pixels or None, reason): probe, then decode into buffers of the probed sizes."""
    status, dims, reason = probe(lib, data)
    if status != OK:
        return status, None, reason
    h, w, scratch = dims
    x = clib.Arg(np.frombuffer(data, np.uint8))
    work = clib.Arg(shape=(scratch,), dtype=np.uint8)
    out = clib.Arg(shape=(h, w, 1 if pixel_format == "Grayscale" else 3), dtype=np.uint8)
    status, _, detail = clib.call("image_decode", [x, work, out], params=[PIXEL_FORMATS.index(pixel_format)],
                                  cancel=cancel, lib=lib)
    return status, (out.array() if status == OK else None), detail[0]


def pillow(data: bytes, pixel_format: str = "RGB") -> np.ndarray:
    """What onnx's reference gives, with a gray or palette image converted to RGB first (the
    reference's np.array of such an image has no channel dim)."""
    im = Image.open(io.BytesIO(data))
    if pixel_format == "Grayscale":
        return np.array(im.convert("L"))[:, :, None]
    rgb = np.array(im.convert("RGB"))
    return rgb[:, :, ::-1] if pixel_format == "BGR" else rgb


def check(lib, data: bytes, formats=PIXEL_FORMATS, what=""):
    for pf in formats:
        status, got, reason = decode(lib, data, pf)
        assert status == OK, f"{what} {pf}: status {status} reason {reason}"
        want = pillow(data, pf)
        assert got.shape == want.shape, what
        if not np.array_equal(got, want):
            diff = np.abs(got.astype(int) - want)
            raise AssertionError(f"{what} {pf}: {np.count_nonzero(diff)} values differ, max {diff.max()}")


def refused(lib, data: bytes, reason: int):
    status, _, why = decode(lib, data)
    assert (status, why) == (INVALID_INPUT, reason)


def saved(im: Image.Image, fmt: str, **options) -> bytes:
    f = io.BytesIO()
    im.save(f, format=fmt, **options)
    return f.getvalue()


def random_image(rng, h: int, w: int, mode: str = "RGB") -> Image.Image:
    """Noise mixed with smooth gradients, so both flat and busy areas occur."""
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([(xx * 255 // max(w - 1, 1)), (yy * 255 // max(h - 1, 1)), ((xx + yy) * 7) % 256], -1)
    noise = rng.integers(0, 256, (h, w, 3))
    mix = rng.random((h, w, 1)) < 0.5
    rgb = np.where(mix, base, noise).astype(np.uint8)
    im = Image.fromarray(rgb)
    return im if mode == "RGB" else im.convert(mode)


# ---- onnx's node test cases ---------------------------------------------------------------


def node_cases():
    """onnx's ImageDecoder cases: importing the case module records them (collect_testcases
    would import every op's, which takes seconds); with Pillow installed they are made anew."""
    import onnx.backend.test.case.node as cases

    importlib.import_module(f"{cases.__name__}.image_decoder")
    return [c for c in cases._NodeTestCases if c.name.startswith("test_image_decoder_")]


NODE_CASES = node_cases()


def test_node_cases_found():
    names = {c.name for c in NODE_CASES}
    assert {f"test_image_decoder_decode_{k}" for k in ("jpeg_rgb", "jpeg_grayscale", "jpeg_bgr", "png_rgb", "bmp_rgb",
                                                         "pnm_rgb", "tiff_rgb", "webp_rgb", "jpeg2k_rgb")} <= names


@pytest.mark.parametrize("case", NODE_CASES, ids=[c.name for c in NODE_CASES])
def test_onnx_node_case(lib, case):
    node = case.model.graph.node[0]
    pixel_format = node.attribute[0].s.decode() if node.attribute else "RGB"
    (data,), (expected,) = case.data_sets[0]
    status, got, reason = decode(lib, data.tobytes(), pixel_format)
    if "webp" in case.name or "jpeg2k" in case.name:
        assert (status, reason) == (INVALID_INPUT, UNSUPPORTED_FORMAT)
        return
    assert status == OK, reason
    assert got.shape == expected.shape
    assert np.array_equal(got, expected)


# ---- pixel formats ------------------------------------------------------------------------


def test_grayscale_is_pillows_luma(lib):
    """RGB->L over 2^16 random colors and the corners of the cube, through a 24-bit BMP."""
    rng = np.random.default_rng(0)
    colors = rng.integers(0, 256, (256, 256, 3), dtype=np.uint8)
    colors[0, :8] = [[r, g, b] for r in (0, 255) for g in (0, 255) for b in (0, 255)]
    check(lib, saved(Image.fromarray(colors), "BMP"), ("Grayscale", "BGR"))


def test_gray_source_repeats_in_rgb(lib):
    data = saved(random_image(np.random.default_rng(1), 9, 11, "L"), "PNG")
    status, got, _ = decode(lib, data, "RGB")
    gray = np.array(Image.open(io.BytesIO(data)))
    assert status == OK and np.array_equal(got, np.repeat(gray[:, :, None], 3, 2))
    check(lib, data)


# ---- BMP ----------------------------------------------------------------------------------


def bmp_file(bits, w, h, rows, *, compression=0, palette=b"", colors=0, masks=b"", header=40,
             top_down=False, offset=None):
    """A BMP written here: rows are the stored rows (bottom-up unless top_down), unpadded."""
    stride = ((w * bits + 31) >> 3) & ~3
    data = b"".join(r.ljust(stride, b"\0") for r in rows)
    if header == 12:
        info = struct.pack("<IHHHH", 12, w, h, 1, bits)
    else:
        info = struct.pack("<IiiHHIIiiII", header, w, -h if top_down else h, 1, bits, compression,
                           len(data), 2835, 2835, colors, 0)
        info = info.ljust(header, b"\0")
        if header >= 52:
            info = info[:40] + masks + info[40 + len(masks):]
            masks = b""
    start = 14 + len(info) + len(masks) + len(palette)
    off = start if offset is None else offset
    return b"BM" + struct.pack("<IHHI", start + len(data), 0, 0, off) + info + masks + palette + data


@pytest.mark.parametrize("mode", ["RGB", "P", "L", "1"])
@pytest.mark.parametrize("size", [(1, 1), (7, 13), (32, 32), (5, 3)])
def test_bmp_pillow_writes(lib, mode, size):
    im = random_image(np.random.default_rng(size[0]), *size, mode)
    check(lib, saved(im, "BMP"), what=f"{mode} {size}")


@pytest.mark.parametrize("w", [1, 2, 3, 5, 8, 9])
def test_bmp_layouts(lib, w):
    rng = np.random.default_rng(w)
    h = 3
    px = rng.integers(0, 256, (h, w, 4), dtype=np.uint8)
    rows24 = [px[y, :, :3].tobytes() for y in range(h)]
    rows32 = [px[y].tobytes() for y in range(h)]
    check(lib, bmp_file(24, w, h, rows24), what="24 bottom-up")
    check(lib, bmp_file(24, w, h, rows24, top_down=True), what="24 top-down")
    check(lib, bmp_file(32, w, h, rows32), what="32 BI_RGB")
    check(lib, bmp_file(24, w, h, rows24, header=12), what="OS/2 header")
    for header in (40, 56, 108, 124):
        alpha = [(0xFF, 0xFF00, 0xFF0000, 0xFF000000), (0xFF000000, 0xFF00, 0xFF, 0xFF0000)] if header > 40 else []
        for masks in [(0xFF0000, 0xFF00, 0xFF, 0), (0xFF000000, 0xFF0000, 0xFF00, 0), (0, 0, 0, 0)] + alpha:
            packed = struct.pack("<III", *masks[:3]) if header == 40 else struct.pack("<IIII", *masks)
            check(lib, bmp_file(32, w, h, rows32, compression=3, masks=packed, header=header), what=f"32 {masks}")
    v16 = rng.integers(0, 65536, (h, w), dtype=np.uint16)
    rows16 = [v16[y].astype("<u2").tobytes() for y in range(h)]
    check(lib, bmp_file(16, w, h, rows16), what="555")
    check(lib, bmp_file(16, w, h, rows16, compression=3, masks=struct.pack("<III", 0xF800, 0x7E0, 0x1F)), what="565")
    check(lib, bmp_file(16, w, h, rows16, compression=3, masks=struct.pack("<III", 0x7C00, 0x3E0, 0x1F)), what="555 mask")
    for bits in (1, 4, 8):
        n = 1 << bits
        pal = rng.integers(0, 256, (n, 4), dtype=np.uint8).tobytes()
        idx = rng.integers(0, n, (h, w))
        rows = [np.packbits(np.unpackbits(idx[y].astype(np.uint8)[:, None], 1)[:, 8 - bits:].reshape(-1)).tobytes()
                for y in range(h)]
        check(lib, bmp_file(bits, w, h, rows, palette=pal, colors=n), what=f"{bits}-bit palette")
        short = 1 if bits == 1 else 3  # a palette shorter than the indices reach: black past it
        check(lib, bmp_file(bits, w, h, rows, palette=pal[:4 * short], colors=short, offset=14 + 40),
              what=f"{bits}-bit short palette")
        os2 = b"".join(pal[4 * i:4 * i + 3] for i in range(n))
        check(lib, bmp_file(bits, w, h, rows, palette=os2, header=12), what=f"{bits}-bit OS/2 palette")
    gray = bytes(v for i in range(256) for v in (i, i, i, 0))
    rows = [rng.integers(0, 256, w, dtype=np.uint8).tobytes() for _ in range(h)]
    check(lib, bmp_file(8, w, h, rows, palette=gray[:400], colors=100), what="gray ramp, indices past it")


def rle_stream(rng, w: int, h: int, rle4: bool) -> bytes:
    """Random RLE commands: runs (some past the row's end), absolute runs (odd lengths, some
    spilling into the next row), deltas, ends of line, an end of bitmap."""
    out = bytearray()
    for _ in range(h):
        for _ in range(int(rng.integers(0, 4))):
            kind = rng.random()
            if kind < 0.5:
                out += bytes([int(rng.integers(1, w + 3)), int(rng.integers(0, 256))])
            elif kind < 0.8:
                n = int(rng.integers(3, w + 4))
                payload = rng.integers(0, 256, (n + 1) // 2 if rle4 else n, dtype=np.uint8).tobytes()
                out += bytes([0, n]) + payload + b"\0" * ((len(out) + 2 + len(payload)) % 2)
            else:
                out += bytes([0, 2, int(rng.integers(0, 3)), int(rng.integers(0, 2))])
        out += b"\0\0"
    return bytes(out + b"\0\1")


@pytest.mark.parametrize("rle4", [False, True], ids=["rle8", "rle4"])
def test_bmp_rle(lib, rle4):
    """Pillow's RLE decoder, quirks included; where Pillow fails (pixels left unset) this
    refuses."""
    rng = np.random.default_rng(18 + rle4)
    bits = 4 if rle4 else 8
    pal = rng.integers(0, 256, ((1 << bits), 4), dtype=np.uint8).tobytes()
    decoded = 0
    for case in range(60):
        w, h = int(rng.integers(1, 12)), int(rng.integers(1, 6))
        stream = rle_stream(rng, w, h, rle4)
        data = bmp_file(bits, w, h, [], compression=2 if rle4 else 1, palette=pal, colors=1 << bits)
        data = data[:2] + struct.pack("<I", len(data) + len(stream)) + data[6:] + stream
        try:
            pillow(data)
        except (OSError, ValueError):
            status, _, reason = decode(lib, data)
            assert (status, reason) == (INVALID_INPUT, CORRUPT), case
            continue
        check(lib, data, what=f"case {case}")
        decoded += 1
    assert decoded >= 20


def test_bmp_refusals(lib):
    row = [b"\0\0\0"]
    refused(lib, bmp_file(24, 1, 1, row, compression=1), UNSUPPORTED_FEATURE)  # RLE of 24-bit pixels
    refused(lib, bmp_file(8, 1, 1, row, compression=4), UNSUPPORTED_FEATURE)  # an embedded JPEG
    refused(lib, bmp_file(24, 1, 1, row, compression=3, masks=struct.pack("<III", 1, 2, 4)), UNSUPPORTED_FEATURE)
    refused(lib, bmp_file(2, 1, 1, [b"\0"], palette=b"\0" * 16), UNSUPPORTED_FEATURE)
    refused(lib, bmp_file(24, 16385, 1, []), TOO_LARGE)
    refused(lib, bmp_file(24, 1, 16385, []), TOO_LARGE)
    refused(lib, bmp_file(24, 0, 1, []), CORRUPT)
    refused(lib, bmp_file(24, 4, 4, [b"\0" * 12] * 3), CORRUPT)  # a row short
    refused(lib, b"BM" + b"\0" * 10, CORRUPT)


# ---- PNM ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["RGB", "L", "1"])
@pytest.mark.parametrize("size", [(1, 1), (7, 13), (9, 17)])
def test_pnm_pillow_writes(lib, mode, size):
    im = random_image(np.random.default_rng(3), *size, mode)
    check(lib, saved(im, "PPM"), what=f"{mode} {size}")


def test_pnm_written_here(lib):
    rng = np.random.default_rng(4)
    h, w = 5, 7
    rgb = rng.integers(0, 256, (h, w, 3))
    gray = rgb[:, :, 0]
    bits = rng.integers(0, 2, (h, w))
    plain = lambda a: " ".join(str(v) for v in a.reshape(-1)).encode()
    check(lib, b"P3\n# a comment\n%d %d\n255\n" % (w, h) + plain(rgb), what="P3")
    check(lib, b"P2 %d %d 255 " % (w, h) + plain(gray), what="P2")
    check(lib, b"P1\n%d %d\n" % (w, h) + "".join(map(str, bits.reshape(-1))).encode(), what="P1 packed")
    check(lib, b"P1\n%d %d\n" % (w, h) + plain(bits), what="P1 spaced")
    check(lib, b"P2\n%d #c\n%d\n100\n" % (w, h) + plain(gray * 100 // 255), what="P2 maxval 100")
    check(lib, b"P6\n%d %d\n7\n" % (w, h) + (rgb % 8).astype(np.uint8).tobytes(), what="P6 maxval 7")
    check(lib, b"P5\n%d %d\n200\n" % (w, h) + gray.astype(np.uint8).tobytes(), what="P5 values above maxval")
    big = rng.integers(0, 1001, (h, w, 3))
    check(lib, b"P6\n%d %d\n1000\n" % (w, h) + big.astype(">u2").tobytes(), what="P6 16-bit")
    check(lib, b"P3\n%d %d\n1000\n" % (w, h) + plain(big), what="P3 16-bit")
    ten = rng.integers(0, 256, (10, w, 3), dtype=np.uint8)
    check(lib, b"P6\n%d 1#c\n0\n255\n" % w + ten.tobytes(), what="a comment inside a token (height 10)")
    # P4 rows are padded to bytes
    packed = np.packbits(bits.astype(np.uint8), axis=1).tobytes()
    check(lib, b"P4\n%d %d\n" % (w, h) + packed, what="P4")


def test_pnm_refusals(lib):
    refused(lib, b"P5\n2 2\n65535\n" + b"\0" * 8, UNSUPPORTED_FEATURE)  # 16-bit gray: Pillow's "I"
    refused(lib, b"P6\n2 2\n255\n" + b"\0" * 11, CORRUPT)
    refused(lib, b"P2\n2 2\n255\n1 2 3", CORRUPT)
    refused(lib, b"P2\n2 1\n10\n1 11", CORRUPT)  # above maxval
    refused(lib, b"P1\n2 1\n0 2", CORRUPT)
    refused(lib, b"P6\n20000 1\n255\n", TOO_LARGE)
    refused(lib, b"P6\n12345678901 1\n255\n", CORRUPT)  # a token over 10 characters
    refused(lib, b"P6\n0 1\n255\n", CORRUPT)
    refused(lib, b"P6\n1 1\n0\n\0\0\0", CORRUPT)
    refused(lib, b"P7\nWIDTH 1\n", UNRECOGNIZED)


# ---- TIFF ---------------------------------------------------------------------------------


def tiff_file(w, h, photometric, bits, samples, data: bytes, *, big_endian=False, rows_per_strip=None,
              extra=None, planar=1, colormap=None, fill=1, sample_format=None, strips=None):
    """A TIFF written here; data is the pixel bytes (planes one after another when planar)."""
    e = ">" if big_endian else "<"
    row_bytes = (w * bits + 7) // 8 if planar == 2 else (w * samples * bits + 7) // 8
    rps = rows_per_strip or h
    if strips is None:
        strips = []
        for plane in range(samples if planar == 2 else 1):
            for y0 in range(0, h, rps):
                strips.append(plane * h * row_bytes + y0 * row_bytes)
    tags = [(256, 4, [w]), (257, 4, [h]), (258, 3, [bits] * samples), (259, 3, [1]), (262, 3, [photometric]),
            (273, 4, strips), (277, 3, [samples]), (278, 4, [rps]), (284, 3, [planar])]
    if fill != 1:
        tags.append((266, 3, [fill]))
    if extra is not None:
        tags.append((338, 3, extra))
    if colormap is not None:
        tags.append((320, 3, colormap))
    if sample_format is not None:
        tags.append((339, 3, sample_format))
    tags.sort()
    pixels_at = 8  # after the header
    ifd_at = pixels_at + len(data) + (len(data) & 1)
    out_of_line_at = ifd_at + 2 + 12 * len(tags) + 4
    entries, extra_bytes = b"", b""
    for tag, typ, values in tags:
        if tag == 273:
            values = [v + pixels_at for v in values]
        fmt = "H" if typ == 3 else "I"
        packed = struct.pack(e + fmt * len(values), *values)
        if len(packed) <= 4:
            entries += struct.pack(e + "HHI", tag, typ, len(values)) + packed.ljust(4, b"\0")
        else:
            entries += struct.pack(e + "HHII", tag, typ, len(values), out_of_line_at + len(extra_bytes))
            extra_bytes += packed
    head = (b"MM\0*" if big_endian else b"II*\0") + struct.pack(e + "I", ifd_at)
    return (head + data + b"\0" * (len(data) & 1) + struct.pack(e + "H", len(tags)) + entries + b"\0" * 4
            + extra_bytes)


@pytest.mark.parametrize("mode", ["RGB", "L", "1", "P", "RGBA", "LA"])
def test_tiff_pillow_writes(lib, mode):
    im = random_image(np.random.default_rng(5), 13, 7, mode)
    check(lib, saved(im, "TIFF"), what=mode)
    check(lib, saved(im, "TIFF", strip_size=8), what=f"{mode} strips")


@pytest.mark.parametrize("big_endian", [False, True])
def test_tiff_written_here(lib, big_endian):
    rng = np.random.default_rng(6)
    h, w = 6, 5
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    t = lambda *a, **k: tiff_file(*a, big_endian=big_endian, **k)
    check(lib, t(w, h, 2, 8, 3, rgb.tobytes(), rows_per_strip=4), what="RGB strips")
    check(lib, t(w, h, 2, 8, 3, rgb.tobytes(), rows_per_strip=2**32 - 1), what="RGB, rows per strip unbounded")
    check(lib, t(w, h, 2, 8, 3, rgb.transpose(2, 0, 1).tobytes(), planar=2, rows_per_strip=4), what="RGB planar")
    rgba = rng.integers(0, 256, (h, w, 4), dtype=np.uint8)
    for extra in ([0], [2], None):
        check(lib, t(w, h, 2, 8, 4, rgba.tobytes(), extra=extra), what=f"RGBA extra {extra}")
    rgb16 = rng.integers(0, 65536, (h, w, 3)).astype(">u2" if big_endian else "<u2")
    check(lib, t(w, h, 2, 16, 3, rgb16.tobytes()), what="RGB 16-bit")
    for bits in (1, 2, 4, 8):
        v = rng.integers(0, 1 << bits, (h, w)).astype(np.uint8)
        packed = np.packbits(np.unpackbits(v[:, :, None], 2)[:, :, 8 - bits:].reshape(h, -1), axis=1).tobytes()
        for photometric in (0, 1):
            check(lib, t(w, h, photometric, bits, 1, packed, rows_per_strip=3), what=f"gray {bits} {photometric}")
            rev = bytes(int(f"{b:08b}"[::-1], 2) for b in packed)
            if bits < 8 or photometric == 1:  # Pillow has no unpacker for 8-bit WhiteIsZero reversed
                check(lib, t(w, h, photometric, bits, 1, rev, fill=2), what=f"gray {bits} fill order 2")
            else:
                refused(lib, t(w, h, photometric, bits, 1, rev, fill=2), UNSUPPORTED_FEATURE)
        cmap = list(rng.integers(0, 65536, 3 << bits))
        check(lib, t(w, h, 3, bits, 1, packed, colormap=cmap), what=f"palette {bits}")
        if bits == 8:
            check(lib, t(w, h, 3, bits, 1, rev, colormap=cmap, fill=2), what="palette fill order 2")
    gray = rng.integers(0, 256, (h, w, 2), dtype=np.uint8)
    check(lib, t(w, h, 1, 8, 2, gray.tobytes(), extra=[2]), what="gray + alpha")
    check(lib, t(w, h, 1, 8, 1, gray[:, :, 0].tobytes(), sample_format=[2]), what="signed 8-bit")
    # more strip offsets than strips: Pillow decodes them all, going back to the top
    two = rgb.tobytes() + rgb[::-1].tobytes()
    check(lib, t(w, h, 2, 8, 3, two, rows_per_strip=4, strips=[0, 4 * w * 3, h * w * 3, h * w * 3 + 4 * w * 3, 0]),
          what="extra strips")


def test_tiff_refusals(lib):
    px = b"\0" * 12
    refused(lib, tiff_file(2, 2, 2, 8, 3, px)[:-2] + b"", CORRUPT)
    refused(lib, tiff_file(2, 2, 1, 16, 1, b"\0" * 8), UNSUPPORTED_FEATURE)
    refused(lib, tiff_file(2, 2, 5, 8, 4, b"\0" * 16), UNSUPPORTED_FEATURE)  # CMYK
    refused(lib, tiff_file(2, 2, 2, 8, 4, b"\0" * 16, extra=[1]), UNSUPPORTED_FEATURE)  # premultiplied
    refused(lib, tiff_file(2, 2, 2, 8, 3, px).replace(b"\x03\x01\x03\x00\x01\x00\x00\x00\x01",
                                                      b"\x03\x01\x03\x00\x01\x00\x00\x00\x05"), UNSUPPORTED_FEATURE)
    refused(lib, tiff_file(20000, 2, 2, 8, 3, px), TOO_LARGE)
    refused(lib, tiff_file(40, 40, 2, 8, 3, px), CORRUPT)  # strips past the end
    refused(lib, b"II+\0" + b"\0" * 12, UNSUPPORTED_FEATURE)  # BigTIFF
    refused(lib, b"II*\0\xff\xff\xff\xff", CORRUPT)


# ---- PNG ----------------------------------------------------------------------------------


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_filter(rows: list[bytes], bpp: int, rng) -> bytes:
    """Each scanline with a random filter of the five, applied as the PNG spec says."""
    out, prev = b"", bytes(len(rows[0]))
    for row in rows:
        ft = int(rng.integers(0, 5))
        f = bytearray(len(row))
        for i, x in enumerate(row):
            a = row[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ft == 1:
                x -= a
            elif ft == 2:
                x -= b
            elif ft == 3:
                x -= (a + b) // 2
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                x -= a if pa <= pb and pa <= pc else b if pb <= pc else c
            f[i] = x & 255
        out += bytes([ft]) + bytes(f)
        prev = row
    return out


ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))


def png_file(samples: np.ndarray, depth: int, color_type: int, *, interlace=False, palette=None, seed=0,
             level=6, idat_split=0) -> bytes:
    """A PNG written here from samples [h, w, channels] (uint8, or uint16 for depth 16)."""
    rng = np.random.default_rng(seed)
    h, w, ch = samples.shape
    bpp = max(1, ch * depth // 8)

    def rows_of(a):
        if depth == 16:
            return [a[y].astype(">u2").tobytes() for y in range(a.shape[0])]
        if depth == 8:
            return [a[y].astype(np.uint8).tobytes() for y in range(a.shape[0])]
        bits = np.unpackbits(a.astype(np.uint8)[..., None], -1)[..., 8 - depth:]
        return [np.packbits(bits[y].reshape(-1)).tobytes() for y in range(a.shape[0])]

    raw = b""
    for x0, y0, dx, dy in (ADAM7 if interlace else ((0, 0, 1, 1),)):
        part = samples[y0::dy, x0::dx]
        if part.size:
            raw += png_filter(rows_of(part), bpp, rng)
    stream = zlib.compress(raw, level)
    parts = [stream] if not idat_split else [stream[i:i + idat_split] for i in range(0, len(stream), idat_split)]
    out = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, int(interlace)))
    if palette is not None:
        out += png_chunk(b"PLTE", palette)
    out += png_chunk(b"tEXt", b"note\0ignored")
    for p in parts:
        out += png_chunk(b"IDAT", p)
    return out + png_chunk(b"IEND", b"")


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L", "LA", "P", "1"])
@pytest.mark.parametrize("level", [0, 1, 9])
def test_png_pillow_writes(lib, mode, level):
    im = random_image(np.random.default_rng(7), 19, 23, mode)
    check(lib, saved(im, "PNG", compress_level=level), what=f"{mode} level {level}")


@pytest.mark.parametrize("bits", [1, 2, 4])
def test_png_pillow_small_palettes(lib, bits):
    im = random_image(np.random.default_rng(8), 9, 13, "RGB").quantize(1 << bits)
    check(lib, saved(im, "PNG", bits=bits), what=f"P {bits} bits")


@pytest.mark.parametrize("interlace", [False, True])
@pytest.mark.parametrize("size", [(1, 1), (3, 5), (8, 8), (13, 17)])
def test_png_written_here(lib, interlace, size):
    rng = np.random.default_rng(size[0] * 31 + size[1])
    h, w = size
    for color_type, depths, ch in ((0, (1, 2, 4, 8), 1), (2, (8, 16), 3), (3, (1, 2, 4, 8), 1), (4, (8, 16), 2),
                                   (6, (8, 16), 4)):
        for depth in depths:
            top = 1 << depth
            samples = rng.integers(0, top, (h, w, ch)).astype(np.uint16 if depth == 16 else np.uint8)
            palette = rng.integers(0, 256, 3 * min(top, 200), dtype=np.uint8).tobytes() if color_type == 3 else None
            data = png_file(samples, depth, color_type, interlace=interlace, palette=palette, seed=depth,
                            idat_split=7 if depth == 8 else 0)
            check(lib, data, what=f"type {color_type} depth {depth} interlace {interlace}")


def test_png_deflate_blocks(lib):
    """Stored, fixed and dynamic blocks, with long matches, through Python's zlib."""
    rng = np.random.default_rng(9)
    flat = np.zeros((64, 64, 3), np.uint8)
    flat[20:40] = rng.integers(0, 256, (20, 64, 3))
    for level in (0, 1, 6, 9):
        check(lib, png_file(flat, 8, 2, level=level), what=f"level {level}")
    # fixed Huffman: a raw deflate stream with Z_FIXED inside a zlib wrapper
    raw = png_filter([flat[y].tobytes() for y in range(64)], 3, rng)
    c = zlib.compressobj(6, zlib.DEFLATED, 15, 9, zlib.Z_FIXED)
    stream = c.compress(raw) + c.flush()
    ihdr = png_chunk(b"IHDR", struct.pack(">IIBBBBB", 64, 64, 8, 2, 0, 0, 0))
    check(lib, b"\x89PNG\r\n\x1a\n" + ihdr + png_chunk(b"IDAT", stream) + png_chunk(b"IEND", b""), what="fixed")


def test_png_refusals(lib):
    px = np.zeros((2, 2, 1), np.uint16)
    refused(lib, png_file(px, 16, 0), UNSUPPORTED_FEATURE)
    good = png_file(np.zeros((4, 4, 3), np.uint8), 8, 2)
    refused(lib, good.replace(struct.pack(">II", 4, 4), struct.pack(">II", 16385, 4), 1), TOO_LARGE)
    refused(lib, good.replace(struct.pack(">II", 4, 4), struct.pack(">II", 0, 4), 1), CORRUPT)
    refused(lib, png_file(np.zeros((2, 2, 1), np.uint8), 8, 3), CORRUPT)  # no PLTE
    ihdr = png_chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0))
    raw = b"\0" + b"\0" * 12
    as_png = lambda stream: b"\x89PNG\r\n\x1a\n" + ihdr + png_chunk(b"IDAT", stream) + png_chunk(b"IEND", b"")
    refused(lib, as_png(zlib.compress(raw * 3)), CORRUPT)  # a row short
    refused(lib, as_png(zlib.compress(b"\5" + raw[1:] + raw * 3)), CORRUPT)  # filter type 5
    # streams zlib itself rejects, each for the reason named
    dynamic = [(1, 1, False), (2, 2, False), (0, 5, False), (0, 5, False), (15, 4, False)]
    for stream, why in ((b"\x79\x9c" + zlib.compress(raw * 4)[2:], "incorrect header check"),
                        (deflate_bits([(1, 1, False), (3, 2, False)]), "invalid block type"),
                        (deflate_bits(dynamic + [(1, 3, False)] * 19), "invalid code lengths set"),  # over-subscribed
                        # fixed Huffman: a match of length 3 at distance 1 as the first thing
                        (deflate_bits([(1, 1, False), (1, 2, False), (1, 7, True), (0, 5, True), (0, 7, True)]),
                         "too far back")):
        with pytest.raises(zlib.error, match=why):
            zlib.decompress(stream)
        refused(lib, as_png(stream), CORRUPT)


def deflate_bits(fields) -> bytes:
    """A zlib stream from (value, width, is_huffman_code) fields; Huffman codes are packed most
    significant bit first, everything else least significant bit first."""
    acc = n = 0
    for value, width, huffman in fields:
        if huffman:
            value = int(f"{value:0{width}b}"[::-1], 2)
        acc |= value << n
        n += width
    return b"\x78\x9c" + acc.to_bytes((n + 7) // 8 + 4, "little")


def test_png_zip_bomb_stops_at_the_image_size(lib):
    """10 MB of zeros behind a 4x4 header: the inflate stops after the 52 bytes it needs."""
    ihdr = png_chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0))
    stream = zlib.compress(bytes(10_000_000), 9)
    data = b"\x89PNG\r\n\x1a\n" + ihdr + png_chunk(b"IDAT", stream) + png_chunk(b"IEND", b"")
    status, dims, _ = probe(lib, data)
    assert status == OK and dims == (4, 4, 4 * 13)
    check(lib, data, ("RGB",))


# ---- robustness ---------------------------------------------------------------------------


def test_unrecognized_and_unsupported_formats(lib):
    refused(lib, b"", UNRECOGNIZED)
    refused(lib, b"definitely not an image", UNRECOGNIZED)
    rgb = random_image(np.random.default_rng(10), 8, 8)
    refused(lib, saved(rgb, "WEBP"), UNSUPPORTED_FORMAT)
    refused(lib, saved(rgb, "JPEG2000"), UNSUPPORTED_FORMAT)
    refused(lib, saved(rgb, "JPEG2000", no_jp2=True), UNSUPPORTED_FORMAT)
    refused(lib, saved(rgb, "GIF"), UNRECOGNIZED)


# ---- JPEG ---------------------------------------------------------------------------------

JPEG_SIZES = ((1, 1), (2, 5), (7, 13), (16, 16), (33, 17), (40, 1))


@pytest.mark.parametrize("subsampling", [0, 1, 2], ids=["444", "422", "420"])
@pytest.mark.parametrize("quality", [10, 50, 90, 100])
def test_jpeg_bit_exact(lib, quality, subsampling):
    """libjpeg-turbo's islow IDCT, fancy upsampling and YCbCr->RGB, exactly: odd sizes (MCUs
    cut at the edges, chroma 1 or 2 samples wide), progressive, optimized tables, restarts."""
    rng = np.random.default_rng(quality * 3 + subsampling)
    for h, w in JPEG_SIZES:
        for extra in ({}, {"progressive": True}, {"optimize": True}, {"restart_marker_blocks": 1}):
            data = saved(random_image(rng, h, w), "JPEG", quality=quality, subsampling=subsampling, **extra)
            check(lib, data, ("RGB", "Grayscale"), what=f"{h}x{w} {extra}")


@pytest.mark.parametrize("mode, options", [
    ("L", {}), ("L", {"progressive": True}), ("L", {"restart_marker_rows": 1}),
    ("RGB", {"keep_rgb": True}), ("RGB", {"keep_rgb": True, "progressive": True}),
    ("RGB", {"restart_marker_blocks": 3, "subsampling": 2}),
    ("RGB", {"restart_marker_blocks": 5, "progressive": True, "subsampling": 1}),
    ("RGB", {"progressive": True, "optimize": True, "quality": 95}),
])
def test_jpeg_more(lib, mode, options):
    """Gray, RGB without color transform (Adobe marker), restarts over several MCU rows, and a
    larger image."""
    rng = np.random.default_rng(11)
    for h, w in ((7, 13), (203, 301)):
        check(lib, saved(random_image(rng, h, w, mode), "JPEG", **options), what=f"{h}x{w}")


def jpeg_segments(data: bytes):
    """(marker, start of its length field) of each segment before the first scan's data."""
    pos, out = 2, []
    while True:
        marker = data[pos + 1]
        out.append((marker, pos + 2))
        if marker == 0xDA:
            return out
        pos += 2 + struct.unpack(">H", data[pos + 2:pos + 4])[0]


def patched(data: bytes, at: int, new: bytes) -> bytes:
    return data[:at] + new + data[at + len(new):]


def test_jpeg_without_huffman_tables(lib):
    """A sequential file with no DHT (a Motion-JPEG frame) is decoded with the standard tables,
    as libjpeg-turbo does; a progressive one is refused."""
    for options in ({}, {"progressive": True}):
        data = saved(random_image(np.random.default_rng(17), 12, 20), "JPEG", **options)
        for marker, at in reversed(jpeg_segments(data)):
            if marker == 0xC4:
                data = data[:at - 2] + data[at + struct.unpack(">H", data[at:at + 2])[0]:]
        if options:
            refused(lib, data, CORRUPT)
        else:
            check(lib, data, ("RGB",))


def test_jpeg_refusals(lib):
    data = saved(random_image(np.random.default_rng(12), 16, 16), "JPEG")
    segs = dict(jpeg_segments(data))
    sof = segs[0xC0]
    refused(lib, saved(random_image(np.random.default_rng(12), 8, 8).convert("CMYK"), "JPEG"), UNSUPPORTED_FEATURE)
    refused(lib, patched(data, sof + 2, b"\x0c"), UNSUPPORTED_FEATURE)  # 12-bit samples
    for marker in (0xC3, 0xC9, 0xCA):  # lossless, arithmetic
        refused(lib, patched(data, sof - 1, bytes([marker])), UNSUPPORTED_FEATURE)
    refused(lib, patched(data, sof + 3, struct.pack(">H", 0)), UNSUPPORTED_FEATURE)  # height from DNL
    refused(lib, patched(data, sof + 3, struct.pack(">H", 16385)), TOO_LARGE)
    refused(lib, patched(data, sof + 5, struct.pack(">H", 20000)), TOO_LARGE)
    refused(lib, patched(data, sof + 5, struct.pack(">H", 0)), CORRUPT)
    refused(lib, patched(patched(data, sof + 9, b"\x33"), sof + 12, b"\x22"), UNSUPPORTED_FEATURE)  # 3:2 sampling
    dht = segs[0xC4]
    refused(lib, patched(data, dht + 3, b"\x02\x03"), CORRUPT)  # 2 codes of length 1, 3 of length 2
    prog = saved(random_image(np.random.default_rng(12), 16, 16), "JPEG", progressive=True)
    last_scan = prog.rindex(b"\xff\xda")
    refused(lib, prog[:last_scan] + prog[last_scan:-2] * 1001 + b"\xff\xd9", CORRUPT)  # over 1000 scans
    refused(lib, data[:len(data) // 2], CORRUPT)
    refused(lib, data[:200], CORRUPT)
    refused(lib, b"\xff\xd8\xff\xd9", CORRUPT)


def pillow_huffman_tables() -> dict:
    """The DHT tables Pillow writes without optimize (the spec's Annex K tables), by
    (class, id): (counts per length, symbols)."""
    data = saved(Image.new("RGB", (8, 8)), "JPEG")
    tables, pos = {}, 2
    while data[pos + 1] != 0xDA:
        n = struct.unpack(">H", data[pos + 2:pos + 4])[0]
        if data[pos + 1] == 0xC4:
            seg = data[pos + 4:pos + 2 + n]
            while seg:
                counts = seg[1:17]
                tables[seg[0] >> 4, seg[0] & 15] = (counts, seg[17:17 + sum(counts)])
                seg = seg[17 + sum(counts):]
        pos += 2 + n
    return tables


def zigzag_order() -> list[int]:
    """Natural (row-major) index of each zigzag position."""
    cells = sorted(((r, c) for r in range(8) for c in range(8)),
                   key=lambda rc: (rc[0] + rc[1], rc[0] if (rc[0] + rc[1]) % 2 else rc[1]))
    return [r * 8 + c for r, c in cells]


class BitWriter:
    def __init__(self):
        self.out, self.acc, self.n = bytearray(), 0, 0

    def put(self, value: int, n: int):
        self.acc, self.n = (self.acc << n) | value, self.n + n
        while self.n >= 8:
            byte = (self.acc >> (self.n - 8)) & 255
            self.out += b"\xff\x00" if byte == 255 else bytes([byte])
            self.n -= 8

    def flush(self):
        if self.n % 8:
            self.put((1 << (8 - self.n % 8)) - 1, 8 - self.n % 8)


def jpeg_file(planes, factors, width, height, *, ids=(1, 2, 3), jfif=True, adobe=None, interleaved=True,
              restart=0, seed=0) -> bytes:
    """A baseline JPEG written here (float DCT, a random quantization table, the standard
    Huffman tables) from component planes already at their sampled sizes, with any sampling
    factors, interleaved or one scan per component, optional restarts, JFIF/Adobe markers."""
    rng = np.random.default_rng(seed)
    tables = pillow_huffman_tables()
    codes = {}
    for key, (counts, vals) in tables.items():
        code, k, table = 0, 0, {}
        for length, n in enumerate(counts, 1):
            for _ in range(n):
                table[vals[k]] = (code, length)
                code, k = code + 1, k + 1
            code <<= 1
        codes[key] = table
    zz = zigzag_order()
    q = rng.integers(1, 24, 64)
    u = np.arange(8)
    dct = np.sqrt(2 / 8) * np.cos((2 * u[None, :] + 1) * u[:, None] * np.pi / 16)
    dct[0] /= np.sqrt(2)
    hmax, vmax = max(f[0] for f in factors), max(f[1] for f in factors)
    mcux, mcuy = -(-width // (8 * hmax)), -(-height // (8 * vmax))

    def blocks(c, bw, bh):
        p = planes[c]
        p = np.pad(p, ((0, bh * 8 - p.shape[0]), (0, bw * 8 - p.shape[1])), mode="edge") if p.size else p
        out = np.zeros((bh, bw, 64), np.int64)
        for by in range(bh):
            for bx in range(bw):
                f = dct @ (p[by * 8:by * 8 + 8, bx * 8:bx * 8 + 8].astype(float) - 128) @ dct.T
                out[by, bx] = np.round(f.reshape(-1)[zz] / q[zz]).astype(np.int64)
        return out

    def encode_block(bw_, coef, pred, c):
        dc_codes, ac_codes = codes[0, min(c, 1)], codes[1, min(c, 1)]
        diff = int(coef[0]) - pred
        cat = abs(diff).bit_length()
        bw_.put(*dc_codes[cat])
        bw_.put(diff + (1 << cat) - 1 if diff < 0 else diff, cat)
        run = 0
        for k in range(1, 64):
            v = int(coef[k])
            if v == 0:
                run += 1
                continue
            while run > 15:
                bw_.put(*ac_codes[0xF0])
                run -= 16
            cat = abs(v).bit_length()
            bw_.put(*ac_codes[run << 4 | cat])
            bw_.put(v + (1 << cat) - 1 if v < 0 else v, cat)
            run = 0
        if run:
            bw_.put(*ac_codes[0])
        return int(coef[0])

    def scan(comps):
        w = BitWriter()
        if len(comps) > 1:
            grids = {c: blocks(c, mcux * factors[c][0], mcuy * factors[c][1]) for c in comps}
            units = [[(c, my * factors[c][1] + v, mx * factors[c][0] + h) for c in comps
                      for v in range(factors[c][1]) for h in range(factors[c][0])]
                     for my in range(mcuy) for mx in range(mcux)]
        else:
            c = comps[0]
            dw, dh = planes[c].shape[1], planes[c].shape[0]
            grids = {c: blocks(c, -(-dw // 8), -(-dh // 8))}
            units = [[(c, by, bx)] for by in range(-(-dh // 8)) for bx in range(-(-dw // 8))]
        pred = {c: 0 for c in comps}
        for i, unit in enumerate(units):
            if restart and i and i % restart == 0:
                w.flush()
                w.out += bytes([0xFF, 0xD0 + (i // restart - 1) % 8])
                pred = {c: 0 for c in comps}
            for c, by, bx in unit:
                pred[c] = encode_block(w, grids[c][by, bx], pred[c], c)
        w.flush()
        head = bytes([len(comps)]) + b"".join(bytes([ids[c], min(c, 1) * 17]) for c in comps) + b"\x00\x3f\x00"
        return segment(0xDA, head) + bytes(w.out)

    def segment(marker, payload):
        return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload

    n = len(planes)
    out = b"\xff\xd8"
    if jfif:
        out += segment(0xE0, b"JFIF\0\1\1\0\0\1\0\1\0\0")
    if adobe is not None:
        out += segment(0xEE, b"Adobe\0\x64\0\0\0\0" + bytes([adobe]))
    out += segment(0xDB, b"\0" + bytes(int(v) for v in q[zz]))
    out += segment(0xC0, struct.pack(">BHHB", 8, height, width, n)
                   + b"".join(bytes([ids[c], factors[c][0] << 4 | factors[c][1], 0]) for c in range(n)))
    for (cls, tid), (counts, vals) in sorted(tables.items()):
        out += segment(0xC4, bytes([cls << 4 | tid]) + counts + vals)
    if restart:
        out += segment(0xDD, struct.pack(">H", restart))
    for comps in ([list(range(n))] if interleaved else [[c] for c in range(n)]):
        out += scan(comps)
    return out + b"\xff\xd9"


def sampled_planes(rng, factors, width, height):
    hmax, vmax = max(f[0] for f in factors), max(f[1] for f in factors)
    planes = []
    for h, v in factors:
        dw, dh = -(-width * h // hmax), -(-height * v // vmax)
        yy, xx = np.mgrid[0:dh, 0:dw]
        smooth = (xx * 9 + yy * 5 + rng.integers(0, 256)) % 256
        planes.append(np.where(rng.random((dh, dw)) < 0.3, rng.integers(0, 256, (dh, dw)), smooth).astype(np.uint8))
    return planes


@pytest.mark.parametrize("factors", [
    ((1, 2), (1, 1), (1, 1)), ((4, 1), (1, 1), (1, 1)), ((2, 2), (2, 1), (1, 1)), ((2, 2), (1, 2), (2, 1)),
    ((4, 2), (2, 1), (2, 1)), ((3, 1), (1, 1), (1, 1)), ((1, 1), (1, 1), (1, 1)), ((2, 2), (1, 1), (1, 1)),
    ((1, 4), (1, 2), (1, 1)), ((2,), )],
    ids=["440", "411", "Cb-h1v2", "Cb-h2v1-Cr-h1v2", "Cb-h2v2-of-4x2", "3x1", "444", "420", "1x4", "gray-2x2"])
@pytest.mark.parametrize("interleaved", [True, False])
def test_jpeg_sampling_layouts(lib, factors, interleaved):
    """Sampling factors Pillow does not write, through libjpeg's other upsamplers (h1v2 fancy,
    box replication), interleaved or one scan per component, with and without restarts."""
    factors = [(2, 2)] if factors == ((2,),) else list(factors)
    rng = np.random.default_rng(len(factors) * 7 + factors[0][0])
    for height, width in ((1, 1), (5, 3), (9, 14), (17, 33)):
        for restart in (0, 2):
            planes = sampled_planes(rng, factors, width, height)
            data = jpeg_file(planes, factors, width, height, interleaved=interleaved, restart=restart)
            if interleaved and sum(h * v for h, v in factors) > 10:  # libjpeg's limit of blocks per MCU
                with pytest.raises(OSError):
                    pillow(data)
                refused(lib, data, CORRUPT)
                continue
            check(lib, data, ("RGB", "Grayscale"), what=f"{height}x{width} restart {restart}")


@pytest.mark.parametrize("jfif, adobe, ids", [
    (True, None, (1, 2, 3)), (False, None, (1, 2, 3)), (False, None, (82, 71, 66)), (True, None, (82, 71, 66)),
    (False, 0, (1, 2, 3)), (False, 1, (82, 71, 66)), (False, 2, (1, 2, 3)), (False, None, (0, 1, 2)),
    (True, None, (1, 1, 1)),
])
def test_jpeg_color_space_guess(lib, jfif, adobe, ids):
    """libjpeg's guess of RGB or YCbCr from the JFIF and Adobe markers and component ids;
    ids repeated in the frame, which libjpeg-turbo accepts."""
    factors = [(1, 1)] * 3
    planes = sampled_planes(np.random.default_rng(16), factors, 11, 6)
    check(lib, jpeg_file(planes, factors, 11, 6, ids=ids, jfif=jfif, adobe=adobe))


# ---- buffers, cancellation, hostile input -------------------------------------------------


def test_decode_checks_its_buffers(lib):
    """decode parses the data again: buffers made for other data give an error, not a write
    out of bounds."""
    small = saved(random_image(np.random.default_rng(13), 4, 4), "PNG")
    big = saved(random_image(np.random.default_rng(13), 40, 40), "PNG")
    _, (h, w, scratch), _ = probe(lib, small)
    x = clib.Arg(np.frombuffer(big, np.uint8))
    status, _, _ = clib.call("image_decode", [x, clib.Arg(shape=(scratch,), dtype=np.uint8),
                                              clib.Arg(shape=(h, w, 3), dtype=np.uint8)], params=[0], lib=lib)
    assert status == INTERNAL
    _, (h, w, scratch), _ = probe(lib, big)
    for shape, work, pf in (((h, w, 1), scratch, 0), ((h, w, 3), scratch - 1, 0), ((h, w, 3), scratch, 3)):
        status, _, _ = clib.call("image_decode", [x, clib.Arg(shape=(work,), dtype=np.uint8),
                                                  clib.Arg(shape=shape, dtype=np.uint8)], params=[pf], lib=lib)
        assert status == INTERNAL


def sample_files() -> dict[str, bytes]:
    rng = np.random.default_rng(14)
    im = random_image(rng, 19, 23)
    return {
        "bmp": saved(im, "BMP"), "bmp-p": saved(im.quantize(16), "BMP"), "ppm": saved(im, "PPM"),
        "p3": b"P3\n2 2\n255\n1 2 3 4 5 6 7 8 9 10 11 12\n", "tiff": saved(im, "TIFF", strip_size=64),
        "png": saved(im, "PNG"), "png-p": saved(im.quantize(4), "PNG", bits=2),
        "png-adam7": png_file(np.array(im), 8, 2, interlace=True),
        "jpeg": saved(im, "JPEG", restart_marker_blocks=2), "jpeg-420": saved(im, "JPEG", subsampling=2, optimize=True),
        "jpeg-prog": saved(im, "JPEG", progressive=True),
        "bmp-rle8": rle_bmp(rng, 9, 5, False), "bmp-rle4": rle_bmp(rng, 9, 5, True),
    }


def rle_bmp(rng, w: int, h: int, rle4: bool) -> bytes:
    """An RLE BMP that Pillow decodes: every row filled by an absolute run."""
    rows = b""
    for _ in range(h):
        payload = rng.integers(0, 256, (w + 1) // 2 if rle4 else w, dtype=np.uint8).tobytes()
        rows += bytes([0, w]) + payload + b"\0" * (len(payload) % 2) + b"\0\0"
    bits = 4 if rle4 else 8
    pal = rng.integers(0, 256, 4 << bits, dtype=np.uint8).tobytes()
    data = bmp_file(bits, w, h, [], compression=2 if rle4 else 1, palette=pal, colors=1 << bits)
    return data[:2] + struct.pack("<I", len(data) + len(rows) + 2) + data[6:] + rows + b"\0\1"


@pytest.mark.parametrize("name", list(sample_files()))
def test_cancel(lib, name):
    data = sample_files()[name]
    assert decode(lib, data)[0] == OK
    assert decode(lib, data, cancel=1)[0] == CANCELLED


class GuardedBytes:
    """The data placed right before a page that cannot be read, so reading past its end
    crashes instead of passing unnoticed."""

    def __init__(self):
        import ctypes
        import mmap

        self.page = mmap.PAGESIZE
        self.pages = 64
        self.map = mmap.mmap(-1, (self.pages + 1) * self.page)
        base = ctypes.addressof(ctypes.c_char.from_buffer(self.map))
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        assert libc.mprotect(base + self.pages * self.page, self.page, 0) == 0

    def place(self, data: bytes) -> np.ndarray:
        end = self.pages * self.page
        assert len(data) <= end
        self.map[end - len(data):end] = data
        return np.frombuffer(self.map, np.uint8, count=len(data), offset=end - len(data))


def decode_guarded(lib, guard: GuardedBytes, data: bytes) -> int:
    x = clib.Arg(guard.place(data))
    status, scalars, detail = clib.call("image_probe", [x], lib=lib)
    assert status in (OK, INVALID_INPUT)
    if status != OK:
        assert 1 <= detail[0] <= 5
        return status
    h, w, scratch = scalars[:3]
    assert 1 <= h <= 16384 and 1 <= w <= 16384 and scratch >= 0
    if h * w * 3 + scratch > 64 << 20:  # a corrupted header asking for a very large image
        return status
    for pf in (0, 2):
        out = clib.Arg(shape=(h, w, 1 if pf == 2 else 3), dtype=np.uint8)
        status, _, detail = clib.call("image_decode", [x, clib.Arg(shape=(scratch,), dtype=np.uint8), out],
                                      params=[pf], lib=lib)
        assert status in (OK, INVALID_INPUT)
        assert status == OK or 1 <= detail[0] <= 5
    return status


def test_truncated_and_corrupted_files(lib):
    """Every sample file cut at many lengths and with random bytes changed: OK or a refusal,
    never a crash or a read past the end."""
    guard = GuardedBytes()
    rng = np.random.default_rng(15)
    cases = 0
    for name, data in sample_files().items():
        assert decode_guarded(lib, guard, data) == OK, name
        for cut in sorted(set(np.linspace(0, len(data) - 1, 16).astype(int))):
            decode_guarded(lib, guard, data[:cut])
            cases += 1
        for _ in range(24):
            b = bytearray(data)
            for _ in range(int(rng.integers(1, 5))):
                b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
            decode_guarded(lib, guard, bytes(b))
            cases += 1
    assert cases > 300


def wasm_imports(path) -> list[tuple[str, str, int]]:
    """(module, name, kind) of a wasm object's imports (kind 0: a function)."""
    data = path.read_bytes()

    def leb(i):
        value = shift = 0
        while True:
            byte = data[i]
            value, shift, i = value | (byte & 0x7F) << shift, shift + 7, i + 1
            if byte < 0x80:
                return value, i

    i, out = 8, []
    while i < len(data):
        section, (size, i) = data[i], leb(i + 1)
        if section == 2:
            j = i
            count, j = leb(j)
            for _ in range(count):
                names = []
                for _ in range(2):
                    n, j = leb(j)
                    names.append(data[j:j + n].decode())
                    j += n
                kind, j = data[j], j + 1
                if kind == 0:
                    _, j = leb(j)
                elif kind == 1:
                    j += 1
                    flags, j = data[j], j + 1
                    _, j = leb(j)
                    j = leb(j)[1] if flags & 1 else j
                elif kind == 2:
                    flags, j = data[j], j + 1
                    _, j = leb(j)
                    j = leb(j)[1] if flags & 1 else j
                else:
                    j += 2
                out.append((*names, kind))
        i += size
    return out


def test_compiles_for_wasm32(tmp_path):
    """Freestanding: no function imports (a memcmp the compiler turns a builtin into would
    leave the module unlinkable)."""
    r = clib.compile_wasm("sw_image.c", tmp_path / "sw_image.o")
    assert r.returncode == 0, r.stderr
    imports = wasm_imports(tmp_path / "sw_image.o")
    assert ("env", "__linear_memory", 2) in imports
    assert [i for i in imports if i[2] == 0] == []
