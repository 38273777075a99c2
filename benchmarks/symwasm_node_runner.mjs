// symwasm-node peer for benchmarks/run.py: symwasm's wasm32 module run by the JS loader
// (js_loader/index.js) in Node, the engine onnxruntime-web runs in, so the two compare like
// with like. The same JSON-lines protocol as ort_web_runner.mjs:
//   {"op": "load", "model": "/path/m.onnx", "artifact_dir": DIR}
//     -> compiles the model with `python -m toolkit.cli compile` (python is argv[2]) into
//        DIR/<name>.node.wasm and loads it: {"ok": true, "info": {compile_s, module_bytes, ...}}
//   {"op": "bench", ...} -> {"ok": true, "times_ms": [...], "warmup_runs": n, "outputs": [...]}
// Any failure -> {"ok": false, "error": "..."} and the process stays usable.

import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';
import { loadModel } from '../js_loader/index.js';

console.log = console.error;
console.info = console.error;

const PYTHON = process.argv[2] ?? 'python3';
const TYPED_ARRAYS = {
  float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array, int16: Int16Array,
  uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array, uint64: BigUint64Array,
  bool: Uint8Array,
};

let model = null;

function readTensor({ dtype, shape, file }) {
  const Ctor = TYPED_ARRAYS[dtype];
  if (!Ctor) throw new Error(`unsupported input dtype ${dtype}`);
  const bytes = readFileSync(file);
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  return { data: new Ctor(buffer), shape };
}

async function load({ model: onnxPath, artifact_dir }) {
  model?.dispose?.();
  model = null;
  mkdirSync(artifact_dir, { recursive: true });
  const out = join(artifact_dir, `${basename(onnxPath, '.onnx')}.node.wasm`);
  const t0 = performance.now();
  execFileSync(PYTHON, ['-m', 'toolkit.cli', 'compile', onnxPath, '-o', out, '--target', 'wasm32', '-q'],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  const compileS = (performance.now() - t0) / 1000;
  const t1 = performance.now();
  model = await loadModel(readFileSync(out));
  return {
    info: {
      compile_s: compileS, load_ms: performance.now() - t1, module_bytes: statSync(out).size,
      artifact: out, node: process.version,
    },
  };
}

async function runFor(feeds, seconds, minRuns) {
  const times = [];
  let results = null;
  const end = performance.now() + seconds * 1000;
  while (times.length < minRuns || performance.now() < end) {
    const t0 = performance.now();
    results = await model.run(feeds);
    times.push(performance.now() - t0);
  }
  return { times, results };
}

async function bench({ inputs, warmup_s, min_time_s, min_runs, out_dir }) {
  if (!model) throw new Error('no model loaded');
  const feeds = Object.fromEntries(inputs.map((d) => [d.name, readTensor(d)]));
  const warm = await runFor(feeds, warmup_s, 1);
  const timed = await runFor(feeds, min_time_s, min_runs);
  const outputs = model.outputs.map(({ name }, i) => {
    const t = timed.results[name];
    const file = join(out_dir, `symwasm-node.out${i}.bin`);
    writeFileSync(file, Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    return { name, dtype: t.dtype, shape: t.shape, file };
  });
  return { times_ms: timed.times, warmup_runs: warm.times.length, outputs };
}

const OPS = { load, bench };

async function handle(line) {
  try {
    const req = JSON.parse(line);
    const op = OPS[req.op];
    if (!op) throw new Error(`unknown op ${req.op}`);
    return { ok: true, ...(await op(req)) };
  } catch (e) {
    const stderr = e?.stderr ? `: ${String(e.stderr).trim().split('\n').pop()}` : '';
    return { ok: false, error: String(e?.message ?? e).split('\n')[0] + stderr };
  }
}

for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (line.trim()) process.stdout.write(JSON.stringify(await handle(line)) + '\n');
}
