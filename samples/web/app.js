// The digit recognizer: the drawing pad's pixels go to the model as they are (canvas [h, w]
// of ink in 0..1); the graph itself finds the ink, crops, scales and classifies. The model
// runs in a Web Worker (createWorker), or on the main thread (loadModel) for comparison.
import { createWorker, loadModel, ModelError, supportedVariants } from '../../js_loader/index.js';

const BUILD = new URL('../../build/samples/', import.meta.url);
const MODEL = new URL('digits.wasm', BUILD);
const SIDE = 280; // CSS pixels of the pad
// about a tenth of a digit's height, the strokes of the 32x32 bitmaps the training digits came from
const PEN = 20;
const INK = '#1b1f33';
const KEEP_TIMES = 50; // the latency shown is the median of this many runs
const SHAPES = [
  ['canvas', 'the pad, as drawn (input)'],
  ['nz', 'NonZero: where the ink is'],
  ['crop', 'Slice to the ink\'s bounding box'],
  ['bitmap', 'Resize to 32×32'],
  ['digit', 'AveragePool: the CNN\'s 8×8 input'],
];

const $ = (id) => document.getElementById(id);
const canvas = $('canvas');
const overlay = $('overlay');
// the pad's pixels are device pixels (up to 2 per CSS pixel), so the input's h and w vary by screen
const scale = Math.min(2, Math.max(1, Math.round(globalThis.devicePixelRatio || 1)));
for (const c of [canvas, overlay]) c.width = c.height = SIDE * scale;
const ctx = canvas.getContext('2d', { willReadFrequently: true });

/** One loaded model per place it runs, loaded when first used. */
const engines = {};
let mode = 'worker';
const times = { worker: [], main: [] };
let sizes = null;
/** What the last run was given and gave back, for the page's tests. */
let last = null;

function engine(where) {
  engines[where] ??= (async () => {
    const t0 = performance.now();
    const model = where === 'worker' ? await createWorker(MODEL) : await loadModel(MODEL);
    return { model, loadMs: performance.now() - t0 };
  })();
  return engines[where];
}

// ---------------------------------------------------------------- drawing

function penAt(event) {
  const r = canvas.getBoundingClientRect();
  return [(event.clientX - r.left) * canvas.width / r.width, (event.clientY - r.top) * canvas.height / r.height];
}

function setPen() {
  ctx.lineCap = ctx.lineJoin = 'round';
  ctx.lineWidth = PEN * scale;
  ctx.strokeStyle = ctx.fillStyle = INK;
}

let stroke = null;
canvas.addEventListener('pointerdown', (e) => {
  canvas.setPointerCapture(e.pointerId);
  stroke = penAt(e);
  ctx.beginPath();
  ctx.arc(...stroke, ctx.lineWidth / 2, 0, 2 * Math.PI);
  ctx.fill();
  inked();
});
canvas.addEventListener('pointermove', (e) => {
  if (!stroke) return;
  const next = penAt(e);
  ctx.beginPath();
  ctx.moveTo(...stroke);
  ctx.lineTo(...next);
  ctx.stroke();
  stroke = next;
  inked();
});
for (const type of ['pointerup', 'pointercancel']) canvas.addEventListener(type, () => { stroke = null; });

function inked() {
  $('hint').classList.add('gone');
  requestRun();
}

function clearPad() {
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  $('hint').classList.remove('gone');
  requestRun();
}
$('clear').addEventListener('click', clearPad);

/** A test image (8x8, 0..16) as ink on the pad, scaled up smoothly to a digit's usual size. */
function drawImage(pixels) {
  const small = imageOf(pixels);
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  ctx.imageSmoothingEnabled = true;
  ctx.imageSmoothingQuality = 'high';
  const size = 0.7 * canvas.width;
  ctx.drawImage(small, (canvas.width - size) / 2, (canvas.height - size) / 2, size, size);
  inked();
}

/** An 8x8 canvas of ink with alpha value/max (an image of the digits' kind, or the model's input). */
function imageOf(values, max = 16) {
  const c = document.createElement('canvas');
  c.width = c.height = 8;
  const image = new ImageData(8, 8);
  for (let i = 0; i < 64; i++) {
    image.data.set([0x1b, 0x1f, 0x33, Math.round(255 * Math.min(1, Math.max(0, values[i] / max)))], 4 * i);
  }
  c.getContext('2d').putImageData(image, 0, 0);
  return c;
}

