// Run every built sample's .wasm in Node through the JS loader and check each run against
// the outputs onnx.reference computed.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { loadModel } from '../js_loader/index.js';

const TYPED = { float32: Float32Array, int32: Int32Array, int64: BigInt64Array, bool: Uint8Array };

function toTyped({ dtype, data }) {
  const T = TYPED[dtype];
  return dtype === 'int64' ? T.from(data, BigInt) : T.from(data, (v) => Number(v));
}

function close(got, want) {
  if (got.length !== want.length) return false;
  for (let i = 0; i < got.length; i++) {
    const g = Number(got[i]);
    const w = Number(want[i]);
    if (Math.abs(g - w) > 1e-5 + 1e-4 * Math.abs(w)) return false;
  }
  return true;
}

const root = process.argv[2] ?? 'build/samples';
const index = JSON.parse(await readFile(path.join(root, 'samples.json'), 'utf8'));
let failures = 0;
for (const [name, sample] of Object.entries(index)) {
  const model = await loadModel(path.join(root, sample.wasm));
  for (const run of sample.runs) {
    const feeds = {};
    for (const [k, v] of Object.entries(run.inputs)) feeds[k] = { data: toTyped(v), shape: v.shape };
    const outputs = await model.run(feeds);
    for (const [out, want] of Object.entries(run.expected)) {
      const got = outputs[out];
      const ok = JSON.stringify(got.shape) === JSON.stringify(want.shape) && close(got.data, toTyped(want));
      if (!ok) failures++;
      const shapes = Object.entries(run.inputs).map(([k, v]) => `${k}[${v.shape}]`).join(', ');
      console.log(`[node/wasm32] ${name}: ${shapes} -> ${out}[${got.shape}] ${ok ? 'ok' : 'MISMATCH'}`);
    }
  }
}
console.log(`node: ${failures ? `${failures} mismatches` : 'all samples match onnx.reference'}`);
process.exit(failures ? 1 : 0);
