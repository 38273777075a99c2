"""Every op on both targets: each node test case of the onnx package that passes on a target
(tests/conformance/results.json, which `make conformance` writes) compiled in families
(tests/family.py: the cases of one opset, at most MAX_CASES to a module) and compared with the
outputs the case stores, as the conformance run compares them. A family that fails to compile
or to run is run again case by case, so a failure names its case. This file checks wasm32,
test_conformance_families_native.py native: as two files, the two targets run on different
workers (`--dist loadfile`). The fast and check tiers check :data:`PER_OP` cases of each op
(spread over its cases in name order), the full tier every one."""
import json
from pathlib import Path

import pytest

import family
from tests.conformance import run as conformance
from util import build

RESULTS = Path(__file__).parent / "conformance" / "results.json"
PER_OP = 2  # the fast and check tiers' cases of an op: its first and its last


@pytest.fixture(scope="module")
def cases():
    conformance._init(None)
    return conformance._CASES


def _passing(target: str) -> list[str]:
    outcomes = json.loads(RESULTS.read_text())["cases"]
    return sorted(key.rsplit(" [", 1)[0] for key, (outcome, *_) in outcomes.items()
                  if key.endswith(f"[{target}]") and outcome == "pass")


def sample(names: list[str], cases: dict, per_op: int = PER_OP) -> list[str]:
    """At most ``per_op`` of each op's cases (by the op of its last node, as the conformance
    table counts them), evenly spread over them in name order: every op, fewer cases."""
    by_op: dict[str, list[str]] = {}
    for n in names:
        by_op.setdefault(conformance._op_of(cases[n]), []).append(n)
    keep = set()
    for group in by_op.values():
        k = min(per_op, len(group))
        keep.update(group[round(i * (len(group) - 1) / max(k - 1, 1))] for i in range(k))
    return [n for n in names if n in keep]


@pytest.mark.parametrize("target", ["wasm32"])
def test_every_passing_case(target, cases, tmp_path, tier):
    every_passing_case(target, cases, tmp_path, tier)


def every_passing_case(target: str, cases: dict, tmp_path: Path, tier: str) -> None:
    names = [n for n in _passing(target) if n in cases]
    assert len(names) > 1500, f"only {len(names)} passing cases of {RESULTS.name} are in the installed onnx"
    if tier != "full":
        names = sample(names, cases)
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


def test_the_fast_sample_has_every_op(cases):
    """The fast and check tiers' sample keeps every op of the passing cases, at most PER_OP of each."""
    names = [n for n in _passing("wasm32") if n in cases]
    kept = sample(names, cases)
    ops = {conformance._op_of(cases[n]) for n in names}
    assert {conformance._op_of(cases[n]) for n in kept} == ops
    assert len(ops) <= len(kept) <= PER_OP * len(ops) < len(names)
    assert kept[0] == names[0] and kept[-1] in names
