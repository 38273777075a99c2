/**
 * One thread of a model's pool beyond the caller's (index.js starts it, a worker per thread,
 * in Node and in browsers): an instance of the model's threads variant over the model's
 * shared memory, which runs the pool's loop, sw_thread_start, until the pool stops (the pool's
 * owner then terminates this worker). Not a module to import.
 *
 * Message in, once: {module, memory, stackTop, ctx, index}: the threads variant, its shared
 * memory, the top of the stack the pool holds for thread `index` (sw_thread_stack) and the
 * context. Message out, only when it cannot run: {error}.
 */
// browsers: no await before the listener is added, or the message could be missed
const inBrowser = typeof WorkerGlobalScope !== 'undefined';
const nodePort = inBrowser ? null : (await import('node:worker_threads')).parentPort;
if (!inBrowser && !nodePort) throw new Error('thread.js runs as a worker of a model\'s threads; import index.js instead');

async function run({ module, memory, stackTop, ctx, index }) {
  let instance = null;
  try {
    // the module's start function sees that the first instance already put its data in memory
    instance = await WebAssembly.instantiate(module, { env: { memory } });
    instance.exports.sw_thread_start(stackTop, ctx, index);
  } catch (e) {
    // a trap (a bug): the pool is told, so the call waiting for this thread's part fails
    // (status INTERNAL) rather than waits for ever
    try {
      instance?.exports.sw_thread_failed(ctx, index);
    } catch { /* the message below says what went wrong */ }
    const error = `${e.name}: ${e.message}`;
    if (nodePort) nodePort.postMessage({ error });
    else self.postMessage({ error });
  }
}

if (nodePort) nodePort.once('message', run);
else self.addEventListener('message', (e) => run(e.data), { once: true });
