"""A slice of the run-time fuzz campaign (tests/fuzz/runtime_fuzz.py; ``make fuzz`` runs the
full one): legal feeds give onnx.reference's outputs, illegal ones a ModelError, and the
model runs correctly after every error, on both targets. Plus the failures the campaign
found, pinned."""
import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from tests.fuzz.runtime_fuzz import BAD, _group, _import_project, cases, campaign, schedule
from util import assert_outputs_match, build, make_model, reference, vinfo

pytestmark = pytest.mark.check  # make check and the full tier: a fuzz campaign's slice

SLICE = 600  # inputs in all, 300 per target


def test_campaign_slice_has_no_bad_outcomes():
    results = campaign(SLICE, seed=7)
    assert sorted(results) == ["native", "wasm32"]
    wanted = {kind for _, kind, _ in schedule(SLICE // 2, cases())}
    for target, tally in results.items():
        assert tally["inputs run"] == SLICE // 2, (target, dict(tally), tally.notes)
        assert {c: tally[c] for c in BAD} == dict.fromkeys(BAD, 0), "\n\n".join(tally.failures)
        # it must reach both outcomes and every kind of feed, or it tests less than it says
        assert tally["legal ok"] > 100 and tally["rejected"] > 100, (target, dict(tally))
        assert {kind for kind, _ in tally.kinds} == wanted, (target, wanted - {kind for kind, _ in tally.kinds})


def test_the_same_seed_draws_the_same_feeds():
    """What --seed promises, and what a child started after a crash relies on: it draws the
    inputs before the crash again (without running them) to reach the next one."""
    _import_project()  # as the child does, so hypothesis finds the same constants in both calls

    def feeds(seed):
        shown = []
        for case in cases()[:4]:
            for kind in ("legal", case.kinds[0]):
                _group(None, case, kind, count=4, seed=seed, first=0, start=4, show=3,
                       emit=lambda **ev: shown.append(ev["text"]))
        return shown

    first = feeds(5)
    assert len(first) == 8 and first == feeds(5)
    assert first != feeds(6)


def test_an_unknown_input_key_that_is_not_a_str(target):
    m = make_model([helper.make_node("Neg", ["x"], ["y"])], [vinfo("x", np.float32, ["n"])],
                   [vinfo("y", np.float32, None)])
    mod = build(m, target)
    feeds = {"x": np.arange(3, dtype=np.float32)}
    for extra in ({0: np.zeros(2)}, {None: np.zeros(2)}, {b"x": np.zeros(2)}, {"bogus": 1, 0: 1}):
        with pytest.raises(wasm_runtime.ModelError, match="unknown input") as e:
            mod.run({**feeds, **extra})
        assert e.value.status == 1
    assert_outputs_match(mod.run(feeds), reference(m, feeds))
