import * as ort from 'onnxruntime-web';
ort.env.wasm.numThreads = 1;
const s = await ort.InferenceSession.create('/tmp/benchout/bench_models/' + process.argv[2] + '.onnx', {executionProviders: ['wasm']});
const shape = JSON.parse(process.argv[3]);
const n = shape.reduce((a, b) => a * b);
const x = new ort.Tensor('float32', Float32Array.from({length: n}, () => Math.random() - 0.5), shape);
const feeds = {[s.inputNames[0]]: x};
const start = performance.now();
let win = [], t = performance.now(), out = [];
while (performance.now() - start < 30000) {
  const t0 = performance.now(); await s.run(feeds); win.push(performance.now() - t0);
  if (performance.now() - t > 500) { win.sort((a,b)=>a-b); out.push(win[win.length>>1].toFixed(2)); win = []; t = performance.now(); }
}
console.error(process.execArgv.join(' ') || 'default', out.join(' '));
process.exit(0);
