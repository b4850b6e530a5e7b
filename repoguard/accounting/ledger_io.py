"""The ledger file itself: its format constants, canonical hashing, locks, and the hash chain parsed
and checked once per state of the file (the format is described in `ledger.py`).

Appends take an exclusive `fcntl` lock; readers take a shared one, so a reader never sees the
summary an append is replacing vanish. Within one process the parsed, chain-checked entries are
cached per state of the file (inode, size, mtime, ctime and the head's bytes), and side-file
digests per state of each file, so a command that checks the ledger, reads its entries and its
spending parses and hashes it once (`clear_caches` forgets both, as a fresh process would).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Iterator

from repoguard.accounting import ledger_state as ls
from repoguard.core.errors import PolicyError

LEDGER_VERSION = 2
CLEAR_VERSION = 3        # an entry with a "clear" reference: older readers must refuse, not ignore it
READABLE_VERSIONS = (1, 2, 3)
GENESIS = "0" * 64
STATUSES = ("started", "running", "completed", "interrupted", "failed")


def canonical(obj: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, no insignificant spaces, UTF-8."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def entry_hash(entry: dict) -> str:
    """SHA-256 (hex) of the entry's canonical JSON without its "hash" field."""
    return hashlib.sha256(canonical({k: v for k, v in entry.items() if k != "hash"})).hexdigest()


def owner_only(path: Path) -> None:
    """Make the ledger (0600), its side-file directory and files (0700/0600) and the directory that
    holds the ledger (the output directory, 0700) owner-only; best effort (a file owned by someone
    else keeps its mode). Spending per secret and run ids are nobody else's business."""
    real = Path(path).resolve()
    d = side_dir(path)
    targets = [(real, 0o600), (real.parent, 0o700), (head_path(real), 0o600), (d, 0o700)]
    if d.is_dir():
        targets += [(f, 0o600) for f in d.iterdir() if f.is_file()]
    for f, mode in targets:
        try:
            if f.exists() and (f.stat().st_mode & 0o777) != mode:
                os.chmod(f, mode)
        except OSError:
            pass


def head_path(path: Path) -> Path:
    """The ledger's head file (entry count and last hash), beside it: `ledger.jsonl.head`."""
    return path.with_name(path.name + ".head")


def side_dir(path: str | Path) -> Path:
    """The side-file directory of ledger `path`: `<ledger>.d` beside the symlink-resolved file."""
    real = Path(path).resolve()
    return real.with_name(real.name + ".d")


def entry_secrets(path: str | Path, e: dict) -> dict:
    """One entry's per-secret records {sid: {"kl", "renyi", "pair"?}}: inline (format 1) or from
    its spending file (format 2). Raises PolicyError if the file is missing or unreadable."""
    if "spending" not in e:
        return e.get("secrets", {})
    return entry_run(path, e).to_dict()


def entry_run(path: str | Path, e: dict) -> ls.Run:
    """One entry's spending as a columnar `ledger_state.Run` (inline format-1 records or the
    entry's spending file). Raises PolicyError if the file is missing or unreadable."""
    if "spending" not in e:
        return ls.Run.from_dict(e.get("secrets", {}))
    f = side_dir(path) / str(e["spending"]["file"])
    try:
        return ls.read_run_table(f)
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise PolicyError(f"{f}: ledger spending file unreadable ({exc})") from None


# -- locking: appends hold an exclusive flock on the ledger file, readers a shared one ------------
_held = threading.local()      # ledger files this thread holds a lock on (flock is per open file)


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[Any]:
    """Exclusive lock on the ledger while a writer appends; a `shared_lock` taken inside it by the
    same thread is then a no-op (flock is per open file: a second lock would wait on the first)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600), "a+b")   # owner-only
    key = str(Path(path).resolve())
    held = _held.__dict__.setdefault("paths", set())
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        held.add(key)
        yield fh
    finally:
        held.discard(key)
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        fh.close()


@contextlib.contextmanager
def shared_lock(path: Path) -> Iterator[None]:
    """Shared lock on the ledger while a reader reads it and its side files, so an append (which
    replaces the summary and deletes the superseded one) never runs in between. A no-op when the
    ledger does not exist or this thread already holds a lock on it."""
    key = str(Path(path).resolve())
    held = _held.__dict__.setdefault("paths", set())
    if key in held:
        yield
        return
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        yield
        return
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_SH)
        held.add(key)
        yield
    finally:
        held.discard(key)
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        fh.close()


# -- the chain, parsed and checked once per state of the file --------------------------------------
_CACHE: dict[str, tuple] = {}      # resolved path → (file key, entries, problems, notes, last_hash)
_CACHE_LOCK = threading.Lock()


def _file_key(path: Path) -> tuple | None:
    """(inode, size, mtime ns, ctime ns) of the ledger and the bytes of its head: any append,
    edit or replacement changes it."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    try:
        head = head_path(path).read_bytes()
    except FileNotFoundError:
        head = None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, head)


