// The in-browser benchmark: symwasm (through the JS loader) and onnxruntime-web (the npm
// package's wasm backend) on the same models and inputs in this page, one thread each.
// benchmarks/browser_bench.py writes the manifest (models, inputs, onnxruntime's outputs)
// and runs this page headless; a person can open it and press Run.
import { DTYPES, loadModel, supportedVariants } from '../../js_loader/index.js';

const ORT_DIST = new URL('../../benchmarks/node_modules/onnxruntime-web/dist/', import.meta.url);
const query = new URLSearchParams(location.search);
const MANIFEST = new URL(query.get('manifest') ?? '../../build/browser_bench/manifest.json', location.href);
const SETTINGS = {
  warmup: Number(query.get('warmup') ?? 1), // s before a peer's first timing of a model: V8 tiers wasm up meanwhile
  rewarm: 0.25, // s before its later timings, after the other peers ran
  time: Number(query.get('time') ?? 1), // s timed per repetition
  repeat: Number(query.get('repeat') ?? 3),
  loads: 3, // the load time is the median of this many loads
  minSamples: 5,
  // performance.now() is coarsened to 0.1 ms in a page that is not cross-origin isolated, so
  // calls are timed in batches of about this many ms, each sample a batch's mean
  batchMs: 5,
};

let ort = null;

const PEERS = [
  { name: 'symwasm', load: (entry) => symwasm(entry, 'auto') },
  { name: 'symwasm-baseline', load: (entry) => symwasm(entry, 'baseline') },
  { name: 'onnxruntime-web', load: onnxruntimeWeb },
];

async function symwasm(entry, variant) {
  if (entry.wasm_error) throw new Error(entry.wasm_error);
  const model = await loadModel(new URL(entry.wasm, MANIFEST), { variant });
  return {
    variant: model.variant,
    feeds: (inputs) => Object.fromEntries(inputs.map(({ name, data, shape }) => [name, { data, shape }])),
    run: (feeds) => model.run(feeds),
    outputs: (raw) => model.outputs.map(({ name }) => ({ name, ...raw[name] })),
    dispose: () => model.dispose(),
  };
}

async function onnxruntimeWeb(entry) {
  const session = await ort.InferenceSession.create(new URL(entry.onnx, MANIFEST).href,
    // severity 3: errors only, not its notes on unused initializers (console errors in a browser)
    { executionProviders: ['wasm'], graphOptimizationLevel: 'all', logSeverityLevel: 3 });
  return {
    feeds: (inputs) => Object.fromEntries(inputs.map(({ name, data, shape, dtype }) => [name, new ort.Tensor(dtype, data, shape)])),
    run: (feeds) => session.run(feeds),
    outputs: (raw) => session.outputNames.map((name) => ({ name, dtype: raw[name].type, shape: raw[name].dims, data: raw[name].data })),
    dispose: () => session.release(),
  };
}

async function startOnnxruntime() {
  ort = await import(new URL('ort.wasm.min.mjs', ORT_DIST).href);
  ort.env.wasm.numThreads = 1;
  ort.env.wasm.wasmPaths = ORT_DIST.href;
}

/** A raw little-endian tensor file as {name, dtype, shape, data}. */
async function fetchTensor({ name, dtype, shape, file }) {
  const response = await fetch(new URL(file, MANIFEST));
  if (!response.ok) throw new Error(`${response.url}: HTTP ${response.status}`);
  return { name, dtype, shape, data: new DTYPES[dtype].array(await response.arrayBuffer()) };
}

