# symwasm: `make demo` and `make test` set up everything they need on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)
JOBS ?= 2
BUILD := build

.PHONY: all env demo test check check-all check-facts lint bench bench-peak bench-first bench-ops clean abi fuzz conformance zoo-models digits-model \
	exporter-models

all: demo

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

env: $(STAMP)

js_loader/node_modules/.installed: js_loader/package.json js_loader/package-lock.json
	cd js_loader && npm ci --no-audit --no-fund --silent
	touch $@

# the browser tests drive Debian's Chromium (a browser download by npm is not possible here)
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
$(CHROMIUM):
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium

# every generated file (toolkit/generate.py: the ABI and ISA headers, the loaders' tables,
# the regex and case-table headers) must match its source; `abi` is the older name
.PHONY: generated
generated: env
	$(PY) -m toolkit.generate --check
abi: generated

demo: env js_loader/node_modules/.installed
	$(PY) samples/build_samples.py --out $(BUILD)/samples
	$(PY) samples/run_python.py $(BUILD)/samples
	node samples/run_node.mjs $(BUILD)/samples
	@echo "The web app (samples/web/) and the other samples run in a browser: serve the repository with"
	@echo "  $(PY) -m http.server -b 127.0.0.1 8000"
	@echo "and open http://127.0.0.1:8000/samples/web/ (or http://127.0.0.1:8000/samples/browser/)"

# unused names, undefined names and syntax errors
lint: env
	$(PY) -m ruff check --quiet --select F,E9 toolkit wasm_runtime tests samples benchmarks js_loader/test

# Three tiers (tests/conftest.py). The fast one, `make test` (minutes): every test function on
# each target it names with its first parametrization (of a kernel test's CPU levels, the first;
# tests/test_plans.py runs every route at every level), a sample of each op's onnx node cases on
# both targets (in families), no whole models. Each test file runs in one worker (--dist
# loadfile), which compiles the file's op families once (tests/family.py), except the files of
# whole models (tests/conftest.py's SPREAD), whose tests go to the workers one by one. The 25
# slowest tests are listed at the end, where a slow tier shows where its time went.
PYTEST := $(PY) -m pytest -n $(JOBS) --dist loadfile -q --durations=25
test: env generated lint
	$(PYTEST) --tier fast

# `make check`, which CI runs (.ci/run): the fast tier and everything marked `check` (the zoo,
# the exporters' models, the regressions, the wheel's models, installs, threads, cancellation,
# fuzz slices, the conformance runner), in one pass where the real graphs (marked `facts`) check
# their facts at run time on wasm32 and compile plainly natively (the facts come from the graph
# passes, which differ between the targets only in kernel plans and in folding quantized weights
# natively; check-all checks both, in a second pass), the JS loader in Node and in Chromium
check: env generated lint js_loader/node_modules/.installed $(CHROMIUM)
	$(PYTEST) --tier check --check-facts wasm32
	cd js_loader && npm test

# every test at every parametrization and CPU level, every onnx node case on both targets (about
# three times `make check`'s time): before a change to kernels or the compiler's passes lands
check-all: env generated lint js_loader/node_modules/.installed $(CHROMIUM)
	$(PYTEST) --tier full
	SYMWASM_CHECK_FACTS=1 $(PYTEST) -p no:cacheprovider -m facts
	cd js_loader && npm test

# the whole test suite with every compile checking its facts (make check checks the real graphs');
# tests that assert on a program's text or on what is computed see the checks' extra code
check-facts: env
	SYMWASM_CHECK_FACTS=1 $(PYTEST) -p no:cacheprovider

# fuzzing campaigns with fixed seeds (a smaller slice of each runs in `make test`): malformed
# ONNX models, tampered modules (per target and mode), run-time inputs (split over the targets),
# and the C libraries (wasm_runtime/clib) natively under sanitizers on mutated images, regex
# inputs and text (about 2 minutes; findings are saved under /tmp/symwasm-clib-fuzz)
FUZZ_CASES ?= 1000
FUZZ_TAMPER ?= 150
FUZZ_INPUTS ?= 10000
FUZZ_CLIB ?= 200000
fuzz: env
	PYTHONPATH=. $(PY) -m tests.fuzz.onnx_mutator --cases $(FUZZ_CASES) --full
	PYTHONPATH=. $(PY) -m tests.fuzz.tamper --cases $(FUZZ_TAMPER)
	PYTHONPATH=. $(PY) -m tests.fuzz.runtime_fuzz --inputs $(FUZZ_INPUTS)
	PYTHONPATH=. $(PY) -m tests.fuzz.clib_fuzz --cases $(FUZZ_CLIB)

# the onnx package's node test cases on both targets, each in a worker process; prints a
# per-op table and writes every outcome to tests/conformance/results.json (committed), and
# fails if a case fails that tests/conformance/known_failures.txt does not explain; then
# the wheel's nine light models on both targets (as shipped, and with a symbolic batch), and the
# zoo of exported models (tests/models/zoo; `make test` runs it too)
conformance: env
	bash -o pipefail -c 'PYTHONPATH=. $(PY) -m tests.conformance.run --jobs $(JOBS) \
		--results tests/conformance/results.json | tee tests/conformance/RESULTS.md'
	SYMWASM_LIGHT=all $(PY) -m pytest -n $(JOBS) -q tests/test_light_models.py tests/test_zoo.py

