/**
 * Node-side test harness: build the fixtures with the repository's Python (the compiler and
 * onnx.reference live there), serve files over a local HTTP server and start Chromium.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const LOADER_DIR = fileURLToPath(new URL('..', import.meta.url));
const REPO_ROOT = path.resolve(LOADER_DIR, '..');
const PYTHON = path.join(LOADER_DIR, '../.venv/bin/python');
const MAKE_FIXTURES = path.join(LOADER_DIR, 'test/make_fixtures.py');

/**
 * Compile the named fixtures (all when none are named) into a fresh temporary directory.
 * @returns {Promise<{dir: string, fixtures: object, cleanup: () => Promise<void>}>}
 */
export async function buildFixtures(...names) {
  if (!existsSync(PYTHON)) {
    throw new Error(`${PYTHON} is missing: the fixtures are compiled with the repository's venv (run \`make env\`)`);
  }
  const dir = await mkdtemp(path.join(tmpdir(), 'symwasm-js-'));
  try {
    await promisify(execFile)(PYTHON, [MAKE_FIXTURES, dir, ...names], {
      env: { ...process.env, PYTHONPATH: REPO_ROOT },
      maxBuffer: 16 << 20,
    });
  } catch (e) {
    await rm(dir, { recursive: true, force: true });
    throw new Error(`make_fixtures.py failed:\n${e.stderr || e.message}`, { cause: e });
  }
  const fixtures = JSON.parse(await readFile(path.join(dir, 'fixtures.json'), 'utf8'));
  return { dir, fixtures, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.css': 'text/css',
  '.json': 'application/json', '.wasm': 'application/wasm', '.png': 'image/png' };

/**
 * Serve directories on 127.0.0.1 at an ephemeral port. Each mount maps a URL prefix to a
 * directory; `wasmType` overrides the .wasm content type, to test servers that send
 * something other than application/wasm.
 * @param {{prefix: string, dir: string, wasmType?: string}[]} mounts
 * @returns {Promise<{url: string, close: () => Promise<void>}>}
 */
export async function serve(mounts) {
  const server = createServer(async (req, res) => {
    const { pathname } = new URL(req.url, 'http://localhost');
    const mount = mounts.find((m) => pathname.startsWith(m.prefix));
    const root = mount && path.resolve(mount.dir);
    const file = mount && path.join(root, decodeURIComponent(pathname.slice(mount.prefix.length)));
    // path.join normalises "..", so a file outside the mount can only come from a traversal
    if (!file || !file.startsWith(root + path.sep)) return void res.writeHead(404).end();
    try {
      const body = await readFile(file);
      const ext = path.extname(file);
      res.writeHead(200, { 'content-type': (ext === '.wasm' && mount.wasmType) || TYPES[ext] || 'application/octet-stream' });
      res.end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

export const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/**
 * Debian's Chromium, headless, driven by playwright-core (a browser download by npm is not
 * possible here). Without it the browser tests fail; they never skip.
 * @returns {Promise<import('playwright-core').Browser>}
 */
export async function launchChromium() {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: the browser tests drive Debian's Chromium; install it with `
      + '`apt-get update && apt-get install -y chromium` (`make test` does)');
  }
  const { chromium } = await import('playwright-core');
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}
