// symwasm-node peer for benchmarks/run.py: symwasm's wasm32 module run by the JS loader
// (js_loader/index.js) in Node, the engine onnxruntime-web runs in, so the two compare like
// with like. The same JSON-lines protocol as ort_web_runner.mjs:
//   {"op": "load", "model": "/path/m.onnx", "artifact_dir": DIR, "artifact"?: PATH}
//     -> compiles the model with `python -m toolkit.cli compile --relaxed-simd --threads`
//        (python is argv[2]) into DIR/<name>.node.wasm (and its variants beside it), or takes
//        the one-thread peer's `artifact`, and loads it by path on argv[3] threads (default
//        1), so the loader runs the variant this Node validates:
//        {"ok": true, "info": {compile_s, module_bytes, variant, threads, ...}}
//   {"op": "bench", ...} -> {"ok": true, "times_ms": [...], "warmup_runs": n, "outputs": [...]}
// Any failure -> {"ok": false, "error": "..."} and the process stays usable.

import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadModel } from '../js_loader/index.js';
import { readArray, runFor, serve } from './peer_protocol.mjs';

const PYTHON = process.argv[2] ?? 'python3';
const THREADS = Number(process.argv[3] ?? 1);
let model = null;

async function load({ model: onnxPath, artifact_dir, artifact }) {
  model?.dispose?.();
  model = null;
  let out = artifact;
  let compileS;
  if (!out) {
    mkdirSync(artifact_dir, { recursive: true });
    out = join(artifact_dir, `${basename(onnxPath, '.onnx')}.node.wasm`);
    const t0 = performance.now();
    execFileSync(PYTHON, ['-m', 'toolkit.cli', 'compile', onnxPath, '-o', out, '--target', 'wasm32', '-q',
      '--relaxed-simd', '--threads'], { stdio: ['ignore', 'ignore', 'pipe'] });
    compileS = (performance.now() - t0) / 1000;
  }
  const t1 = performance.now();
  model = await loadModel(out, { threads: THREADS });
  if (model.threads !== THREADS) throw new Error(model.threadsNote);
  return {
    info: {
      compile_s: compileS, load_ms: performance.now() - t1, module_bytes: statSync(out).size,
      artifact: out, node: process.version, variant: model.variant, threads: model.threads,
    },
  };
}

async function bench({ inputs, warmup_s, min_time_s, min_runs, out_dir }) {
  if (!model) throw new Error('no model loaded');
  const feeds = Object.fromEntries(inputs.map((d) => [d.name, { data: readArray(d), shape: d.shape }]));
  const warm = await runFor(() => model.run(feeds), warmup_s, 1);
  const timed = await runFor(() => model.run(feeds), min_time_s, min_runs);
  const outputs = model.outputs.map(({ name }, i) => {
    const t = timed.results[name];
    const file = join(out_dir, `symwasm-node.out${i}.bin`);
    writeFileSync(file, Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    return { name, dtype: t.dtype, shape: t.shape, file };
  });
  return { times_ms: timed.times, warmup_runs: warm.times.length, outputs };
}

await serve({ load, bench }, (e) => {
  const stderr = e?.stderr ? `: ${String(e.stderr).trim().split('\n').pop()}` : '';
  return String(e?.message ?? e).split('\n')[0] + stderr;
});
