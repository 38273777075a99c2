"""A slice of the module-tampering campaign (``make fuzz`` runs the full one): one program word
changed per module, with and without a rewritten checksum, on both targets. No crash, hang,
trap, traceback or wrong result; the campaign must reach refusals and run-time errors, or it
tests nothing."""
from collections import Counter

import pytest

from tests.fuzz.tamper import BAD, campaign

pytestmark = pytest.mark.check  # make check and the full tier: a fuzz campaign's slice


def test_tamper_slice():
    results = campaign(12, seed=7, quiet=True)
    total = sum(results.values(), Counter())
    assert sum(total[k] for k in BAD) == 0, results
    for target in ("wasm32", "native"):
        # a corrupt file never loads: its checksum gives it away
        assert results[f"{target} corrupt"] == Counter({"refused at load": 12}), results
    assert total["refused at load"] > 24 and total["run error"] > 0, results
