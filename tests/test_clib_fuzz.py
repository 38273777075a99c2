"""A fixed-seed slice of the C libraries' fuzz campaign (tests/fuzz/clib_fuzz.py; `make fuzz`
runs the whole one): natively under AddressSanitizer and UndefinedBehaviorSanitizer (gcc)
when this machine has them, and under zig's UndefinedBehaviorSanitizer with guard pages.
The seed images decode, the slice finds nothing, and a campaign over a copy of the libraries
with a bounds check loosened finds it: the sanitizers and the driver's buffers are live."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from tests.fuzz import clib_fuzz

pytestmark = pytest.mark.check  # the full tier: builds sanitized drivers and runs thousands of cases

# seeds of what the decoder refuses by design (CMYK, 16-bit gray, BigTIFF, WebP, JPEG 2000, PFM)
REFUSED_SEEDS = {"jpeg-cmyk", "png-I;16", "tiff-big", "webp", "jp2", "pfm"}


def _run(cc: str, cases: list[bytes]) -> dict[int, int]:
    exe = clib_fuzz.build(cc)
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i, data in enumerate(cases):
            files.append(Path(tmp) / f"{i}.bin")
            files[-1].write_bytes(data)
        done, died, report = clib_fuzz.run_batch(exe, files, timeout=300)
    assert died is None, report
    return done


def test_every_seed_image_decodes():
    seeds = clib_fuzz.image_seeds()
    done = _run(clib_fuzz.compiler(), [clib_fuzz.encode_image(data, 0) for _, data in seeds])
    formats = {name.split("-")[0] for name, _ in seeds}
    assert {"bmp", "png", "jpeg", "tiff", "pnm"} <= formats | {"ppm"}
    refused = {seeds[i][0] for i, status in done.items() if status != 0}
    assert refused == REFUSED_SEEDS


def test_a_fixed_seed_slice_finds_nothing(tmp_path):
    r = clib_fuzz.campaign(6000, seed=0, cc="auto", out=tmp_path, progress=lambda _: None)
    assert not r["findings"], r["findings"]
    outcomes = r["outcomes"]
    # the cases reach the decoders and the kernels, not only their first refusal
    assert outcomes["image", "ok"] > 500 and outcomes["image", "refused"] > 1000
    assert outcomes["regex", "ok"] > 100 and outcomes["regex", "internal"] > 10
    assert outcomes["text", "ok"] > 500


@pytest.mark.skipif(clib_fuzz.compiler() == "zig", reason="the auto slice already ran with zig")
def test_a_slice_built_with_zig_finds_nothing(tmp_path):
    r = clib_fuzz.campaign(1500, seed=1, cc="zig", out=tmp_path, progress=lambda _: None)
    assert not r["findings"], r["findings"]


@pytest.mark.parametrize("cc", ["auto", "zig"])
def test_the_campaign_finds_a_bounds_check_loosened(tmp_path, cc):
    """sw_image.c's has() (every read of the file goes through it) allowing 8 bytes past the
    end: the campaign reports reads past the data, with a reproducer that replays."""
    clib = tmp_path / "clib"
    shutil.copytree(clib_fuzz.CLIB_DIR, clib)
    src = (clib / "sw_image.c").read_text()
    check = ("static int has(const img_bytes* d, uint64_t off, uint64_t len) "
             "{ return off <= d->n && len <= d->n - off; }")
    assert check in src, "sw_image.c's bounds check changed: update this test"
    (clib / "sw_image.c").write_text(src.replace(check, check.replace("d->n", "(d->n + 8)")))
    r = clib_fuzz.campaign(1000, seed=5, cc=cc, out=tmp_path / "out", progress=lambda _: None, clib_dir=clib)
    assert r["findings"], "a bounds check loosened went unnoticed"
    first = r["findings"][0]
    assert "heap-buffer-overflow" in first["first"] or "SIGSEGV" in first["first"], first
    assert Path(first["reproducer"]).exists() and Path(first["reproducer"]).with_suffix(".txt").exists()
