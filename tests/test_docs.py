"""The docs' facts against the tree (issue 35): every number the README takes from a build
or a count (the digits module's size, the op set, conformance, the model collections) is
read from the README and compared with the value computed here, so a change that moves one
fails until the README says the new value; and docs/DECISIONS.md keeps the form of short
decision records, docs/ARCHITECTURE.md names only files and members that exist."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import onnx
import onnx.defs
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DECISIONS = ROOT / "docs" / "DECISIONS.md"
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
RECORD_WORDS = 150  # issue 35: a decision record is under 150 words


def _find(pattern: str, text: str) -> re.Match:
    m = re.search(pattern, text)
    assert m, f"the README no longer says /{pattern}/: update this test with it"
    return m


def _int(s: str) -> int:
    return int(s.replace(",", ""))


@pytest.fixture(scope="module")
def digits_sizes(tmp_path_factory):
    """digits.onnx compiled as `make demo` compiles it (samples/build_samples.py: wasm32 with
    the relaxed variant): the files' sizes and the weights' bytes."""
    from toolkit.compiler import compile_model
    out = tmp_path_factory.mktemp("digits") / "digits.wasm"
    r = compile_model(onnx.load(ROOT / "samples" / "web" / "digits.onnx"), out, target="wasm32", relaxed=True)
    return {p.name: p.stat().st_size for p in r.variants.values()}, r.weights_bytes


def test_the_digits_module_size_is_what_the_build_makes(digits_sizes):
    sizes, weights = digits_sizes
    text = README.read_text()
    wasm = sizes["digits.wasm"] / 1e3
    said = _int(_find(r"a (\d+) kB `\.wasm` reads it in a Web Worker", text).group(1))
    assert abs(said - wasm) <= 0.1 * wasm, f"README says a {said} kB .wasm; make demo builds {wasm:.0f} kB"
    m = _find(r"`digits\.onnx` is (\d+) kB\. `digits\.wasm` is (\d+) kB, of which (\d+) kB\s+\((\d+)%\) are weights",
              text)
    onnx_kb = (ROOT / "samples" / "web" / "digits.onnx").stat().st_size / 1e3
    assert abs(_int(m[1]) - onnx_kb) <= 0.1 * onnx_kb, f"README: digits.onnx {m[1]} kB, it is {onnx_kb:.0f} kB"
    assert abs(_int(m[2]) - wasm) <= 0.1 * wasm, f"README: digits.wasm {m[2]} kB; make demo builds {wasm:.0f} kB"
    assert abs(_int(m[3]) - weights / 1e3) <= 0.1 * weights / 1e3, \
        f"README: {m[3]} kB of weights; the build has {weights / 1e3:.0f} kB"
    share = 100 * weights / sizes["digits.wasm"]
    assert abs(_int(m[4]) - share) <= 3, f"README: weights {m[4]}% of the module; the build {share:.0f}%"
    assert abs(sizes["digits.relaxed.wasm"] - sizes["digits.wasm"]) <= 0.01 * sizes["digits.wasm"], \
        f"README: digits.relaxed.wasm is the same size; the build: {sizes}"


def test_the_op_set_counts_are_the_registry_s():
    from toolkit.frontend.onnx.translate import registry
    m = _find(r"all (\d+) ops of the standard domain: (\d+) translated, (\d+) more through their ONNX\s+functions",
              README.read_text())
    schemas = [s for s in onnx.defs.get_all_schemas_with_history() if s.domain in ("", "ai.onnx")]
    ops = {s.name for s in schemas}
    translated = ops & set(registry().ops(""))
    functions = {s.name for s in schemas if s.has_function or s.has_context_dependent_function} - translated
    said, real = (_int(m[1]), _int(m[2]), _int(m[3])), (len(ops), len(translated), len(functions))
    assert said == real, f"README: ops, translated, functions {said}; the registry has {real}"
    assert translated | functions == ops, f"ops neither translated nor functions: {sorted(ops - translated - functions)}"


def test_the_conformance_counts_are_the_last_run_s():
    """The README's figures against tests/conformance/results.json (what `make conformance`
    wrote) and the installed onnx's node cases."""
    from tests.conformance.run import all_cases
    text = README.read_text()
    results = json.loads((ROOT / "tests" / "conformance" / "results.json").read_text())
    per_target = {k: v // len(results["targets"]) for k, v in results["totals"].items()}
    cases = sum(per_target.values())
    m = _find(r"\(onnx ([\d.]+): ([\d,]+) cases\)", text)
    assert onnx.__version__.startswith(m[1] + "."), f"README names onnx {m[1]}; installed {onnx.__version__}"
    node_cases = len(all_cases())
    assert _int(m[2]) == cases == node_cases, f"README: {m[2]} cases; results.json {cases}, onnx {node_cases}"
    m = _find(r"\*\*([\d,]+) of ([\d,]+) cases pass on each target \(([\d.]+)%\)\*\*", text)
    assert (_int(m[1]), _int(m[2])) == (per_target["pass"], cases), \
        f"README: {m[1]} of {m[2]} pass; results.json: {per_target['pass']} of {cases}"
    assert m[3] == f"{100 * per_target['pass'] / cases:.1f}", f"README: {m[3]}%"
    skipped = _int(_find(r"the (\d+) cases `exclusions\.txt` skips", text)[1])
    assert skipped == per_target["skipped"], f"README: {skipped} skipped; results.json {per_target['skipped']}"


def test_the_model_collections_counts():
    text = README.read_text()
    zoo = json.loads((ROOT / "tests" / "models" / "zoo" / "zoo.json").read_text())
    m = _find(r"`tests/models/zoo/` holds (\d+) tiny", text)
    passing = _int(_find(r"all (\d+) pass on both\s+targets", text)[1])
    assert _int(m[1]) == len(zoo) == passing, f"README: the zoo holds {m[1]}, all {passing} pass; zoo.json has {len(zoo)}"
    exporters = json.loads((ROOT / "tests" / "models" / "exporters" / "exporters.json").read_text())
    n = len(exporters["models"])
    held = _int(_find(r"`tests/models/exporters/` holds (\d+) models", text)[1])
    passing = _int(_find(r"all\s+(\d+) pass \(a model symwasm refuses", text)[1])
    assert held == passing == n, f"README: exporters hold {held}, all {passing} pass; exporters.json has {n}"


def test_the_digits_accuracy_is_the_recorded_one():
    m = _find(r"\*\*([\d.]+)% \((\d+) of (\d+) test digits\)\*\*", README.read_text())
    rec = json.loads((ROOT / "samples" / "web" / "digits.json").read_text())
    assert (_int(m[2]), _int(m[3])) == (rec["test_correct"], rec["split"]["test"]), \
        f"README: {m[2]} of {m[3]}; digits.json: {rec['test_correct']} of {rec['split']['test']}"
    assert m[1] == f"{100 * rec['test_correct'] / rec['split']['test']:.1f}", f"README: {m[1]}%"


def test_decisions_are_short_records():
    """### D<n>. title, then Decision, Why and Status; numbered in order; under 150 words;
    a superseded record names one that exists; figure links land on an anchor."""
    text = DECISIONS.read_text()
    records = re.split(r"^### ", text, flags=re.M)[1:]
    assert records, "no ### D<n>. records"
    figures = {}
    for i, rec in enumerate(records, 1):
        rec = rec.split("\n## ")[0]
        head = rec.splitlines()[0]
        assert head.startswith(f"D{i}. "), f"record {i} is headed {head!r}"
        for field in ("**Decision.**", "**Why.**", "**Status:**"):
            assert field in rec, f"D{i} has no {field}"
        words = len(rec.split("\n", 1)[1].split())
        assert words < RECORD_WORDS, f"D{i} has {words} words"
        status = _find(r"\*\*Status:\*\* (active|superseded by D(\d+)|retired)", rec)
        if status[2]:
            assert 1 <= int(status[2]) <= len(records) and int(status[2]) != i, f"D{i}: {status[0]}"
        for path, anchor in re.findall(r"\]\(\.\./([\w/.-]+\.md)#([\w-]+)\)", rec):
            if path not in figures:
                figures[path] = set(re.findall(r'<a id="([\w-]+)"></a>', (ROOT / path).read_text()))
            assert anchor in figures[path], f"D{i} links to {path}#{anchor}, which has no such anchor"


def _tracked() -> list[str]:
    return subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()


def test_architecture_names_exist():
    """Every file path ARCHITECTURE.md puts in backticks is a tracked file or folder (given
    whole or by its tail), and every `Class.member` it names is defined on that class."""
    text = ARCHITECTURE.read_text()
    files = _tracked()
    tokens = set(re.findall(r"`([^`\n]+)`", text))
    paths = {t for t in tokens if re.fullmatch(r"[\w.-]+(/[\w.-]+)*/?\.?\w*", t) and
             (t.endswith((".py", ".c", ".h", ".js", ".md")) or "/" in t)}
    missing = [p for p in paths if not any(f == p.rstrip("/") or f.endswith("/" + p) or f.startswith(p.rstrip("/") + "/")
                                           for f in files)]
    assert not missing, f"ARCHITECTURE.md names files that do not exist: {missing}"
    sources = {f: (ROOT / f).read_text() for f in files
               if f.startswith(("toolkit/", "wasm_runtime/")) and f.endswith(".py") and (ROOT / f).exists()}
    for tok in tokens:
        m = re.fullmatch(r"([A-Z]\w*)\.(\w+)(\(\))?", tok)
        if not m:
            continue
        cls, member = m[1], m[2]
        homes = [src for src in sources.values() if re.search(rf"^class {cls}\b", src, re.M)]
        if not homes:
            continue  # not one of ours (a wasm instruction, an onnx class)
        assert any(re.search(rf"def {member}\b|^\s+{member}\s*[:=]|self\.{member}\s*[:=]", src, re.M)
                   for src in homes), f"ARCHITECTURE.md names {tok}, which class {cls} does not define"


CODEGEN_README = ROOT / "toolkit" / "codegen" / "README.md"


def test_codegen_readme_names_exist():
    """toolkit/codegen/README.md names only what exists, as ARCHITECTURE.md must: each path in
    backticks is a tracked file or folder (a bare name is one of toolkit/codegen/), each
    `name()` a function defined in toolkit/, benchmarks/ or tests/, each `test_name` a test,
    each `CONSTANT` one assigned in toolkit/codegen/, each `Class` and `Class.member` defined."""
    text = CODEGEN_README.read_text()
    files = set(_tracked())
    tokens = set(re.findall(r"`([^`\n]+)`", text))
    sources = {f: (ROOT / f).read_text() for f in files
               if f.startswith(("toolkit/", "benchmarks/", "tests/")) and f.endswith(".py") and (ROOT / f).exists()}
    everything = "\n".join(sources.values())
    codegen = "\n".join(src for f, src in sources.items() if f.startswith("toolkit/codegen/"))
    tests = "\n".join(src for f, src in sources.items() if f.startswith("tests/"))
    wrong = []
    for tok in sorted(tokens):
        if re.fullmatch(r"[\w.-]+(/[\w.-]+)*/?", tok) and (tok.endswith((".py", ".c", ".h", ".js", ".md")) or "/" in tok):
            p = tok.rstrip("/")
            if not ("toolkit/codegen/" + p in files or p in files or any(f.startswith(p + "/") for f in files)):
                wrong.append(f"no file {tok}")
        elif m := re.fullmatch(r"(?:\w+\.)*(\w+)\(\)", tok):
            if not re.search(rf"^\s*def {m[1]}\b", everything, re.M):
                wrong.append(f"no function {tok}")
        elif re.fullmatch(r"test_\w+", tok):
            if not re.search(rf"^def {tok}\(", tests, re.M):
                wrong.append(f"no test {tok}")
        elif re.fullmatch(r"[A-Z][A-Z0-9_]{2,}", tok):
            if not re.search(rf"^{tok}\s*[:=]|^(\w+, )+{tok}\b.*=|^{tok}, ", codegen, re.M):
                wrong.append(f"no constant {tok} in toolkit/codegen/")
        elif m := re.fullmatch(r"([A-Z]\w*)(?:\.(\w+))?", tok):
            homes = [src for src in sources.values() if re.search(rf"^class {m[1]}\b", src, re.M)]
            if not homes:
                wrong.append(f"no class {m[1]}")
            elif m[2] and not any(re.search(rf"def {m[2]}\b|^\s+{m[2]}\s*[:=]", src, re.M) for src in homes):
                wrong.append(f"class {m[1]} defines no {m[2]}")
    assert not wrong, f"toolkit/codegen/README.md names what does not exist: {wrong}"
