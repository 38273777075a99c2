"""symwasm's caches on disk: where they live, and the cache of compiled code the wasmtime
host maps instead of compiling a ``.wasm`` again (``CodeCache``).

A second load of the same ``.wasm``, in this process or another, maps the machine code
Cranelift made at the first load (wasmtime's ``Module.serialize`` / ``deserialize_file``)
instead of compiling the module again, which took 33-650 ms on the benchmark models.

Trust. wasmtime runs the machine code of a serialized module as it is, without checking it,
so the cache deserializes only files it wrote itself:

- its directory must belong to the user and be writable by nobody else (it is created 0700);
  one that is not is not used, and models load by compiling;
- every entry has a seal: the entry's sha256, the file's identity when it was written (device,
  inode, size, modification and change times), and an HMAC-SHA256 of those and the key under
  a secret of 32 random bytes kept in the directory (0600, made on first use, refused unless
  it belongs to the user and nobody else may read or write it). An entry is deserialized only
  if its seal's HMAC verifies and the entry is the file sealed: the same identity, or else
  the same sha256. Anything else (a corrupt or truncated entry, one written by anything else,
  another key's) is never deserialized: the module is compiled and the entry written again.
  The entry is checked through the descriptor it is then deserialized from, so it cannot be
  swapped in between.

Only a process of the same user that reads the secret can forge a seal, and such a process
could change the user's programs anyway.

Keys are the sha256 of the ``.wasm`` file's bytes, the wasmtime build, the engine's
configuration and this machine's CPU (Cranelift compiles for the CPU's features), so a
changed model, another wasmtime or a home directory shared by different machines never
meets code that is not its own. Hashing a file costs about 1 ms a MB, more than the rest of
a load, so a file's sha256 is remembered under a seal with its identity, as the entries'
are. A change to a file changes its change time (which no user can set); a file changed
within ``RACY_NS`` of when it was hashed might keep its times (their resolution may be that
coarse), so such a seal is checked by hashing until the file is older (as git treats
"racily clean" files). Entries are written to a temporary file and renamed into place; the
least recently used go once the entries pass ``MAX_BYTES``.
"""
from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Iterator

CACHE_ENV = "SYMWASM_CACHE"  # the directory of symwasm's caches (default ~/.cache/symwasm)
CODE_CACHE_ENV = "SYMWASM_CODE_CACHE"  # "0" (or off, no, false): no compiled-code cache
MAX_BYTES = 1 << 30
MAX_SOURCES = 4096  # remembered file hashes kept (each a few hundred bytes)
SECRET = "secret"
SECRET_BYTES = 32
MAC_DOMAIN = b"symwasm code cache 1\0"
RACY_NS = 2_000_000_000  # a file changed this close to its sealing is checked by hashing
STALE_TEMP_SECONDS = 3600  # a temporary file this old was left by a writer that died


def cache_root() -> Path:
    """The directory of symwasm's caches: $SYMWASM_CACHE, else $XDG_CACHE_HOME/symwasm, else
    ~/.cache/symwasm."""
    base = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "symwasm")
    return Path(base)


def default_code_dir() -> Path | None:
    """The compiled-code cache's directory, or None where $SYMWASM_CODE_CACHE turns it off."""
    if os.environ.get(CODE_CACHE_ENV, "").strip().lower() in ("0", "off", "no", "false"):
        return None
    return cache_root() / "code"


class CacheUnusable(Exception):
    """The cache's directory or secret is not safe to trust (or cannot be made)."""


def _private(st: os.stat_result, what: str, others: int) -> None:
    """``what`` must belong to this user and have none of the ``others`` permission bits."""
    if st.st_uid != os.getuid():
        raise CacheUnusable(f"{what} belongs to user {st.st_uid}, not to this user ({os.getuid()})")
    if st.st_mode & others:
        raise CacheUnusable(f"{what} has mode {oct(st.st_mode & 0o777)}: others may change it")


