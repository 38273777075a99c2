// onnxruntime-web peer for benchmarks/run.py: a long-lived Node process speaking JSON lines.
//
// One request per stdin line, one reply per stdout line, in order:
//   {"op": "load", "model": "/path/m.onnx"}
//     -> {"ok": true, "info": {versions, backend, numThreads, simd, os_threads_added, ...}}
//   {"op": "bench", "inputs": [{"name", "dtype", "shape", "file"}], "warmup_s", "min_time_s",
//    "min_runs", "out_dir"}
//     -> {"ok": true, "times_ms": [...], "warmup_runs": n,
//         "outputs": [{"name", "dtype", "shape", "file"}]}
// Any failure -> {"ok": false, "error": "..."} and the process stays usable.
// Tensor files are raw little-endian arrays; outputs of the last timed run are written to
// out_dir so Python can check them against its reference.

import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';
import * as ort from 'onnxruntime-web';

// stdout is the protocol channel; keep library chatter off it.
console.log = console.error;
console.info = console.error;

ort.env.wasm.numThreads = 1;
ort.env.wasm.simd = true;

const TYPED_ARRAYS = {
  float32: Float32Array,
  float64: Float64Array,
  int8: Int8Array,
  uint8: Uint8Array,
  int16: Int16Array,
  uint16: Uint16Array,
  int32: Int32Array,
  uint32: Uint32Array,
  int64: BigInt64Array,
  uint64: BigUint64Array,
  bool: Uint8Array,
};

// A pthread pool would show up as extra OS threads; counting them proves numThreads = 1 held.
const osThreads = () => readdirSync('/proc/self/task').length;
const threadsAtStart = osThreads();

let session = null;

/** Reads a raw tensor file into an ort.Tensor. */
function readTensor({ dtype, shape, file }) {
  const Ctor = TYPED_ARRAYS[dtype];
  if (!Ctor) throw new Error(`unsupported input dtype ${dtype}`);
  const bytes = readFileSync(file);
  // slice() copies into a fresh ArrayBuffer, which is aligned for any element size.
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  return new ort.Tensor(dtype, new Ctor(buffer), shape);
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

/** Runs for at least `seconds` and `minRuns` runs; returns per-run ms and the last results. */
async function runFor(feeds, seconds, minRuns) {
  const times = [];
  let results = null;
  const end = performance.now() + seconds * 1000;
  while (times.length < minRuns || performance.now() < end) {
    const t0 = performance.now();
    results = await session.run(feeds);
    times.push(performance.now() - t0);
  }
  return { times, results };
}

async function bench({ inputs, warmup_s, min_time_s, min_runs, out_dir }) {
  if (!session) throw new Error('no model loaded');
  const feeds = Object.fromEntries(inputs.map((d) => [d.name, readTensor(d)]));
  const warm = await runFor(feeds, warmup_s, 1);
  const timed = await runFor(feeds, min_time_s, min_runs);
  return {
    times_ms: timed.times,
    warmup_runs: warm.times.length,
    outputs: writeOutputs(timed.results, out_dir),
  };
}

const OPS = { load, bench };

async function handle(line) {
  try {
    const req = JSON.parse(line);
    const op = OPS[req.op];
    if (!op) throw new Error(`unknown op ${req.op}`);
    return { ok: true, ...(await op(req)) };
  } catch (e) {
    return { ok: false, error: String(e?.message ?? e) };
  }
}

for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (line.trim()) process.stdout.write(JSON.stringify(await handle(line)) + '\n');
}