/** The pad as the model's input: ink (alpha) in 0..1, [h, w] row-major. */
function readPad() {
  const { width: w, height: h } = canvas;
  const rgba = ctx.getImageData(0, 0, w, h).data;
  const ink = new Float32Array(w * h);
  for (let i = 0; i < ink.length; i++) ink[i] = rgba[4 * i + 3] / 255;
  return { data: ink, shape: [h, w] };
}

// ---------------------------------------------------------------- running

// At most one run at a time: strokes that come during a run are picked up by the next one.
let dirty = false;
let pumping = null;

function requestRun() {
  dirty = true;
  pumping ??= pump().finally(() => { pumping = null; });
}

async function pump() {
  while (dirty) {
    dirty = false;
    await classify();
  }
}

async function classify() {
  const where = mode;
  const feeds = readPad();
  let model;
  let outputs;
  let ms;
  try {
    ({ model } = await engine(where));
    const t0 = performance.now();
    outputs = await model.run({ canvas: feeds });
    ms = performance.now() - t0;
  } catch (e) {
    showError(e);
    return;
  }
  const list = times[where];
  list.push(ms);
  if (list.length > KEEP_TIMES) list.shift();
  const probs = Array.from(outputs.probs.data);
  const empty = outputs.crop.shape.includes(0);
  last = {
    mode: where, shape: feeds.shape, pixels: feeds.data, probs, ms,
    predicted: empty ? null : probs.indexOf(Math.max(...probs)),
    crop: outputs.crop.shape, box: Array.from(outputs.box.data, Number), nInk: Number(outputs.n_ink.data[0]),
  };
  render(outputs, feeds.shape, where, model.metadata);
}

// ---------------------------------------------------------------- showing

const bars = $('bars');
for (let d = 0; d < 10; d++) {
  bars.insertAdjacentHTML('beforeend',
    `<li><span class="digit">${d}</span><span class="track"><span class="fill"></span></span><span class="pct">–</span></li>`);
}

const fmtShape = (dtype, shape) => `${dtype}(${shape.join(', ')})`;
const fmtMs = (x) => (x < 10 ? x.toFixed(2) : x.toFixed(1));
const kB = (bytes) => `${(bytes / 1000).toFixed(1)} kB`;

function render(outputs, canvasShape, where, metadata) {
  const { probs, predicted, crop, box, nInk } = last;
  const items = bars.children;
  for (let d = 0; d < 10; d++) {
    items[d].classList.toggle('top', d === predicted);
    items[d].querySelector('.fill').style.width = `${(100 * probs[d]).toFixed(1)}%`;
    items[d].querySelector('.pct').textContent = predicted === null ? '–' : `${(100 * probs[d]).toFixed(1)}%`;
  }
  const big = $('predicted');
  big.textContent = predicted ?? '–';
  big.classList.toggle('empty', predicted === null);
  if (predicted === null) {
    $('confidence').textContent = 'Nothing drawn';
    $('message').textContent = 'NonZero found no ink, so the crop is 0 × 0 and the model took its empty branch.';
  } else {
    $('confidence').textContent = `${(100 * probs[predicted]).toFixed(1)}% sure`;
    $('message').textContent = `${nInk.toLocaleString('en')} ink pixels, cropped to ${crop[0]} × ${crop[1]}`;
  }

  const seen = $('seen').getContext('2d');
  seen.clearRect(0, 0, 8, 8);
  seen.drawImage(imageOf(outputs.digit.data, 1), 0, 0);

  const o = overlay.getContext('2d');
  o.clearRect(0, 0, overlay.width, overlay.height);
  if (predicted !== null) {
    const [top, left, bottom, right] = box;
    o.setLineDash([6 * scale, 5 * scale]);
    o.lineWidth = 1.5 * scale;
    o.strokeStyle = '#4f46e5';
    o.strokeRect(left - 0.5, top - 0.5, right - left + 1, bottom - top + 1);
  }

  // the shapes this run had: the input's, those the outputs show; a static value inside the
  // classifying branch has its one shape, unless the empty branch ran
  const actual = { canvas: canvasShape, nz: [2, nInk], crop, digit: outputs.digit.shape };
  const { values } = metadata;
  $('shapes').innerHTML = SHAPES.map(([name, what]) => {
    const v = values[name];
    const dynamic = v.shape.some((d) => typeof d === 'string');
    const shape = actual[name] ?? (predicted === null ? null : v.shape);
    return `<tr class="${dynamic ? 'dynamic' : ''}"><td><code>${name}</code><span class="what">${what}</span></td>`
      + `<td><code>${fmtShape(v.dtype, v.shape)}</code></td>`
      + `<td class="actual">${shape ? `[${shape.join(', ')}]` : 'not computed'}</td></tr>`;
  }).join('');

  const list = times[where];
  const sorted = [...list].sort((a, b) => a - b);
  $('latency').textContent = `${fmtMs(sorted[sorted.length >> 1])} ms`;
  $('latency-note').textContent = `median of ${list.length}, last ${fmtMs(list[list.length - 1])} ms`
    + (where === 'worker' ? ', with the messages' : '');
  $('status').textContent = '';
}