def _identity(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _sha256(f) -> str:
    f.seek(0)
    return hashlib.file_digest(f, "sha256").hexdigest()


class CodeCache:
    """Entries of compiled code under a directory, each trusted only through its seal."""

    # per directory, the bytes of its entries as this process last counted them plus what it
    # stored since: the directory is scanned again only when that passes max_bytes
    _held: dict[Path, int] = {}

    def __init__(self, directory: str | os.PathLike, max_bytes: int = MAX_BYTES):
        self.dir = Path(directory)
        self.max_bytes = max_bytes
        self._secret: bytes | None = None

    def secret(self) -> bytes:
        """The cache's HMAC secret, made on first use; CacheUnusable if the directory or the
        secret could be someone else's."""
        if self._secret is not None:
            return self._secret
        path = self.dir / SECRET
        try:
            self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            _private(os.stat(self.dir), f"the cache directory {self.dir}", 0o022)
            if not path.exists():
                self._make_secret(path)
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                _private(os.fstat(fd), f"the cache's secret {path}", 0o077)
                secret = os.read(fd, SECRET_BYTES + 1)
            finally:
                os.close(fd)
        except OSError as e:
            raise CacheUnusable(f"{e.filename or self.dir}: {e.strerror or e}") from None
        if len(secret) != SECRET_BYTES:
            raise CacheUnusable(f"the cache's secret {path} is {len(secret)} bytes, not {SECRET_BYTES}: "
                                f"remove it, and the cache starts again")
        self._secret = secret
        return secret

    def _make_secret(self, path: Path) -> None:
        """Write a new secret under a temporary name and link it into place: of processes
        racing to make it, one wins and the others read the winner's."""
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".secret-", suffix=".tmp")  # mode 0600
        try:
            os.write(fd, os.urandom(SECRET_BYTES))
            os.close(fd)
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            os.unlink(tmp)

    # seals: {"what", "identity", "sha256", "sealed_ns", "mac"}, the HMAC over the rest

    def _mac(self, what: list, identity: list[int], digest: str, sealed_ns: int) -> str:
        text = json.dumps([what, identity, digest, sealed_ns]).encode()
        return hmac.new(self.secret(), MAC_DOMAIN + text, hashlib.sha256).hexdigest()

    def _seal(self, what: list, identity: list[int], digest: str) -> bytes:
        now = time.time_ns()
        return json.dumps({"what": what, "identity": identity, "sha256": digest, "sealed_ns": now,
                           "mac": self._mac(what, identity, digest, now)}).encode()

    def _check(self, seal_path: Path, what: list, f) -> tuple[str | None, bool]:
        """The sha256 the valid seal at ``seal_path`` gives the open file ``f`` (None if there
        is no valid seal for ``what``), and whether it holds without hashing ``f``: the file
        is the one sealed, and was not changed close to its sealing."""
        try:
            seal = json.loads(seal_path.read_bytes())
            identity, digest, sealed = seal["identity"], seal["sha256"], seal["sealed_ns"]
            good = hmac.compare_digest(str(seal["mac"]), self._mac(what, identity, digest, sealed))
        except (OSError, ValueError, TypeError, KeyError):
            return None, False
        if not good:
            return None, False
        now = _identity(os.fstat(f.fileno()))
        return digest, now == identity and sealed - now[4] >= RACY_NS

    def _write(self, path: Path, data) -> None:
        """``data`` at ``path``, written under a temporary name and renamed into place."""
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=f".{path.name[:16]}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def file_sha256(self, path: str | os.PathLike) -> str:
        """The sha256 of a file's bytes, remembered under a seal with the file's identity."""
        real = os.path.realpath(path)
        memo = self.dir / f"{hashlib.sha256(real.encode()).hexdigest()[:32]}.src"
        with open(real, "rb") as f:
            digest, trusted = self._check(memo, ["source", real], f)
            if trusted:
                with contextlib.suppress(OSError):
                    os.utime(memo)  # recently used
                return digest
            before = _identity(os.fstat(f.fileno()))
            digest = _sha256(f)
            if _identity(os.fstat(f.fileno())) == before:  # not changing while it was read
                with contextlib.suppress(OSError):
                    self._write(memo, self._seal(["source", real], before, digest))
            return digest

    def _paths(self, key: str) -> tuple[Path, Path]:
        return self.dir / f"{key}.cwasm", self.dir / f"{key}.seal"

    @contextlib.contextmanager
    def entry(self, key: str) -> Iterator[tuple[str | None, str]]:
        """The entry for ``key`` while in the ``with``: (a path to read it from, "hit"), or
        (None, "missing"), or (None, "corrupt") for one its seal does not vouch for. The
        path names the descriptor the entry was checked through, where the system has such
        paths."""
        path, seal_path = self._paths(key)
        try:
            f = open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NOFOLLOW))
        except FileNotFoundError:
            yield None, "missing"
            return
        except OSError:
            yield None, "corrupt"  # a symbolic link, or an entry this user cannot read
            return
        with f:
            sealed, trusted = self._check(seal_path, ["entry", key], f)
            if sealed is not None and not trusted:
                before = _identity(os.fstat(f.fileno()))
                trusted = hmac.compare_digest(_sha256(f), sealed)
                if trusted and time.time_ns() - before[4] >= RACY_NS:
                    with contextlib.suppress(OSError):  # sealed again: no more hashing
                        self._write(seal_path, self._seal(["entry", key], before, sealed))
            if not trusted:
                yield None, "corrupt"
                return
            with contextlib.suppress(OSError):
                os.utime(seal_path)  # recently used: eviction goes by the seals' times
            by_fd = f"/proc/self/fd/{f.fileno()}"
            yield (by_fd if os.path.exists(by_fd) else str(path)), "hit"

    def store(self, key: str, data) -> None:
        """Write the entry for ``key`` and its seal, then evict the least recently used
        entries if they may hold more than ``max_bytes``. OSError if it cannot be written."""
        path, seal_path = self._paths(key)
        digest = hashlib.sha256(data).hexdigest()
        self._write(path, data)
        with open(path, "rb") as f:
            identity = _identity(os.fstat(f.fileno()))
        self._write(seal_path, self._seal(["entry", key], identity, digest))
        held = self._held.get(self.dir)
        if held is None or held + len(data) > self.max_bytes:
            self.evict()
        else:
            self._held[self.dir] = held + len(data)

    def evict(self) -> None:
        """Remove the least recently used entries until they hold at most ``max_bytes``, the
        least recently used remembered hashes past ``MAX_SOURCES``, and temporary files that
        writers which died left behind."""
        sizes, used, sources = {}, {}, []
        now = time.time()
        for e in os.scandir(self.dir):
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            stem, ext = os.path.splitext(e.name)
            if ext == ".cwasm":
                sizes[stem] = st.st_size
            elif ext == ".seal":
                used[stem] = st.st_mtime
            elif ext == ".src":
                sources.append((st.st_mtime, e.path))
            elif ext == ".tmp" and now - st.st_mtime > STALE_TEMP_SECONDS:
                with contextlib.suppress(OSError):
                    os.unlink(e.path)
        total = sum(sizes.values())
        for key in sorted(sizes, key=lambda k: used.get(k, 0.0)):
            if total <= self.max_bytes:
                break
            for p in self._paths(key):
                with contextlib.suppress(OSError):
                    p.unlink()
            total -= sizes[key]
        self._held[self.dir] = total
        for _, p in sorted(sources)[:max(0, len(sources) - MAX_SOURCES)]:
            with contextlib.suppress(OSError):
                os.unlink(p)