bench: env js_loader/node_modules/.installed $(CHROMIUM)
	cd benchmarks && npm ci --no-audit --no-fund --silent
	$(PY) benchmarks/run.py $(BENCH_ARGS)
	$(if $(findstring --zoo,$(BENCH_ARGS)),,$(PY) benchmarks/browser_bench.py --append $(BUILD)/bench_results.md $(BROWSER_BENCH_ARGS))
	$(MAKE) bench-peak
	$(MAKE) bench-first FIRST_ARGS="$(if $(findstring --zoo,$(BENCH_ARGS)),--zoo) $(FIRST_ARGS)"

# time to first result and memory, as a fresh process meets each model (import, load, first
# run; wasmtime's code cache off) against onnxruntime's session creation and first run, and
# the download's weights against the parameters: FIRST_ARGS="--models cnn --repeat 5"
bench-first: env
	$(PY) benchmarks/first_result.py --out $(BUILD)/first_result.md $(FIRST_ARGS)

# the GEMM kernel's GFLOP/s against this machine's measured multiply-add peak (wasmtime, Node,
# native); PEAK_ARGS=--quick for a shorter run
bench-peak: env
	$(PY) benchmarks/gemm_peak.py --out $(BUILD)/gemm_peak.md $(PEAK_ARGS)

# single-op models against their peer in the same engine (symwasm in Node vs onnxruntime-web,
# then natively vs onnxruntime): OPS_ARGS="--ops pow,resize" for some of them
bench-ops: env js_loader/node_modules/.installed
	cd benchmarks && npm ci --no-audit --no-fund --silent
	$(PY) benchmarks/ops.py --pair web $(OPS_ARGS)
	$(PY) benchmarks/ops.py --pair native $(OPS_ARGS)

# the zoo of exported models in tests/models/zoo is committed, and `make test` only reads it;
# this rebuilds it with torch, transformers and onnxruntime's quantizer, in a dev environment
# of its own (torch 2.13.0 is a CPU build where a local wheel exists, else PyPI's CUDA build)
ZOO_VENV := .venv-zoo
ZOO_PACKAGES := torch==2.13.0 transformers==5.23.0 onnx==1.19.1 onnxruntime==1.32.0 onnxscript==0.7.2 numpy
zoo-models:
	[ -x $(ZOO_VENV)/bin/python ] || $(PYTHON) -m venv $(ZOO_VENV)
	$(ZOO_VENV)/bin/python -m pip install -q $(ZOO_PACKAGES)
	$(ZOO_VENV)/bin/python tests/models/generate.py $(ZOO_ARGS)

# the zoo of models from other exporters in tests/models/exporters is committed too, and `make test`
# only reads it; this rebuilds it in a dev environment of its own (tf2onnx, paddle2onnx, skl2onnx,
# spox, onnxscript, onnxruntime's quantizer and optimizer; the models shipped in wheels are pip
# downloads). paddle2onnx 2.1.0 needs onnx <= 1.17.0. Then, with the project's environment,
# tests/models/exporters/survey.py rewrites the list of what symwasm fails on.
EXPORTERS_VENV := .venv-exporters
EXPORTERS_PACKAGES := tensorflow-cpu==2.21.0 tf2onnx==1.17.0 paddlepaddle==3.3.1 paddle2onnx==2.1.0 \
	skl2onnx==1.20.0 scikit-learn==1.9.1 spox==0.18.2 onnxscript==0.7.2 onnxruntime==1.32.0 onnx==1.17.0 \
	numpy==2.4.6
exporter-models:
	[ -x $(EXPORTERS_VENV)/bin/python ] || $(PYTHON) -m venv $(EXPORTERS_VENV)
	$(EXPORTERS_VENV)/bin/python -m pip install -q $(EXPORTERS_PACKAGES)
	$(EXPORTERS_VENV)/bin/python tests/models/exporters/generate.py $(EXPORTERS_ARGS)

# the web app's digit classifier (samples/web/digits.onnx and digits.json, with its held-out
# accuracy) is committed, and `make demo` / `make test` only read it; this trains it again
# (deterministically: the same bytes) in the zoo's dev environment
DIGITS_PACKAGES := torch==2.13.0 scikit-learn==1.9.1 onnx==1.19.1 onnxruntime==1.32.0 numpy
digits-model:
	[ -x $(ZOO_VENV)/bin/python ] || $(PYTHON) -m venv $(ZOO_VENV)
	$(ZOO_VENV)/bin/python -m pip install -q $(DIGITS_PACKAGES)
	$(ZOO_VENV)/bin/python samples/web/train_digits.py

clean:
	rm -rf $(BUILD) .pytest_cache
