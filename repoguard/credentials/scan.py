"""Scan modes: working tree, plain directory, explicit files, staged change, history.

Work is spread over a process pool (one Engine per worker, the compiled Hyperscan database
shipped as bytes). Workers read working-tree files themselves, so file contents never cross a
process boundary; history and staged texts (added lines only) are sent in batches.

Safety: symlinks are never followed (tracked symlinks are skipped, and a path whose real location
is outside the repository — e.g. through a symlinked parent directory — is refused); only regular
files are opened (a FIFO would block); reads stop at `max_file_bytes` (the rest of an oversize file
is not scanned, and the file is counted as truncated); files with a NUL byte in their first 8000
bytes are binary (git's test) and are scanned over their printable runs, as `strings` reads them
(credentials.names.printable_runs). File names and, in `--history`, commit messages are scanned
too (credentials.names); a name holding a credential is reported redacted, for every finding of
its file. The text report says how many files were read as binary, truncated or skipped, and why
(`report.notes`).
"""
from __future__ import annotations

import logging
import os
import stat
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

from repoguard.credentials.engine import Engine
from repoguard.credentials.findings import Finding
from repoguard.credentials.names import (IN_MESSAGE, IN_NAME, MESSAGE_PATH, is_binary, printable_runs,
                                         redact_name, scan_name, scan_names)
from repoguard.credentials.report import unreadable_objects
from repoguard.credentials.rules import RuleSet
from repoguard.core.progress import progress

BATCH_BYTES = 4 << 20
BATCH_FILES = 64
_INPROCESS_BYTES = 8 << 20  # below this (history, staged), a pool costs more than it saves
_INPROCESS_FILES = 128
log = logging.getLogger("repoguard")


@dataclass
class ScanResult:
    """Findings (sorted by path, line) and counters: files, bytes, skipped files by reason."""

    findings: list[Finding]
    stats: dict = field(default_factory=dict)


# -- worker side ---------------------------------------------------------------------------------
_ENGINE: Engine | None = None


def _init_worker(ruleset: RuleSet, hs_db: bytes | None, token: int, key: bytes) -> None:
    """Under fork the parent's engine is inherited (token matches); under spawn, rebuild it from
    the serialized Hyperscan database (no recompilation)."""
    global _ENGINE
    if _ENGINE is not None and id(_ENGINE) == token:
        return
    _ENGINE = (Engine(ruleset, hs_database=hs_db, key=key) if hs_db
               else Engine(ruleset, use_hyperscan=False, key=key))


