// Node side of benchmarks/gemm_peak.py, in the JSON-lines protocol of peer_protocol.mjs:
//   {"op": "peak", "wasm": PATH, "functions": ["peak_8", ...], "args": [x, y], "seconds": s}
//     -> {"ok": true, "runs": [{"name", "iters", "ms"}]}: each function of the peak module
//        (no imports) calibrated to about s a call, warmed up, and its fastest of three calls
//   {"op": "load", "wasm": PATH} -> loads a symwasm .wasm with the JS loader
//   {"op": "bench", "inputs": [{"name", "dtype", "shape", "file"}], "warmup_s", "min_time_s",
//    "min_runs"} -> {"ok": true, "times_ms": [...]}
// Any failure -> {"ok": false, "error": "..."} and the process stays usable.

import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { loadModel } from '../js_loader/index.js';
import { readArray, runFor, serve } from './peer_protocol.mjs';

let model = null;

function timed(fn, iters, args) {
  const t0 = performance.now();
  fn(iters, ...args);
  return performance.now() - t0;
}

async function peak({ wasm, functions, args, seconds }) {
  const { instance } = await WebAssembly.instantiate(readFileSync(wasm), {});
  const runs = [];
  for (const name of functions) {
    const fn = instance.exports[name];
    // calibrate; the short calls on the way also let V8 tier the function up
    let iters = 1 << 16;
    let ms = timed(fn, iters, args);
    while (ms < seconds * 250) {
      iters *= 4;
      ms = timed(fn, iters, args);
    }
    iters = Math.min(Math.floor(iters * (seconds * 1000) / ms), 2 ** 31 - 1);
    const best = Math.min(...[0, 1, 2].map(() => timed(fn, iters, args)));
    runs.push({ name, iters, ms: best });
  }
  return { runs };
}

async function load({ wasm }) {
  model?.dispose?.();
  model = await loadModel(readFileSync(wasm));
  return {};
}

async function bench({ inputs, warmup_s, min_time_s, min_runs }) {
  if (!model) throw new Error('no model loaded');
  const feeds = Object.fromEntries(inputs.map((d) => [d.name, { data: readArray(d), shape: d.shape }]));
  await runFor(() => model.run(feeds), warmup_s, 1);
  const { times } = await runFor(() => model.run(feeds), min_time_s, min_runs);
  return { times_ms: times };
}

await serve({ peak, load, bench });
