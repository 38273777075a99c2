// A TypeScript project's use of every name the package exports, values and types alike
// (test/package.test.js checks that this file imports them all, then compiles it with
// `tsc --strict --noUnusedLocals --noEmit` against the installed package, with and without
// the DOM lib).
// Each @ts-expect-error is a misuse the declarations must reject: were a name typed `any`,
// tsc would fail on the unused directive.
import {
  createWorker, DTYPES, evaluateFormula, FORMAT_VERSION, loadModel, Model, ModelError, readMetadata, STATUS,
  supportedVariants, VARIANTS, WorkerModel,
} from 'symwasm';
import type {
  CreateWorkerOptions, DType, Feed, InputInfo, LoadOptions, MemoryPlan, Metadata, ModelSource, RunOptions, Tensor,
  TensorData, TensorInfo, TypedArrayOf, Variant,
} from 'symwasm';

declare const source: ModelSource;
declare const signal: AbortSignal;

export async function use(): Promise<number> {
  const options: LoadOptions = { variant: 'auto' };
  const model: Model = await loadModel(source, options);
  if (!(model instanceof Model)) throw new TypeError('loadModel gives a Model');
  const first: TensorInfo = model.inputs[0];
  const dtype: DType = first.dtype;
  const data: TensorData = new DTYPES[dtype].array(new ArrayBuffer(16));
  const floats: TypedArrayOf['float32'] = new Float32Array(4);
  const feeds: Record<string, Feed> = { [first.name]: { data: floats, shape: [1, 4] }, other: { data, shape: [2] } };
  const outputs: Record<string, Tensor> = await model.run(feeds);
  let total = 0;
  for (const tensor of Object.values(outputs)) {
    // the dtype narrows the data's type
    if (tensor.dtype === 'int64') total += Number(tensor.data.reduce((a: bigint, b: bigint) => a + b, 0n));
    if (tensor.dtype === 'string') total += tensor.data.join('').length;
  }
  // @ts-expect-error a feed's data is a typed array or an Array of strings
  await model.run({ x: { data: 'text', shape: [4] } });
  model.setMemoryLimit(1n << 30n);
  total += model.requiredBytes({ n: 4 });
  model.dispose();

  const metadata: Metadata = await readMetadata(source);
  const plan: MemoryPlan | null | undefined = metadata.memory;
  if (plan) total += evaluateFormula(plan.dynamic_bytes, { n: 4 });
  total += metadata.variants?.['relaxed-simd']?.features.length ?? 0;
  const input: InputInfo = metadata.inputs[0];
  total += input.default?.shape.length ?? 0;  // compile --overridable: the default a run may omit

  const variants: readonly Variant[] = VARIANTS;
  const workerOptions: CreateWorkerOptions = { variant: supportedVariants()[0] ?? variants[0], memoryLimit: 256 << 20 };
  // @ts-expect-error variants are named
  await createWorker(source, { variant: 'fast' });
  const worker: WorkerModel = await createWorker(source, workerOptions);
  if (!(worker instanceof WorkerModel)) throw new TypeError('createWorker gives a WorkerModel');
  const cancel: RunOptions = { timeout: 2000, signal };
  try {
    await worker.run(feeds, cancel);
  } catch (e) {
    if (!(e instanceof ModelError) || e.status !== STATUS.CANCELLED) throw e;
  } finally {
    worker.dispose();
  }
  return total + FORMAT_VERSION[0];
}
