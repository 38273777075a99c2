/**
 * Node-side test harness: build the fixtures with the repository's Python (the compiler and
 * onnx.reference live there), serve files over a local HTTP server and start Chromium.
 */
import { execFile } from 'node:child_process';
import { createReadStream, existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
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

/** How long a stalled file (serve's `stalls`) waits for its client to hang up before it sends
 * the rest: a client that needs only the first bytes never waits for it, one that reads the
 * whole file gets it, later. Long, because a test passes on the hang-up and fails on the
 * timer: at 5 s a Chromium busy beside `make test`'s other work once hung up after it. */
const STALL_MS = 30_000;

/**
 * Serve directories on 127.0.0.1 at an ephemeral port. Each mount maps a URL prefix to a
 * directory; `wasmType` overrides the .wasm content type, to test servers that send
 * something other than application/wasm. `options.headers` go with every file sent (the
 * in-browser benchmark's cross-origin isolation headers). Nothing is cached, and a file is
 * sent as its client takes it (one that stops reading holds the rest back).
 *
 * `served` counts, per URL path, the requests, the bytes of the file handed to their
 * connections (those waiting in the sockets' buffers included) and the hang-ups, requests
 * whose client closed the connection before the whole file was sent. A path put in `stalls`
 * with a number of bytes is sent that far, as a slow link would, and no further until the
 * client hangs up or STALL_MS pass: what it serves is then what its clients asked for, not
 * what loopback's socket buffers take on their own (several MB). `idle()` resolves once every
 * response has ended or waited out its stall.
 * @param {{prefix: string, dir: string, wasmType?: string}[]} mounts
 * @param {{headers?: Record<string, string>}} [options]
 * @returns {Promise<{url: string, close: () => Promise<void>, idle: () => Promise<void>,
 *   served: Map<string, {requests: number, bytes: number, hangUps: number}>, stalls: Map<string, number>}>}
 */
export async function serve(mounts, { headers = {} } = {}) {
  const served = new Map();
  const stalls = new Map();
  let sending = 0;
  const waiting = [];
  const server = createServer(async (req, res) => {
    const { pathname } = new URL(req.url, 'http://localhost');
    const mount = mounts.find((m) => pathname.startsWith(m.prefix));
    const root = mount && path.resolve(mount.dir);
    const file = mount && path.join(root, decodeURIComponent(pathname.slice(mount.prefix.length)));
    // path.join normalises "..", so a file outside the mount can only come from a traversal
    if (!file || !file.startsWith(root + path.sep)) return void res.writeHead(404).end();
    const info = await stat(file).catch(() => null);
    if (!info?.isFile()) return void res.writeHead(404).end();
    const ext = path.extname(file);
    res.writeHead(200, { ...headers, 'content-type': (ext === '.wasm' && mount.wasmType) || TYPES[ext]
      || 'application/octet-stream', 'content-length': info.size, 'cache-control': 'no-store' });
    const count = served.get(pathname) ?? { requests: 0, bytes: 0, hangUps: 0 };
    served.set(pathname, count);
    count.requests++;
    sending++;
    let settled = false;
    const settle = () => {
      if (settled) return;
      settled = true;
      if (--sending === 0) for (const resolve of waiting.splice(0)) resolve();
    };
    res.on('close', () => {
      if (!res.writableFinished) count.hangUps++;
      settle();
    });
    const part = (range) => createReadStream(file, range).on('data', (chunk) => { count.bytes += chunk.length; });
    const stall = stalls.get(pathname) < info.size ? stalls.get(pathname) : 0;
    try {
      if (stall) {
        await pipeline(part({ end: stall - 1 }), res, { end: false });
        await new Promise((resolve) => {
          const timer = setTimeout(() => resolve(settle()), STALL_MS);
          res.on('close', () => resolve(clearTimeout(timer)));
        });
        if (res.destroyed) return;
      }
      await pipeline(part({ start: stall }), res);
    } catch {
      // the client hung up: counted above
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((resolve) => server.close(resolve)),
    idle: () => new Promise((resolve) => (sending ? waiting.push(resolve) : resolve())),
    served,
    stalls,
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
