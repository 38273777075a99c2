// onnxruntime-web peer for benchmarks/run.py: a long-lived Node process speaking JSON lines.
//
// One request per stdin line, one reply per stdout line, in order:
// Usage: node ort_web_runner.mjs [THREADS]
//   {"op": "load", "model": "/path/m.onnx"}
//     -> {"ok": true, "info": {versions, backend, numThreads, simd, os_threads_added, ...}}
//   {"op": "bench", "inputs": [{"name", "dtype", "shape", "file"}], "warmup_s", "min_time_s",
//    "min_runs", "out_dir"}
//     -> {"ok": true, "times_ms": [...], "warmup_runs": n,
//         "outputs": [{"name", "dtype", "shape", "file"}]}
// Any failure -> {"ok": false, "error": "..."} and the process stays usable.
// Tensor files are raw little-endian arrays; outputs of the last timed run are written to
// out_dir so Python can check them against its reference.

import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as ort from 'onnxruntime-web';
import { readArray, runFor, serve } from './peer_protocol.mjs';

// the thread count is the first argument (default 1): numThreads > 1 runs a call on
// onnxruntime-web's worker pool, as a cross-origin isolated page would
const threads = Number(process.argv[2] ?? 1);
if (!Number.isInteger(threads) || threads < 1) throw new Error(`threads must be a whole number >= 1, not ${process.argv[2]}`);
ort.env.wasm.numThreads = threads;
ort.env.wasm.simd = true;

// A pthread pool shows up as extra OS threads; counting them proves numThreads held.
const osThreads = () => readdirSync('/proc/self/task').length;
const threadsAtStart = osThreads();

let session = null;

/** Reads a raw tensor file into an ort.Tensor. */
function readTensor(desc) {
  return new ort.Tensor(desc.dtype, readArray(desc), desc.shape);
}

/** Writes each output tensor as a raw file and returns its description. */
function writeOutputs(results, outDir) {
  return session.outputNames.map((name, i) => {
    const t = results[name];
    const file = join(outDir, `ort-web.out${i}.bin`);
    writeFileSync(file, Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    return { name, dtype: t.type, shape: t.dims, file };
  });
}

async function load({ model }) {
  if (session) await session.release();
  session = null;
  session = await ort.InferenceSession.create(model, {
    executionProviders: ['wasm'],
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  return {
    info: {
      versions: ort.env.versions,
      node: process.version,
      backend: 'wasm',
      numThreads: ort.env.wasm.numThreads,
      simd: ort.env.wasm.simd,
      os_threads_added: osThreads() - threadsAtStart,
    },
  };
}

async function bench({ inputs, warmup_s, min_time_s, min_runs, out_dir }) {
  if (!session) throw new Error('no model loaded');
  const feeds = Object.fromEntries(inputs.map((d) => [d.name, readTensor(d)]));
  const warm = await runFor(() => session.run(feeds), warmup_s, 1);
  const timed = await runFor(() => session.run(feeds), min_time_s, min_runs);
  return {
    times_ms: timed.times,
    warmup_runs: warm.times.length,
    outputs: writeOutputs(timed.results, out_dir),
  };
}

await serve({ load, bench });
