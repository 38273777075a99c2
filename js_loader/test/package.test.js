// The npm package as people install it: `npm pack` gives a tarball of the files package.json
// lists; a fresh project installs it from that file (no registry) and uses it from Node, from
// a page without a bundler (an import map, in Chromium) and from TypeScript (tsc --strict).
// The project's files are test-support/package/; its runs are checked against the outputs
// onnx.reference computed for the fixtures (make_fixtures.py).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

import ts from 'typescript';

import { STATUS } from '../abi.js';
import { buildFixtures, launchChromium, LOADER_DIR, serve } from '../test-support/harness.js';

const run = promisify(execFile);
const PROJECT_FILES = path.join(LOADER_DIR, 'test-support/package');
const TSC = path.join(LOADER_DIR, 'node_modules/typescript/bin/tsc');

let built;
let work;
let packed;
let project;
let installed;

before(async () => {
  built = await buildFixtures('add_mul', 'dense');
  work = await mkdtemp(path.join(tmpdir(), 'symwasm-package-'));
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', work], { cwd: LOADER_DIR });
  [packed] = JSON.parse(stdout);
  project = path.join(work, 'project');
  await mkdir(project);
  await writeFile(path.join(project, 'package.json'), JSON.stringify({ name: 'symwasm-user', private: true, type: 'module' }));
  // --offline: the tarball is the whole package (it has no dependencies); nothing is fetched
  await run('npm', ['install', '--offline', '--no-audit', '--no-fund', path.join(work, packed.filename)], { cwd: project });
  await cp(PROJECT_FILES, project, { recursive: true });
  installed = path.join(project, 'node_modules/symwasm');
}, { timeout: 180_000 });

after(async () => {
  await built?.cleanup();
  if (work) await rm(work, { recursive: true, force: true });
});

/** The fixture report's expectations: each fixture, loaded both ways, ran every binding without a
 * difference from onnx.reference in the best variant this engine supports, and refused to run
 * once disposed, naming the file that ran. */
function assertReport(report, locate) {
  assert.ok(report.supported.includes('baseline'), `supported: ${report.supported}`);
  const expected = {};
  const got = {};
  for (const [name, fixture] of Object.entries(built.fixtures)) {
    const variant = fixture.variants[report.supported[0]] ? report.supported[0] : 'baseline';
    for (const how of ['loadModel', 'createWorker']) {
      const key = `${name} ${how}`;
      const { runs, ...outcome } = report.models[key] ?? {};
      assert.ok(runs >= 2, `${key}: the fixture must bind its dims at least two ways`);
      got[key] = outcome;
      expected[key] = { variant, problems: [], afterDispose: { isModelError: true, status: STATUS.INVALID_INPUT,
        message: `${locate(fixture.variants[variant])}: the model was disposed` } };
    }
  }
  assert.deepEqual(got, expected);
}

test('npm pack: the tarball holds the files package.json lists, and the project installs exactly those', async (t) => {
  const manifest = JSON.parse(await readFile(path.join(LOADER_DIR, 'package.json'), 'utf8'));
  const expected = ['package.json', ...manifest.files].sort();
  assert.deepEqual(packed.files.map((f) => f.path).sort(), expected);
  assert.deepEqual((await readdir(installed)).sort(), expected);
  assert.equal(packed.name, 'symwasm');
  t.diagnostic(`${packed.filename}: ${packed.size} bytes, ${packed.unpackedSize} unpacked, `
    + `files: ${packed.files.map((f) => `${f.path} (${f.size})`).join(', ')}`);
});

test('Node: a fresh project imports symwasm from node_modules; loadModel and createWorker runs match onnx.reference; '
  + 'dispose', async () => {
  const helpers = pathToFileURL(path.join(LOADER_DIR, 'test-support/fixtures.js')).href;
  const { stdout } = await run(process.execPath, ['run.mjs', built.dir, helpers], { cwd: project });
  const report = JSON.parse(stdout);
  assert.equal(report.resolved, pathToFileURL(path.join(installed, 'index.js')).href);
  assertReport(report, (file) => path.join(built.dir, file));
});

test('Chromium: a page without a bundler imports the installed package through an import map; loadModel and '
  + 'createWorker (a module worker) runs match onnx.reference; dispose', async () => {
  const server = await serve([{ prefix: '/fixtures/', dir: built.dir }, { prefix: '/repo/', dir: LOADER_DIR },
    { prefix: '/', dir: project }]);
  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    const pageErrors = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => m.type() === 'error' && pageErrors.push(m.text()));
    await page.goto(`${server.url}/index.html`);
    await page.waitForFunction(() => globalThis.packageTest, null, { timeout: 60_000 }).catch((e) => {
      throw new Error(`the page did not finish: ${pageErrors.join('; ') || e.message}`, { cause: e });
    });
    const report = await page.evaluate(() => globalThis.packageTest);
    assert.equal(report.error, undefined, report.error);
    assert.equal(report.resolved, `${server.url}/node_modules/symwasm/index.js`);
    assert.deepEqual(report.supported, ['relaxed-simd', 'baseline']);
    assertReport(report, (file) => `${server.url}/fixtures/${file}`);
    assert.deepEqual(pageErrors, []);
  } finally {
    await browser.close();
    await server.close();
  }
});

/** The names the installed index.d.ts exports, by TypeScript's reading of it. */
function declaredExports() {
  const file = path.join(installed, 'index.d.ts');
  const program = ts.createProgram([file], { strict: true, noEmit: true, module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022 });
  const checker = program.getTypeChecker();
  const symbols = checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(file)));
  return {
    values: symbols.filter((s) => s.flags & ts.SymbolFlags.Value).map((s) => s.name).sort(),
    all: symbols.map((s) => s.name).sort(),
  };
}

test('index.d.ts declares, as a value, every name index.js exports, and no value it lacks', async () => {
  const runtime = Object.keys(await import(pathToFileURL(path.join(installed, 'index.js')).href)).sort();
  assert.ok(runtime.includes('createWorker') && runtime.includes('loadModel'));
  assert.deepEqual(declaredExports().values, runtime);
});

test('tsc --strict compiles a TypeScript use of every exported name against the installed package, with and '
  + 'without the DOM lib', async () => {
  const consumer = path.join(project, 'consumer.ts');
  const source = ts.createSourceFile(consumer, await readFile(consumer, 'utf8'), ts.ScriptTarget.ES2022);
  const imported = source.statements.filter((s) => ts.isImportDeclaration(s) && s.moduleSpecifier.text === 'symwasm')
    .flatMap((s) => s.importClause.namedBindings.elements.map((e) => e.name.text)).sort();
  assert.deepEqual(imported, declaredExports().all, 'consumer.ts must import every name index.d.ts exports');
  for (const lib of ['es2022', 'es2022,dom']) {
    const args = [TSC, '--strict', '--noUnusedLocals', '--noEmit', '--module', 'nodenext', '--moduleResolution', 'nodenext',
      '--target', 'es2022', '--lib', lib, 'consumer.ts'];
    await run(process.execPath, args, { cwd: project }).catch((e) => {
      throw new Error(`tsc --lib ${lib} failed:\n${e.stdout}${e.stderr}`, { cause: e });
    });
  }
});
