"""Every op on both targets, in the fast tier: each node test case of the onnx package that
passes on a target (tests/conformance/results.json, which `make conformance` writes) compiled
in families (tests/family.py: the cases of one opset, at most MAX_CASES to a module) and
compared with the outputs the case stores, as the conformance run compares them. A family
that fails to compile or to run is run again case by case, so a failure names its case.
This file checks wasm32, test_conformance_families_native.py native: as two files, the two
targets run on different workers (`--dist loadfile`)."""
import json
from pathlib import Path

import pytest

import family
from tests.conformance import run as conformance
from util import build

RESULTS = Path(__file__).parent / "conformance" / "results.json"


@pytest.fixture(scope="module")
def cases():
    conformance._init(None)
    return conformance._CASES


def _passing(target: str) -> list[str]:
    outcomes = json.loads(RESULTS.read_text())["cases"]
    return sorted(key.rsplit(" [", 1)[0] for key, (outcome, *_) in outcomes.items()
                  if key.endswith(f"[{target}]") and outcome == "pass")


@pytest.mark.parametrize("target", ["wasm32"])
def test_every_passing_case(target, cases, tmp_path):
    every_passing_case(target, cases, tmp_path)


def every_passing_case(target: str, cases: dict, tmp_path: Path) -> None:
    names = [n for n in _passing(target) if n in cases]
    assert len(names) > 1500, f"only {len(names)} passing cases of {RESULTS.name} are in the installed onnx"
    sets = {n: conformance.data_sets(cases[n], [i.name for i in cases[n].model.graph.input]) for n in names}
    members = [family.Case(cases[n].model, target, [feeds for feeds, _ in sets[n]], {}) for n in names]
    name_of = {id(c): n for c, n in zip(members, names)}
    failures = []
    for fam in family.families(members):
        fam.run(build)
        for case in fam.cases:
            name = name_of[id(case)]
            if fam.failed:  # alone, as the conformance run compiles it
                outcome, detail = conformance.run_case((name, target, str(tmp_path)))
                wrong = "" if outcome == "pass" else f"{outcome}: {detail}"
            else:
                outputs = [o.name for o in case.model.graph.output]
                wrong = next(filter(None, (conformance.compare(cases[name], outputs, [got[o] for o in outputs], want)
                                           for got, (_, want) in zip(fam.outputs[id(case)], sets[name]))), "")
            if wrong:
                failures.append(f"{name}: {wrong}")
    assert not failures, f"{len(failures)} of {len(names)} cases fail on {target}:\n" + "\n".join(failures)