function showError(e) {
  const text = document.createElement('span');
  text.className = 'error';
  text.textContent = `${e instanceof ModelError ? `ModelError ${e.status}: ` : ''}${e.message}`;
  $('status').replaceChildren(text);
  $('confidence').textContent = 'The model could not run';
  console.error(e);
}

async function use(where) {
  mode = where;
  for (const b of document.querySelectorAll('.toggle button')) b.setAttribute('aria-pressed', String(b.dataset.mode === where));
  const { model, loadMs } = await engine(where);
  $('load').textContent = `${fmtMs(loadMs)} ms`;
  const file = model.metadata.variants[model.variant].file;
  const bytes = sizes.wasm_bytes[file];
  $('size').textContent = kB(bytes);
  $('size-note').textContent = `${file}; weights ${kB(sizes.weights_bytes)} (${Math.round(100 * sizes.weights_bytes / bytes)}%)`;
  $('variant').textContent = model.variant === 'relaxed-simd' ? 'relaxed SIMD' : 'baseline SIMD';
  $('variant-note').textContent = model.variant === 'relaxed-simd'
    ? 'this browser validates f32x4.relaxed_madd'
    : `this browser runs ${supportedVariants().join(', ') || 'no SIMD'}`;
  requestRun();
}

for (const b of document.querySelectorAll('.toggle button')) b.addEventListener('click', () => use(b.dataset.mode).catch(showError));

async function start() {
  const [info, index] = await Promise.all([
    fetch(new URL('digits.json', import.meta.url)).then((r) => r.json()),
    fetch(new URL('samples.json', BUILD)).then((r) => {
      if (!r.ok) throw new Error(`${r.url}: HTTP ${r.status}; run \`make demo\` first, it builds the model`);
      return r.json();
    }),
  ]);
  sizes = index.digits;
  if (!sizes) throw new Error(`${new URL('samples.json', BUILD).pathname} has no digits model; run \`make demo\` again`);
  $('accuracy').textContent = `${(100 * info.test_accuracy).toFixed(1)}%`;
  $('accuracy-note').textContent = `${info.test_correct} of ${info.split.test} test digits`;
  const gallery = $('gallery');
  for (const { label, pixels } of info.gallery) {
    const b = document.createElement('button');
    b.type = 'button';
    b.title = `a test image of a ${label}`;
    b.append(imageOf(pixels), label);
    b.addEventListener('click', () => drawImage(pixels));
    gallery.append(b);
  }
  setPen();
  await use('worker');
}

function base64(bytes) {
  let text = '';
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
}

// what the tests drive and read: once no run is pending, the last run's input pixels (float32
// bytes, base64) and outputs
globalThis.digitsApp = {
  started: start().then(() => true, (e) => { showError(e); throw e; }),
  pen: PEN * scale,
  async idle() {
    while (pumping) await pumping;
    return last && { ...last, pixels: base64(new Uint8Array(last.pixels.buffer)) };
  },
};
