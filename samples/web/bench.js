// The in-browser benchmark: symwasm (through the JS loader) and onnxruntime-web (the npm
// package's wasm backend) on the same models and inputs in this page, at one thread and at
// SETTINGS.threads. benchmarks/browser_bench.py writes the manifest (models, inputs,
// onnxruntime's outputs) and runs this page headless, cross-origin isolated; a person can open
// it and press Run.
//
// Threads need a cross-origin isolated page (shared memory). symwasm's threads wait for each
// other, which a page's main thread may not, so symwasm@N runs in createWorker's worker: each
// call is a round trip to it, and symwasm-worker@1, createWorker at one thread, pays the same.
// onnxruntime-web reads numThreads once, when its runtime starts: onnxruntime-web@N is a
// second copy of the package, imported in a hidden same-origin iframe (a window has its own
// modules), which runs on this page's thread, so every peer takes turns in this one loop.
import { createWorker, DTYPES, loadModel, supportedVariants } from '../../js_loader/index.js';

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
  // performance.now() is coarsened to 0.1 ms in a page that is not cross-origin isolated (5 us
  // in one that is), so calls are timed in batches of about this many ms, each sample a batch's mean
  batchMs: 5,
  threads: Number(query.get('threads') ?? navigator.hardwareConcurrency), // N of the N-thread peers
};

/** onnxruntime-web at one thread (this page's copy) and at SETTINGS.threads (the iframe's):
 * {ort, realm, firstSessionMs}. */
const ORT = { one: null, many: null };
const N = SETTINGS.threads;

// the one-thread peers on this page's thread, then, when N is more than one, the N-thread
// peers with symwasm-worker@1, which pays symwasm@N's round trips at one thread
const PEERS = [
  { name: 'symwasm', load: (entry) => symwasm(entry, loadModel, { threads: 1 }) },
  { name: 'symwasm-baseline', load: (entry) => symwasm(entry, loadModel, { variant: 'baseline', threads: 1 }) },
  { name: 'onnxruntime-web', load: (entry) => onnxruntimeWeb(entry, ORT.one) },
  ...(N > 1 ? [
    { name: 'symwasm-worker@1', load: (entry) => symwasm(entry, createWorker, { threads: 1 }) },
    { name: `symwasm@${N}`, load: (entry) => symwasm(entry, createWorker, { threads: N }) },
    { name: `onnxruntime-web@${N}`, load: (entry) => onnxruntimeWeb(entry, ORT.many) },
  ] : []),
];

/** A symwasm peer: the model loaded by `load` (loadModel or createWorker) with `options`. */
async function symwasm(entry, load, options) {
  if (entry.wasm_error) throw new Error(entry.wasm_error);
  const model = await load(new URL(entry.wasm, MANIFEST), options);
  return {
    variant: model.variant,
    threads: model.threads,
    threadsNote: model.threadsNote,
    feeds: (inputs) => Object.fromEntries(inputs.map(({ name, data, shape }) => [name, { data, shape }])),
    run: (feeds) => model.run(feeds),
    outputs: (raw) => model.outputs.map(({ name }) => ({ name, ...raw[name] })),
    dispose: () => model.dispose(),
  };
}

async function onnxruntimeWeb(entry, { ort, realm }) {
  const session = await ort.InferenceSession.create(new URL(entry.onnx, MANIFEST).href,
    // severity 3: errors only, not its notes on unused initializers (console errors in a browser)
    { executionProviders: ['wasm'], graphOptimizationLevel: 'all', logSeverityLevel: 3 });
  // its Tensor checks its data with instanceof, so an iframe's copy takes that window's arrays
  const array = (data) => (realm === globalThis ? data : new realm[data.constructor.name](data));
  return {
    threads: ort.env.wasm.numThreads,
    feeds: (inputs) => Object.fromEntries(inputs.map(({ name, data, shape, dtype }) => [name, new ort.Tensor(dtype, array(data), shape)])),
    run: (feeds) => session.run(feeds),
    outputs: (raw) => session.outputNames.map((name) => ({ name, dtype: raw[name].type, shape: raw[name].dims, data: raw[name].data })),
    dispose: () => session.release(),
  };
}

/** A hidden same-origin iframe's window, where `importHere(url)` imports a module of its own. */
async function frameRealm() {
  const frame = document.createElement('iframe');
  frame.hidden = true;
  // a module script runs before its document's load event
  frame.srcdoc = '<script type="module">globalThis.importHere = (url) => import(url);</script>';
  const loaded = new Promise((resolve) => frame.addEventListener('load', resolve, { once: true }));
  document.body.append(frame);
  await loaded;
  return frame.contentWindow;
}

/** onnxruntime-web imported in `realm` (this page, or frameRealm's) at `numThreads`. */
async function startOnnxruntime(realm, numThreads) {
  const url = new URL('ort.wasm.min.mjs', ORT_DIST).href;
  const ort = await (realm === globalThis ? import(url) : realm.importHere(url)).catch((e) => {
    throw new Error(`cannot start onnxruntime-web from ${ORT_DIST.pathname}: ${e.message}; run \`npm ci --prefix benchmarks\``,
      { cause: e });
  });
  ort.env.wasm.numThreads = numThreads;
  ort.env.wasm.wasmPaths = ORT_DIST.href;
  return { ort, realm, firstSessionMs: null };
}