/** Why `got` differs from `want` (numpy's allclose for floats, exact otherwise), or null. */
function mismatch(got, want, [rtol, atol]) {
  if (got.length !== want.length) return `${got.length} outputs, expected ${want.length}`;
  for (const [i, w] of want.entries()) {
    const g = got[i];
    if (g.dtype !== w.dtype || JSON.stringify(g.shape.map(Number)) !== JSON.stringify(w.shape)) {
      return `${w.name} is ${g.dtype}[${g.shape}], expected ${w.dtype}[${w.shape}]`;
    }
    const float = w.dtype.startsWith('float');
    for (let k = 0; k < w.data.length; k++) {
      const [a, b] = [g.data[k], w.data[k]];
      if (float ? !(Math.abs(a - b) <= atol + rtol * Math.abs(b)) : a !== b) return `${w.name}[${k}] = ${a}, expected ${b}`;
    }
  }
  return null;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** Runs for `seconds`; returns how many calls make a batch of about SETTINGS.batchMs. */
async function warm(peer, feeds, seconds) {
  const t0 = performance.now();
  let calls = 0;
  do {
    await peer.run(feeds);
    calls++;
  } while (performance.now() - t0 < seconds * 1000);
  return Math.max(1, Math.ceil(SETTINGS.batchMs / ((performance.now() - t0) / calls)));
}

/** Per-call ms of batches run for `seconds` (and at least SETTINGS.minSamples batches). */
async function time(peer, feeds, seconds, batch) {
  const samples = [];
  const end = performance.now() + seconds * 1000;
  while (samples.length < SETTINGS.minSamples || performance.now() < end) {
    const t0 = performance.now();
    for (let i = 0; i < batch; i++) await peer.run(feeds);
    samples.push((performance.now() - t0) / batch);
  }
  return samples;
}

// ---------------------------------------------------------------- the table

const $ = (id) => document.getElementById(id);
const fmt = (x) => (x >= 1000 ? x.toFixed(0) : x.toPrecision(3));
const LABELS = { symwasm: 'symwasm', 'symwasm-baseline': 'baseline SIMD', 'onnxruntime-web': 'onnxruntime-web' };
const COLUMNS = [
  ['', 'model', (r) => r.model],
  ['', 'config', (r) => r.config],
  ...PEERS.map(({ name }) => ['ms per call', LABELS[name], (r) => latency(r.peers[name])]),
  ['ratio', 'symwasm / ort-web', (r) => ratio(r.peers.symwasm, r.peers['onnxruntime-web'])],
  ...PEERS.map(({ name }) => ['load ms', LABELS[name], (r) => (r.peers[name]?.load_ms === undefined ? '–' : fmt(r.peers[name].load_ms))]),
];

function latency(cell) {
  if (!cell) return '…';
  if (cell.error) return `error: ${cell.error}`;
  if (cell.median_ms === undefined) return '…';
  return `${fmt(cell.median_ms)} (${fmt(cell.lo_ms)}–${fmt(cell.hi_ms)})${cell.check ? ' ✗' : ''}`;
}

function ratio(a, b) {
  return a?.median_ms !== undefined && b?.median_ms !== undefined ? (a.median_ms / b.median_ms).toFixed(2) : '–';
}

function show(rows) {
  // a group's heading spans its run of columns
  const groups = [];
  for (const [group] of COLUMNS) {
    if (groups.at(-1)?.[0] === group) groups.at(-1)[1]++;
    else groups.push([group, 1]);
  }
  $('head').innerHTML = `<tr class="group">${groups.map(([g, n]) => `<th colspan="${n}">${g}</th>`).join('')}</tr>`
    + `<tr>${COLUMNS.map(([, h]) => `<th>${h}</th>`).join('')}</tr>`;
  $('rows').innerHTML = rows.map((r) => `<tr>${COLUMNS.map(([, , f]) => `<td>${f(r)}</td>`).join('')}</tr>`).join('');
}

function progress(text) {
  $('status').textContent = text;
  console.log(text);
}

// ---------------------------------------------------------------- the run

async function benchModel(entry, rows, tolerance) {
  // each peer loads the model SETTINGS.loads times, taking turns: whoever loads first also pays
  // for the file's first read and the page's first calls, so one load each would favour the last
  const peers = {};
  const cells = Object.fromEntries(PEERS.map(({ name }) => [name, { loads: [] }]));
  for (let rep = 0; rep < SETTINGS.loads; rep++) {
    for (const { name, load } of PEERS.slice(rep % PEERS.length).concat(PEERS.slice(0, rep % PEERS.length))) {
      const cell = cells[name];
      if (cell.error) continue;
      await peers[name]?.dispose();
      const t0 = performance.now();
      try {
        peers[name] = await load(entry);
        cell.loads.push(performance.now() - t0);
        cell.variant = peers[name].variant;
      } catch (e) {
        delete peers[name];
        cell.error = String(e.message ?? e).split('\n')[0];
      }
    }
  }
  for (const cell of Object.values(cells)) if (cell.loads.length) cell.load_ms = median(cell.loads);
  for (const config of entry.configs) {
    const row = { model: entry.model, config: config.name, peers: structuredClone(cells) };
    rows.push(row);
    show(rows);
    const inputs = await Promise.all(config.inputs.map(fetchTensor));
    const want = await Promise.all(config.outputs.map(fetchTensor));
    const live = Object.keys(peers).filter((name) => !row.peers[name].error);
    const feeds = Object.fromEntries(live.map((name) => [name, peers[name].feeds(inputs)]));
    for (const name of live) {
      try {
        row.peers[name].check = mismatch(peers[name].outputs(await peers[name].run(feeds[name])), want, config.tol ?? tolerance);
        row.peers[name].medians = [];
      } catch (e) {
        row.peers[name].error = String(e.message ?? e).split('\n')[0];
      }
    }
    for (let rep = 0; rep < SETTINGS.repeat; rep++) {
      // the peers take turns, in a rotating order
      const order = live.slice(rep % live.length).concat(live.slice(0, rep % live.length));
      for (const name of order) {
        const cell = row.peers[name];
        if (cell.error) continue;
        progress(`${entry.model}/${config.name}: ${name}, repetition ${rep + 1} of ${SETTINGS.repeat}`);
        try {
          const batch = await warm(peers[name], feeds[name], rep === 0 ? SETTINGS.warmup : SETTINGS.rewarm);
          cell.medians.push(median(await time(peers[name], feeds[name], SETTINGS.time, batch)));
          cell.batch = batch;
        } catch (e) {
          cell.error = String(e.message ?? e).split('\n')[0];
        }
      }
    }
    for (const cell of Object.values(row.peers)) {
      if (!cell.medians?.length) continue;
      Object.assign(cell, { median_ms: median(cell.medians), lo_ms: Math.min(...cell.medians), hi_ms: Math.max(...cell.medians) });
    }
    show(rows);
  }
  for (const peer of Object.values(peers)) await peer.dispose();
}

async function run() {
  $('run').disabled = true;
  const response = await fetch(MANIFEST);
  if (!response.ok) {
    throw new Error(`${MANIFEST.pathname}: HTTP ${response.status}; \`.venv/bin/python benchmarks/browser_bench.py\` `
      + '(or make bench) builds the models and writes it');
  }
  const manifest = await response.json();
  const only = query.get('models')?.split(',');
  const models = manifest.models.filter((m) => !only || only.includes(m.model));
  // onnxruntime-web fetches and compiles its runtime (ort-wasm-simd-threaded.wasm) with its
  // first session: that session is timed apart, so each model's load time is its own
  const t0 = performance.now();
  const first = await onnxruntimeWeb(models[0]);
  const ortFirstSessionMs = performance.now() - t0;
  await first.dispose();
  const rows = [];
  for (const entry of models) await benchModel(entry, rows, manifest.tolerance);
  const result = {
    userAgent: navigator.userAgent, crossOriginIsolated, variants: supportedVariants(), ortVersion: ort.env.versions,
    ortNumThreads: ort.env.wasm.numThreads, ortFirstSessionMs, settings: SETTINGS, rows,
  };
  $('notes').textContent = `Median per call in ms (min–max of the ${SETTINGS.repeat} repetitions' medians), `
    + `outputs checked against onnxruntime's (✗: mismatch). symwasm runs the variant the loader picks here `
    + `(${supportedVariants()[0]}); load: median of ${SETTINGS.loads}; onnxruntime-web ${ort.env.versions.web}, numThreads ${ort.env.wasm.numThreads}; `
    + `its first session, which also started its runtime, took ${fmt(ortFirstSessionMs)} ms.`;
  progress('done');
  $('run').disabled = false;
  return result;
}

// what benchmarks/browser_bench.mjs calls
globalThis.bench = {
  ready: startOnnxruntime().then(() => {
    $('run').disabled = false;
    progress('ready: press Run (it takes a few minutes)');
  }, (e) => {
    progress(`cannot start onnxruntime-web from ${ORT_DIST.pathname}: ${e.message}; run \`npm ci --prefix benchmarks\``);
    throw e;
  }),
  run,
};
$('run').addEventListener('click', () => run().catch((e) => {
  progress(`failed: ${e.message}`);
  $('run').disabled = false;
}));
