/**
 * Fixture helpers shared by the Node tests and the browser page: decode the tensors
 * make_fixtures.py wrote and compare a run's outputs with the onnx.reference ones. Plain
 * ES module with no Node imports, so browsers load it as is. (It lives outside test/
 * because Node 20's test runner runs every .js file under test/ as a test file.)
 */

import { DTYPES } from '../abi.js';

/** A fixture tensor {dtype, shape, data: base64 of little-endian bytes} (a string tensor:
 * {dtype: 'string', shape, strings}) as {data, shape, dtype}. */
export function decodeTensor({ dtype, shape, data, strings }) {
  if (dtype === 'string') return { data: [...strings], shape, dtype };
  const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  return { data: new DTYPES[dtype].array(bytes.buffer), shape, dtype };
}

/** A fixture's encoded inputs as the feeds Model.run takes. */
export function feedsOf(inputs) {
  return Object.fromEntries(Object.entries(inputs).map(([k, v]) => {
    const { data, shape } = decodeTensor(v);
    return [k, { data, shape }];
  }));
}

/** "x[4,10], b[1,10]": which binding a run is, for messages. */
export function describeRun(run) {
  return Object.entries(run.inputs).map(([k, v]) => `${k}[${v.shape}]`).join(', ');
}

/**
 * Every difference between `got` (Model.run's result) and the encoded `expected` outputs:
 * names, dtypes, shapes and values, floats within the tolerance the Python tests use.
 * @returns {string[]} empty when they match
 */
export function mismatches(got, expected) {
  const problems = [];
  const names = Object.keys(expected);
  if (JSON.stringify(Object.keys(got).sort()) !== JSON.stringify([...names].sort())) {
    problems.push(`outputs ${Object.keys(got)} != expected ${names}`);
  }
  for (const name of names) {
    const want = decodeTensor(expected[name]);
    const g = got[name];
    if (!g) continue;
    if (g.dtype !== want.dtype || !(g.data instanceof DTYPES[want.dtype].array)) {
      problems.push(`${name}: dtype ${g.dtype} (${g.data?.constructor.name}) != expected ${want.dtype}`);
      continue;
    }
    if (JSON.stringify(g.shape) !== JSON.stringify(want.shape)) {
      problems.push(`${name}: shape [${g.shape}] != expected [${want.shape}]`);
      continue;
    }
    // float16 arrives as its bits (Uint16Array): compared exactly, like the integers
    const isFloat = want.dtype === 'float32' || want.dtype === 'float64';
    for (let i = 0; i < want.data.length; i++) {
      const [a, b] = [g.data[i], want.data[i]];
      const ok = isFloat ? Math.abs(a - b) <= 1e-6 + 1e-5 * Math.abs(b) || (Number.isNaN(a) && Number.isNaN(b)) : a === b;
      if (!ok) {
        problems.push(`${name}[${i}]: ${a} != expected ${b}`);
        break;
      }
    }
  }
  return problems;
}