/** Starts onnxruntime-web at one thread and, when N is more than one, at N. */
async function startOnnxruntimes() {
  if (!(Number.isSafeInteger(N) && N >= 1)) throw new Error(`threads=${query.get('threads')}: not a count of threads`);
  ORT.one = await startOnnxruntime(globalThis, 1);
  if (N > 1) ORT.many = await startOnnxruntime(await frameRealm(), N);
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
const LABELS = { symwasm: 'symwasm', 'symwasm-baseline': 'baseline SIMD', 'onnxruntime-web': 'onnxruntime-web',
  'symwasm-worker@1': 'symwasm worker@1', [`symwasm@${N}`]: `symwasm@${N}`, [`onnxruntime-web@${N}`]: `ort-web@${N}` };
const COLUMNS = [
  ['', 'model', (r) => r.model],
  ['', 'config', (r) => r.config],
  ...PEERS.map(({ name }) => ['ms per call', LABELS[name], (r) => latency(r.peers[name])]),
  ['ratio', 'symwasm / ort-web', (r) => ratio(r.peers.symwasm, r.peers['onnxruntime-web'])],
  ...(N > 1 ? [
    ['ratio', `at ${N} threads`, (r) => ratio(r.peers[`symwasm@${N}`], r.peers[`onnxruntime-web@${N}`])],
    [`speed-up 1→${N}`, 'symwasm (worker)', (r) => ratio(r.peers['symwasm-worker@1'], r.peers[`symwasm@${N}`])],
    [`speed-up 1→${N}`, 'ort-web', (r) => ratio(r.peers['onnxruntime-web'], r.peers[`onnxruntime-web@${N}`])],
  ] : []),
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
        const { variant, threads, threadsNote } = peers[name];
        Object.assign(cell, { variant, threads }, threadsNote ? { threadsNote } : {});
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
  // first session (each copy its own): that session is timed apart, so each model's load time is its own
  for (const instance of [ORT.one, ORT.many].filter(Boolean)) {
    const t0 = performance.now();
    const first = await onnxruntimeWeb(models[0], instance);
    instance.firstSessionMs = performance.now() - t0;
    await first.dispose();
  }
  const rows = [];
  for (const entry of models) await benchModel(entry, rows, manifest.tolerance);
  const ort = ORT.one.ort;
  const result = {
    userAgent: navigator.userAgent, crossOriginIsolated, frameCrossOriginIsolated: ORT.many?.realm.crossOriginIsolated,
    hardwareConcurrency: navigator.hardwareConcurrency, threads: N, peers: PEERS.map(({ name }) => name),
    variants: supportedVariants(), ortVersion: ort.env.versions,
    ortNumThreads: ort.env.wasm.numThreads, ortFirstSessionMs: ORT.one.firstSessionMs,
    ortManyNumThreads: ORT.many?.ort.env.wasm.numThreads, ortManyFirstSessionMs: ORT.many?.firstSessionMs,
    settings: SETTINGS, rows,
  };
  // what ran, as the peers said: a page that is not cross-origin isolated runs every peer at one thread
  const ran = (name) => [...new Set(rows.map((r) => r.peers[name]).filter((c) => c?.threads !== undefined)
    .map((c) => `${c.variant ?? 'its runtime'} at ${c.threads}${c.threadsNote ? ` (${c.threadsNote})` : ''}`))].join(', ');
  $('notes').textContent = `Median per call in ms (min–max of the ${SETTINGS.repeat} repetitions' medians), `
    + `outputs checked against onnxruntime's (✗: mismatch); load: median of ${SETTINGS.loads}; onnxruntime-web `
    + `${ort.env.versions.web}: its first session, which also started its runtime, took ${fmt(ORT.one.firstSessionMs)} ms`
    + (N > 1 ? ` (its copy at ${N} threads, in an iframe: ${fmt(ORT.many.firstSessionMs)} ms)` : '') + '. '
    + `This page is ${crossOriginIsolated ? '' : 'not '}cross-origin isolated. `
    + (N > 1 ? `symwasm worker@1 and symwasm@${N} run in createWorker's worker, each call a round trip to it; `
      + `speed-up: the one-thread time over the ${N}-thread time. ` : '')
    + `What ran (variant at threads): ${PEERS.map(({ name }) => `${LABELS[name]}: ${ran(name)}`).join('; ')}.`;
  progress('done');
  $('run').disabled = false;
  return result;
}

// what benchmarks/browser_bench.mjs calls
globalThis.bench = {
  ready: startOnnxruntimes().then(() => {
    $('run').disabled = false;
    progress('ready: press Run (it takes a few minutes)');
  }, (e) => {
    progress(e.message);
    throw e;
  }),
  run,
};
$('run').addEventListener('click', () => run().catch((e) => {
  progress(`failed: ${e.message}`);
  $('run').disabled = false;
}));
