// What the Node peers of benchmarks/run.py share (ort_web_runner.mjs, symwasm_node_runner.mjs):
// raw tensor files, the timing loop and the JSON-lines request loop. See ort_web_runner.mjs
// for the protocol.

import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';

export const TYPED_ARRAYS = {
  float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array, int16: Int16Array,
  uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array, uint64: BigUint64Array,
  bool: Uint8Array,
};

/** A raw little-endian tensor file as a typed array of its dtype. */
export function readArray({ dtype, file }) {
  const Ctor = TYPED_ARRAYS[dtype];
  if (!Ctor) throw new Error(`unsupported input dtype ${dtype}`);
  const bytes = readFileSync(file);
  // slice() copies into a fresh ArrayBuffer, which is aligned for any element size.
  return new Ctor(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
}

/** Runs `once()` for at least `seconds` and `minRuns` runs; returns per-run ms and the last results. */
export async function runFor(once, seconds, minRuns) {
  const times = [];
  let results = null;
  const end = performance.now() + seconds * 1000;
  while (times.length < minRuns || performance.now() < end) {
    const t0 = performance.now();
    results = await once();
    times.push(performance.now() - t0);
  }
  return { times, results };
}

/** Answers one JSON request per stdin line with `ops[req.op]`, one reply per stdout line;
 * a failure becomes {"ok": false, "error"} (`describe` turns it into text) and the loop goes on. */
export async function serve(ops, describe = (e) => String(e?.message ?? e)) {
  // stdout is the protocol channel; keep library chatter off it.
  console.log = console.error;
  console.info = console.error;
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    if (!line.trim()) continue;
    let reply;
    try {
      const req = JSON.parse(line);
      const op = ops[req.op];
      if (!op) throw new Error(`unknown op ${req.op}`);
      reply = { ok: true, ...(await op(req)) };
    } catch (e) {
      reply = { ok: false, error: describe(e) };
    }
    process.stdout.write(JSON.stringify(reply) + '\n');
  }
}