def read_chain(path: Path) -> tuple[list[dict], list[str], list[str], str]:
    """(entries, chain problems, notes, last hash) of the ledger file: every line parsed, the
    chain, sequence, hashes, versions and head checked. Cached per process by `_file_key`, so a
    command that reads the ledger several times parses and hashes it once. Raises PolicyError for
    a torn or corrupt line."""
    key = _file_key(path)
    name = str(path.resolve()) if key is not None else str(path)
    with _CACHE_LOCK:
        hit = _CACHE.get(name)
    if hit is not None and key is not None and hit[0] == key:
        return hit[1], hit[2], hit[3], hit[4]
    entries = _parse(path)
    problems, notes, last = _check_chain(path, entries)
    if key is not None and _file_key(path) == key:       # unchanged while we read it
        with _CACHE_LOCK:
            _CACHE[name] = (key, entries, problems, notes, last)
    return entries, problems, notes, last


def read_entries(ledger_path: str | Path) -> list[dict]:
    """Parse every line; raises PolicyError naming the line on a torn or corrupt line. (The
    entries are shared with this process's cache: do not modify them.)"""
    path = Path(ledger_path)
    with shared_lock(path):
        return list(read_chain(path)[0])


def _parse(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    data = path.read_bytes()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        raise PolicyError(f"{path}:{len(lines)}: torn last line (no newline): an append was interrupted")
    for n, line in enumerate(lines, 1):
        try:
            e = json.loads(line)
            if not isinstance(e, dict):
                raise ValueError("not an object")
        except (ValueError, UnicodeDecodeError) as exc:
            raise PolicyError(f"{path}:{n}: corrupt ledger line ({exc})") from None
        out.append(e)
    return out


def _check_chain(path: Path, entries: list[dict]) -> tuple[list[str], list[str], str]:
    """(problems, notes, last hash) of the chain itself: sequence, prev links, entry hashes,
    versions, and the head file."""
    problems: list[str] = []
    notes: list[str] = []
    prev = GENESIS
    for k, e in enumerate(entries):
        where = f"{path}:{k + 1}"
        if e.get("seq") != k:
            problems.append(f"{where}: sequence number {e.get('seq')!r}, expected {k} (reordered or deleted)")
        if e.get("prev") != prev:
            problems.append(f"{where}: chain broken (prev hash does not match entry {k})")
        if e.get("hash") != entry_hash(e):
            problems.append(f"{where}: entry hash mismatch (edited)")
        if e.get("v") not in READABLE_VERSIONS:
            problems.append(f"{where}: ledger format {e.get('v')!r} is not one this version reads "
                            f"({', '.join(map(str, READABLE_VERSIONS))}); upgrade repoguard")
        prev = e.get("hash", "")
    head = head_path(path)
    if head.exists():
        try:
            h = json.loads(head.read_text())
            count, last = int(h["count"]), str(h["last_hash"])
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"{head}: corrupt head ({exc})")
        else:
            if count > len(entries):
                problems.append(f"{path}: truncated: head says {count} entries, file has {len(entries)}")
            elif count > 0 and entries[count - 1].get("hash") != last:
                problems.append(f"{path}: entry {count} does not match the head's hash (rewritten)")
            elif count == 0 and last != GENESIS:
                problems.append(f"{head}: head of an empty ledger must be the genesis hash")
            elif count < len(entries):
                notes.append(f"{len(entries) - count} entry(ies) beyond the head (interrupted head update)")
    elif entries:
        problems.append(f"{head}: missing head file (ledger truncated or replaced?)")
    return problems, notes, (prev if entries else GENESIS)


_DIGESTS: dict[tuple, str] = {}    # (file, inode, size, mtime ns, ctime ns) → SHA-256


def _digest(f: Path) -> str:
    """SHA-256 of side file `f`, hashed once per process per state of the file (a rewrite, an
    edit or a swap changes its inode, size or times, and is hashed again)."""
    st = f.stat()
    key = (str(f), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    got = _DIGESTS.get(key)
    if got is None:
        got = ls.file_digest(f)
        if len(_DIGESTS) > 100_000:
            _DIGESTS.clear()
        _DIGESTS[key] = got
    return got


def check_side_file(path: Path, ref, where: str, what: str) -> list[str]:
    """Problems with one side file named by an entry: missing, or its SHA-256 differs."""
    try:
        f = side_dir(path) / str(ref["file"])
        want = str(ref["sha256"])
    except (TypeError, KeyError):
        return [f"{where}: malformed {what} reference"]
    if "/" in str(ref["file"]) or not f.is_file():
        return [f"{where}: {what} file {f} missing (deleted or ledger truncated?)"]
    if _digest(f) != want:
        return [f"{where}: {what} file {f.name} does not match its digest (edited or swapped)"]
    return []


def clear_caches() -> None:
    """Forget every parsed chain and side-file digest (as a fresh process would start)."""
    with _CACHE_LOCK:
        _CACHE.clear()
    _DIGESTS.clear()
