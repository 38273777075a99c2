/**
 * The worker behind createWorker (index.js), in Node (worker_threads) and in browsers
 * (a module Worker): it loads the model from the compiled module it is sent and runs it,
 * one message at a time. Not a module to import.
 *
 * Messages in: {id, type: 'load', module, metadata, label, memoryLimit?, memory, whyOneThread,
 * threads} (memory: a threads variant's memory limits, null for another), {id, type: 'run',
 * feeds}, {id, type: 'threads', threads} and {type: 'limit', bytes}. Replies: {id, result}
 * (for a load or threads, {threads, threadsNote}) or {id, error: {name, message, status, cause}}.
 */
import { Model, ModelError, STATUS } from './index.js';

/** This worker's port: browsers' global scope or Node's parentPort. */
function connect(nodePort) {
  if (nodePort) return { listen: (f) => nodePort.on('message', f), post: (m, t) => nodePort.postMessage(m, t) };
  return { listen: (f) => self.addEventListener('message', (e) => f(e.data)), post: (m, t) => self.postMessage(m, t) };
}

// browsers: no await before the listener is added, or the first messages could be missed
const inBrowser = typeof WorkerGlobalScope !== 'undefined';
const nodePort = inBrowser ? null : (await import('node:worker_threads')).parentPort;
if (!inBrowser && !nodePort) throw new Error('worker.js runs as createWorker\'s worker; import index.js instead');
const port = connect(nodePort);

let model = null;
// load is asynchronous: later messages wait for it, and each other, in order
let queue = Promise.resolve();
port.listen((message) => {
  queue = queue.then(() => handle(message));
});

async function handle({ id, type, ...args }) {
  try {
    if (type === 'load') {
      let instance;
      let memory;
      try {
        memory = args.memory ? new WebAssembly.Memory({ ...args.memory, shared: true }) : undefined;
        instance = await WebAssembly.instantiate(args.module, memory ? { env: { memory } } : {});
      } catch (e) {
        throw new ModelError(`${args.label}: cannot load the model: cannot instantiate the module (${e.message})`,
          STATUS.INVALID_PROGRAM, { cause: e });
      }
      model = new Model(instance, args.metadata, args.label,
        memory ? { module: args.module, memory } : { whyOneThread: args.whyOneThread });
      if (args.memoryLimit !== undefined) model.setMemoryLimit(args.memoryLimit);
      await model.setThreads(args.threads);
      port.post({ id, result: { threads: model.threads, threadsNote: model.threadsNote } });
    } else if (type === 'threads') {
      await model.setThreads(args.threads);
      port.post({ id, result: { threads: model.threads, threadsNote: model.threadsNote } });
    } else if (type === 'limit') {
      model.setMemoryLimit(args.bytes);
    } else if (type === 'run') {
      const outputs = await model.run(args.feeds);
      // each output is a fresh copy: hand its buffer over rather than copy it again
      // (a string output is a plain Array: it is cloned)
      port.post({ id, result: outputs }, Object.values(outputs).filter((t) => t.data.buffer).map((t) => t.data.buffer));
    } else {
      throw new Error(`worker.js: unknown message type ${type}`);
    }
  } catch (e) {
    if (id !== undefined) port.post({ id, error: describe(e) });
  }
}

/** An error as plain data, for index.js to rebuild as the same class. */
function describe(e) {
  if (!(e instanceof Error)) return { name: 'Error', message: String(e) };
  return { name: e.name, message: e.message, status: e.status, cause: e.cause instanceof Error ? describe(e.cause) : undefined };
}