def read_regular_file(root: str, rel: str, max_bytes: int,
                      dir_cache: dict[str, bool] | None = None) -> tuple[bytes | None, str]:
    """(bytes, "") for a regular file inside `root`, or (None, reason) — reasons: symlink,
    outside (its directory's real path leaves `root`), special (not a regular file), missing,
    unreadable. Reads at most `max_bytes` + 1 bytes so callers can tell truncation.
    `root` must be a real path; `dir_cache` memoises the per-directory check."""
    full = os.path.join(root, rel)
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        return None, "missing"
    except OSError:
        return None, "unreadable"
    if stat.S_ISLNK(st.st_mode):
        return None, "symlink"
    if not stat.S_ISREG(st.st_mode):
        return None, "special"
    d = os.path.dirname(full)
    ok = dir_cache.get(d) if dir_cache is not None else None
    if ok is None:
        real = os.path.realpath(d)
        ok = real == root or real.startswith(root.rstrip(os.sep) + os.sep)
        if dir_cache is not None:
            dir_cache[d] = ok
    if not ok:
        return None, "outside"
    try:
        fd = os.open(full, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
            # Never ask for more than the file holds: read(50 MB) allocates 50 MB up front.
            return fh.read(min(st.st_size, max_bytes) + 1), ""
    except OSError:
        return None, "unreadable"


def _scan_files(root: str, paths: Sequence[str], max_bytes: int, strip: str) -> tuple[list[Finding], Counter]:
    eng = _ENGINE
    assert eng is not None
    out: list[Finding] = []
    counts: Counter = Counter()
    dirs: dict[str, bool] = {}
    for rel in paths:
        data, why = read_regular_file(root, rel, max_bytes, dirs)
        shown = rel[len(strip):] if strip and rel.startswith(strip) else rel
        if data is None:
            counts[f"skipped_{why}"] += 1
            continue
        if len(data) > max_bytes:
            data = data[:max_bytes]
            counts["truncated"] += 1
        counts["files"] += 1
        counts["bytes"] += len(data)
        if is_binary(data):
            counts["binary"] += 1          # scanned over its printable runs (module doc)
            data = printable_runs(data)
        out += eng.scan(data, shown)
    return out, counts


def _scan_texts(items: Sequence[tuple[int, str, str | None, bytes, list[int], str]]) -> tuple[list, Counter]:
    """items: (sequence number, path, commit sha, text of added lines, their line numbers,
    found_in: "" for added lines, else the item is a file name or a commit message,
    credentials.names)."""
    eng = _ENGINE
    assert eng is not None
    out = []
    counts: Counter = Counter()
    for seq, path, commit, text, lines, found_in in items:
        counts["bytes"] += len(text)
        if found_in == IN_NAME:
            for f in scan_name(eng, path, commit=commit):
                f.commit = commit
                out.append((seq, f))
            continue
        if is_binary(text):
            counts["binary"] += 1
            text = printable_runs(text)
        for f in eng.scan(text, path, commit=commit):
            f.commit = commit
            f.found_in = found_in
            if f.line:  # map the line in the joined text back to the file's line
                f.line, f.end_line = lines[f.line - 1], lines[min(f.end_line, len(lines)) - 1]
            out.append((seq, f))
    return out, counts


# -- driver ---------------------------------------------------------------------------------------
class Scanner:
    """Runs scans for one rule set. `jobs`: worker processes (default: all cores)."""

    def __init__(self, ruleset: RuleSet, *, jobs: int | None = None, max_file_bytes: int = 50_000_000,
                 use_hyperscan: bool | None = None, exclude: Callable[[str], bool] | None = None,
                 key: bytes | None = None) -> None:
        """`exclude(path) -> bool` drops paths (config `scan.exclude`) in every mode. `key`: the
        fingerprint key (`credentials.keys.repo_key(root)` for anything published)."""
        self.ruleset = ruleset
        self.exclude = exclude or (lambda p: False)
        self.engine = Engine.build(ruleset, use_hyperscan=use_hyperscan, key=key)
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.max_file_bytes = max_file_bytes

    def _pool(self) -> ProcessPoolExecutor:
        global _ENGINE
        _ENGINE = self.engine
        return ProcessPoolExecutor(max_workers=self.jobs, initializer=_init_worker,
                                   initargs=(self.ruleset, self.engine.serialize(), id(self.engine), self.engine.key))

    def scan_files(self, root: str, paths: Sequence[str], *, strip: str = "", names: bool = True) -> ScanResult:
        """Scan working-tree files `paths` (relative to `root`); reported paths lose `strip`.
        `names`: also scan the file names, and report every finding of a file whose name holds
        a credential under the redacted name (module doc); False: contents only, real paths
        (`analyze` ties findings to the files by path)."""
        t0 = time.perf_counter()
        root = os.path.realpath(root)
        keep = [p for p in paths if not self.exclude(p)
                and not self.engine.path_allowed(p[len(strip):] if strip else p)]
        counts: Counter = Counter(skipped_allowlisted=len(paths) - len(keep))
        batches = [keep[i:i + BATCH_FILES] for i in range(0, len(keep), BATCH_FILES)]
        findings: list[Finding] = []
        with progress("scanning files", total=len(keep)) as advance:
            if self.jobs > 1 and len(keep) > _INPROCESS_FILES:
                with self._pool() as pool:
                    futs = [pool.submit(_scan_files, root, b, self.max_file_bytes, strip) for b in batches]
                    for b, fut in zip(batches, futs):
                        f, c = fut.result()
                        findings += f
                        counts += c
                        advance(len(b))
            else:
                global _ENGINE
                _ENGINE = self.engine
                for b in batches:
                    f, c = _scan_files(root, b, self.max_file_bytes, strip)
                    findings += f
                    counts += c
                    advance(len(b))
        if names:
            findings = _redact_paths(findings + self._names(p[len(strip):] if strip else p for p in keep))
        return ScanResult(sorted(findings, key=_order), self._stats(counts, t0))

    def _names(self, paths: Iterable[str], commit: str | None = None) -> list[Finding]:
        """Findings in the names of `paths` (credentials.names.scan_names)."""
        return scan_names(self.engine, paths, commit=commit)

    def scan_texts(self, items: Iterable[tuple[str, str | None, bytes, list[int]]]) -> list[tuple[int, Finding]]:
        """Scan (path, commit, text, line numbers) items, streamed; returns (sequence, finding)
        pairs, sequence being the item's position in the stream."""
        out: list[tuple[int, Finding]] = []
        self._text_counts: Counter = Counter()
        batches = _text_batches(items)
        head, size = [], 0
        for b in batches:  # small streams (a pre-commit change) stay in this process
            head.append(b)
            size += sum(len(it[3]) for it in b)
            if size > _INPROCESS_BYTES:
                break
        global _ENGINE
        if self.jobs == 1 or size <= _INPROCESS_BYTES:
            _ENGINE = self.engine
            for b in _chain(head, batches):
                f, c = _scan_texts(b)
                out += f
                self._text_counts += c
            return out
        with self._pool() as pool:
            pending = []
            for b in _chain(head, batches):
                pending.append(pool.submit(_scan_texts, b))
                if len(pending) >= 4 * self.jobs:  # bounded memory: history can be huge
                    f, c = pending.pop(0).result()
                    out += f
                    self._text_counts += c
            for fut in pending:
                f, c = fut.result()
                out += f
                self._text_counts += c
        return out

    def _stats(self, counts: Counter, t0: float) -> dict:
        dt = time.perf_counter() - t0
        stats = {k: int(v) for k, v in sorted(counts.items()) if v}
        stats.setdefault("files", 0)
        stats.setdefault("bytes", 0)
        stats.update(seconds=round(dt, 3), engine=self.engine.backend, rules=len(self.ruleset.rules),
                     jobs=self.jobs, mb_per_s=round(stats["bytes"] / 1e6 / dt, 2) if dt > 0 else 0.0)
        return stats

    # -- git modes ------------------------------------------------------------------------------
    def scan_staged(self, repo) -> ScanResult:
        """Added lines of the staged change (what `git commit` would record), plus path rules on
        every staged file (a staged `.p12` has no text lines)."""
        t0 = time.perf_counter()
        patch = repo.staged_patch()
        items = [it for it in _group_added(patch.added, None) if not self.exclude(it[0])]
        pairs = self.scan_texts(items)
        findings = [f for _, f in pairs]
        seen = {f.path for f in findings}
        staged = [tf.path for tf in repo.staged_files() if not self.exclude(tf.path)]
        for path in staged:
            if path not in seen:
                findings += self.engine.scan(b"", path)
        findings += self._names(staged)
        counts = Counter(self._text_counts)
        counts["files"] = len({p for p, *_ in items})
        return ScanResult(sorted(_dedupe(_redact_paths(findings)), key=_order), self._stats(counts, t0))

    def scan_history(self, repo, *, since: str | None = None, all_refs: bool = False,
                     rev: str = "HEAD") -> ScanResult:
        """Every commit's added lines, the names of the files it touches and its message (newest
        first from one streamed `git log -p`); each secret is reported once, at the commit that
        introduced it (the oldest one adding it on that path), with author, date and whether it
        is still present at HEAD. `rev`: a revision or range (`v1.0..main`); `since`: only
        commits after it. An object git cannot read is skipped with a warning naming it and
        counted in `stats["unreadable"]` (source.gitlog.Unreadable); the rest is scanned."""
        t0 = time.perf_counter()
        commits: list = []
        unreadable: list = []
        flagged: dict[str, bool] = {}      # path → its name holds a credential (checked once)

        def items(advance) -> Iterator[tuple[str, str | None, bytes, list[int], str]]:
            for patch in repo.iter_patches(rev, since=since, all_refs=all_refs, unreadable=unreadable):
                commits.append(patch.commit)
                advance()
                sha = patch.commit.sha
                if patch.commit.message:
                    text = patch.commit.message.encode("utf-8", "surrogateescape")
                    yield MESSAGE_PATH, sha, text, list(range(1, text.count(b"\n") + 2)), IN_MESSAGE
                for path, text, lines in patch.texts():     # raw bytes: no per-line decode
                    if not (self.exclude(path) or self.engine.path_allowed(path)):
                        yield path, sha, text, lines, ""
                new = [p for p in dict.fromkeys(patch.paths) if p not in flagged and not self.exclude(p)]
                hits = {f.path for f in self._names(new)} if new else set()
                flagged.update((p, p in hits) for p in new)
                for p in dict.fromkeys(patch.paths):
                    if flagged.get(p):
                        yield p, sha, b"", [1], IN_NAME

        with progress("scanning commits") as advance:
            pairs = self.scan_texts(items(advance))
        rows = [{"object": u.sha, "commit": u.commit, "paths": list(u.paths)} for u in unreadable]
        for sha, where in unreadable_objects(rows).items():
            log.warning("repoguard: skipped unreadable object %s (%s); the rest of those commits and of the "
                        "history was scanned", sha, where)
        _redact_paths([f for _, f in pairs])
        by_sha = {c.sha: c for c in commits}
        oldest: dict[str, tuple[int, Finding]] = {}
        for seq, f in pairs:
            if f.fingerprint not in oldest or seq > oldest[f.fingerprint][0]:
                oldest[f.fingerprint] = (seq, f)
        at_head = self._head_secrets(repo)
        findings = []
        for _, f in oldest.values():
            c = by_sha.get(f.commit or "")
            if c is not None:
                f.author = f"{c.author_name} <{c.author_email}>"
                f.date = c.author_date
            f.present_at_head = (f.rule_id, f.secret_hmac) in at_head
            findings.append(f)
        counts = Counter(self._text_counts)
        counts["commits"] = len(commits)
        stats = self._stats(counts, t0)
        if rows:
            stats["unreadable"] = rows
        return ScanResult(sorted(findings, key=_order), stats)

    def _head_secrets(self, repo) -> set[tuple[str, str]]:
        """(rule id, secret hash) of every finding in the HEAD tree (any path: a moved secret is
        still present)."""
        if repo.head is None:
            return set()
        # `git ls-tree -r HEAD` through the repo object: blob ids of the HEAD tree.
        out = repo._git("ls-tree", "-r", "-z", "--full-tree", "HEAD")
        blobs: dict[str, list[str]] = {}
        for rec in out.split("\0"):
            meta, _, path = rec.partition("\t")
            parts = meta.split(" ")
            if len(parts) == 3 and parts[1] == "blob" and parts[0] != "120000":
                blobs.setdefault(parts[2], []).append(path)
        found = set()
        for sha, data in repo.read_blobs(list(blobs)):
            if data is None:
                continue
            data = data[:self.max_file_bytes]
            if is_binary(data):
                data = printable_runs(data)
            for path in blobs[sha]:
                for f in self.engine.scan(data, path):
                    found.add((f.rule_id, f.secret_hmac))
        found.update((f.rule_id, f.secret_hmac) for f in self._names(p for ps in blobs.values() for p in ps))
        return found


def _redact_paths(findings: list[Finding]) -> list[Finding]:
    """Every finding of a file whose name holds a credential gets the redacted name as its path
    (credentials.names.redact_name), in place; returns `findings`."""
    names: dict[str, list[Finding]] = {}
    for f in findings:
        if f.found_in == IN_NAME:
            names.setdefault(f.path, []).append(f)
    shown = {p: redact_name(p, fs) for p, fs in names.items()}
    for f in findings:
        f.path = shown.get(f.path, f.path)
    return findings


def _group_added(added, commit: str | None) -> Iterator[tuple[str, str | None, bytes, list[int]]]:
    """Group added lines by path into one text per path (runs of lines joined by newlines)."""
    by_path: dict[str, list] = {}
    for a in added:
        by_path.setdefault(a.path, []).append(a)
    for path, lines in by_path.items():
        text = "\n".join(a.text for a in lines).encode("utf-8", "surrogateescape")
        yield path, commit, text, [a.line for a in lines]


def walk_plain(root: str) -> list[str]:
    """Every file below `root` (POSIX paths relative to it, sorted), without following symlinked
    directories and skipping `.git` and `.repoguard`. Symlinked files are listed (and skipped
    when read). `os.scandir` reuses the directory entries' types: no stat per file."""
    out: list[str] = []
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(root, rel) if rel else root))
        except OSError:
            continue
        for e in entries:
            name = f"{rel}/{e.name}" if rel else e.name
            if e.is_dir(follow_symlinks=False):
                if e.name not in (".git", ".repoguard"):
                    stack.append(name)
            else:
                out.append(name)
    out.sort()
    return out


def _chain(head: list, rest: Iterator) -> Iterator:
    yield from head
    yield from rest


def _text_batches(items) -> Iterator[list]:
    batch, size = [], 0
    for seq, (path, commit, text, lines, *found_in) in enumerate(items):
        batch.append((seq, path, commit, text, lines, found_in[0] if found_in else ""))
        size += len(text)
        if size >= BATCH_BYTES or len(batch) >= BATCH_FILES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in findings:
        key = (f.fingerprint, f.line)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _order(f: Finding):
    return (f.path, f.line, f.column, f.rule_id)
