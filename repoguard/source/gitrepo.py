"""All git access: tracked files with blob SHAs, streamed history, staged files and patches.

Everything goes through the `git` binary in a subprocess and streams its output: one
`git log -z --name-status` call reads the whole history (GitPython's `Commit.stats` is 27–66×
slower and wrong on merges), `git cat-file --batch` reads many blobs through one process, and
patches are parsed line by line (`source.gitlog`) so a huge blob never sits in memory twice.

A plain directory (no git) is served by `PlainDir` in working-tree mode where a command allows it.
"""
from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from repoguard.core.errors import InputError
from repoguard.source.gitlog import (
    _REC, _UNIT, Commit, Patch, Unreadable, _decode, _parse_log, _parse_patches, _read_records,
)

log = logging.getLogger(__name__)

SUBMODULE_MODE = "160000"
_SUBMODULES_NOTED: set[Path] = set()   # roots whose skipped submodules were already reported
SYMLINK_MODE = "120000"
_LOG_FORMAT = _REC + _UNIT.join(["%H", "%P", "%an", "%ae", "%aI", "%cI", "%cn", "%ce", "%B"]) + _UNIT


@dataclass(frozen=True)
class TrackedFile:
    """A file in the index: repo-relative POSIX `path`, `blob_sha` (hex), git `mode` ("100644"…)."""

    path: str
    blob_sha: str
    mode: str

    @property
    def is_symlink(self) -> bool:
        """Whether the index records a symlink (mode 120000)."""
        return self.mode == SYMLINK_MODE


def git_blob_sha(data: bytes) -> str:
    """The SHA-1 git would give `data` as a blob (`git hash-object`), hex. Used for stable example
    ids of working-tree content, tracked or not."""
    h = hashlib.sha1(b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()



class GitRepo:
    """A git working tree. Raises `InputError` when `path` is not inside one or git is unusable.

    `root` is the absolute top level; paths everywhere are POSIX and relative to it.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        p = Path(path)
        if not p.exists():
            raise InputError(f"{p}: no such directory")
        if not p.is_dir():
            raise InputError(f"{p}: not a directory")
        try:
            out = subprocess.run(
                ["git", "rev-parse", "--show-toplevel"], cwd=p, capture_output=True, check=False
            )
        except FileNotFoundError as exc:  # pragma: no cover - git missing
            raise InputError("git: command not found; install git or use --no-git") from exc
        if out.returncode != 0:
            msg = _decode(out.stderr).strip().splitlines()[-1:] or ["unknown error"]
            if "not a git repository" in msg[0].lower():
                raise InputError(f"{p}: not a git repository (repoguard reads tracked files and history: "
                                 "`git init && git add -A && git commit -m init` first; "
                                 "`repoguard scan --no-git` scans a plain directory)")
            raise InputError(f"{p}: not a usable git repository ({msg[0]})")
        self.root = Path(_decode(out.stdout).strip()).resolve()
        # A repo whose HEAD is unborn (no commits yet) is valid: history is empty.
        head = self._git("rev-parse", "--verify", "-q", "HEAD", check=False)
        self.head: str | None = head.strip() or None
        shallow = self._git("rev-parse", "--is-shallow-repository", check=False).strip()
        self.is_shallow = shallow == "true"
        if self.is_shallow:
            log.info("%s: shallow clone; history stops at the grafted commits", self.root)

    is_git = True

    # -- plumbing -----------------------------------------------------------------------------
    def _git(self, *args: str, check: bool = True, input: bytes | None = None) -> str:
        out = subprocess.run(["git", *args], cwd=self.root, capture_output=True, input=input)
        if check and out.returncode != 0:
            err = _decode(out.stderr).strip().splitlines()
            raise InputError(f"{self.root}: git {args[0]} failed ({err[-1] if err else out.returncode})")
        return _decode(out.stdout)

    def _stream(self, *args: str) -> subprocess.Popen:
        # GIT_FLUSH=0: fully buffered output (into a pipe git would flush after every commit)
        proc = subprocess.Popen(
            ["git", *args], cwd=self.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, "GIT_FLUSH": "0"},
        )
        assert proc.stdout is not None
        _widen_pipe(proc.stdout.fileno())
        return proc

    @staticmethod
    def _finish(proc: subprocess.Popen, what: str, root: Path) -> None:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        err = proc.stderr.read()
        proc.stderr.close()
        if proc.wait() != 0:
            lines = _decode(err).strip().splitlines()
            raise InputError(f"{root}: git {what} failed ({lines[-1] if lines else proc.returncode})")

    # -- working tree ---------------------------------------------------------------------------
    def tracked_files(self) -> list[TrackedFile]:
        """Files in the index (stage 0), sorted by path. Submodules are skipped with a notice."""
        out = self._git("ls-files", "-s", "-z", "--full-name")
        files: list[TrackedFile] = []
        submodules: list[str] = []
        for rec in out.split("\0"):
            if not rec:
                continue
            meta, _, path = rec.partition("\t")
            mode, sha, stage = meta.split(" ")
            if stage != "0":
                continue  # unmerged entries: the working tree is authoritative, seen once below
            if mode == SUBMODULE_MODE:
                submodules.append(path)
                continue
            files.append(TrackedFile(path=path, blob_sha=sha, mode=mode))
        if submodules and self.root not in _SUBMODULES_NOTED:   # once per process, with the count
            _SUBMODULES_NOTED.add(self.root)
            log.info("%s: %d submodule(s) skipped (%s)", self.root, len(submodules),
                     ", ".join(submodules[:3]) + (", …" if len(submodules) > 3 else ""))
        return files

    def read_working_file(self, path: str, *, max_bytes: int | None = None, links_inside: bool = False) -> bytes:
        """Bytes of a working-tree file; reads at most `max_bytes` (+1 so callers can tell).
        Raises `OutsideRoot` (an OSError) for a path through a symlink (`read_inside`; with
        `links_inside`, only for one leading out of the checkout)."""
        return read_inside(self.root, path, max_bytes, links_inside=links_inside)

    # -- blobs ----------------------------------------------------------------------------------
    def read_blob(self, sha: str) -> bytes:
        """Contents of one blob. For many, use `read_blobs` (one process)."""
        out = subprocess.run(["git", "cat-file", "blob", sha], cwd=self.root, capture_output=True)
        if out.returncode != 0:
            raise InputError(f"{self.root}: cannot read blob {sha[:12]}")
        return out.stdout

    def read_blobs(self, shas: Iterable[str]) -> Iterator[tuple[str, bytes | None]]:
        """Stream `(sha, bytes)` for each sha via one `git cat-file --batch`; bytes is None when
        the object is missing."""
        proc = subprocess.Popen(
            ["git", "cat-file", "--batch"], cwd=self.root,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            for sha in shas:
                proc.stdin.write(sha.encode() + b"\n")
                proc.stdin.flush()
                header = proc.stdout.readline().rstrip(b"\n").split(b" ")
                if len(header) < 3 or header[1] == b"missing":
                    yield sha, None
                    continue
                size = int(header[2])
                data = proc.stdout.read(size)
                proc.stdout.read(1)  # trailing LF
                yield sha, data
        finally:
            proc.stdin.close()
            proc.stdout.close()
            proc.wait()

    # -- history --------------------------------------------------------------------------------
    def iter_commits(
        self,
        rev: str = "HEAD",
        *,
        since: str | None = None,
        paths: Sequence[str] = (),
        all_refs: bool = False,
        first_parent: bool = False,
        merges: str = "skip",
        renames: bool = True,
    ) -> Iterator[Commit]:
        """Stream commits newest first from one `git log -z --name-status` call.

        `since`: a revision; only commits reachable from `rev` but not from `since` (`since..rev`).
        `merges`: "skip" (no merge commits), "none" (merges listed without changes, git's default)
        or "first-parent" (a merge's changes against its first parent). Renames are detected
        (`-M`) unless `renames=False`. Yields nothing for an unborn HEAD.
        Raises InputError when git fails (bad revision, corrupt repository).
        """
        if self.head is None and not all_refs:
            return
        args = ["log", "-z", f"--format={_LOG_FORMAT}", "--name-status", "--no-color"]
        args.append("-M" if renames else "--no-renames")
        if merges == "skip":
            args.append("--no-merges")
        elif merges == "first-parent":
            args.append("--diff-merges=first-parent")
        elif merges != "none":
            raise ValueError(f"merges must be skip, none or first-parent, not {merges!r}")
        if first_parent:
            args.append("--first-parent")
        if all_refs:
            args.append("--all")
        else:
            args.append(f"{since}..{rev}" if since else rev)
        args.append("--")
        args.extend(paths)
        proc = self._stream(*args)
        assert proc.stdout is not None
        try:
            yield from _parse_log(_read_records(proc.stdout))
        finally:
            self._finish(proc, "log", self.root)

    def iter_patches(
        self, rev: str = "HEAD", *, since: str | None = None, all_refs: bool = False,
        max_line_chars: int = 100_000, unreadable: list[Unreadable] | None = None,
    ) -> Iterator[Patch]:
        """Stream the added lines of every commit (`git log -p -U0 --text`: binary files' lines
        too), newest first, merges skipped; each commit's message is in `patch.commit.message`.

        `rev` may be a range (`v1.0..main`); `since` adds `since..rev`. Lines longer than
        `max_line_chars` are cut (their head is kept) so a minified or single-line 100 MB blob
        cannot exhaust memory. A binary file's lines are cut the same way.

        An object git cannot read (`fatal: unable to read SHA`: a partial mirror, a promisor
        clone) stops `git log`; with `unreadable` (a list the caller owns), the commit that needed
        it is read again without the paths naming it, the stream resumes after that commit
        (`--skip`, the same walk), and an `Unreadable` is appended for each such object. Without
        it, or when the failing commit cannot be told, raises InputError as for any git failure.
        """
        if self.head is None and not all_refs:
            return
        walk = ["--all"] if all_refs else [f"{since}..{rev}" if since else rev]
        done = 0                                   # commits of the walk already yielded
        while True:
            proc = self._stream(*_patch_args(), "--no-merges", *(["--skip", str(done)] if done else []), *walk)
            assert proc.stdout is not None and proc.stderr is not None
            held: Patch | None = None              # yielded once the next header (or a clean end) shows it complete
            try:
                for patch in _parse_patches(proc.stdout, max_line_chars=max_line_chars, with_header=True):
                    if held is not None:
                        yield held
                        done += 1
                    held = patch
            except BaseException:
                proc.kill()
                self._finish_quietly(proc)
                raise
            proc.stdout.close()
            err = _decode(proc.stderr.read())
            proc.stderr.close()
            if proc.wait() == 0:
                if held is not None:
                    yield held
                return
            why = _git_error(err) or str(proc.returncode)
            bad = _UNREADABLE.search(err)
            if unreadable is None or bad is None:
                raise InputError(f"{self.root}: git log -p failed ({why})")
            commit, paths = self._needing(bad.group(1), walk, done, held)
            if commit is None:
                raise InputError(f"{self.root}: git log -p failed ({why}; no commit at that point "
                                 "of the history names the object)")
            if held is not None and held.commit is not None and held.commit.sha != commit:
                yield held                         # complete: the failure came with the next commit
                done += 1
            patch = self._patch_without(commit, set(paths), max_line_chars, unreadable)
            unreadable.append(Unreadable(bad.group(1), commit, tuple(sorted(paths))))
            if patch is not None:
                yield patch
            done += 1

    def _needing(self, sha: str, walk: list[str], done: int, held: Patch | None) -> tuple[str | None, list[str]]:
        """(commit, paths) of the first commit from position `done` of the walk (the one whose
        header was printed, then the next) whose tree change names blob `sha`."""
        out = self._git("rev-list", "--no-merges", "--skip", str(done), "--max-count", "2", *walk, "--")
        for c in [x for x in out.split("\n") if x]:
            paths = self._paths_naming(c, sha)
            if paths:
                return c, paths
        return None, []

    def _paths_naming(self, commit: str, sha: str) -> list[str]:
        """Paths whose old or new blob in `commit`'s change (against its first parent) is `sha`;
        raw output reads no blob (no rename detection)."""
        out = self._git("diff-tree", "-r", "-z", "--root", "--no-renames", "--no-abbrev", "--no-commit-id", commit)
        toks = out.split("\0")
        paths = []
        for meta, path in zip(toks[0::2], toks[1::2]):
            parts = meta.split(" ")
            if len(parts) >= 4 and sha in (parts[2], parts[3]):
                paths.append(path)
        return paths

    def _patch_without(self, commit: str, skip: set[str], max_line_chars: int,
                       unreadable: list[Unreadable]) -> Patch | None:
        """`commit`'s patch without the paths in `skip`; another unreadable blob there adds its
        paths to `skip` (and an `Unreadable`) and the commit is read again."""
        while True:
            excl = [f":(exclude,literal){p}" for p in sorted(skip)]
            # diff-tree --always: the commit's header even when nothing is left to diff (`git log
            # -1 C -- PATHS` would walk on to an older commit touching PATHS)
            proc = self._stream("diff-tree", "--always", "--root", *_patch_args()[1:], commit, "--", ".", *excl)
            assert proc.stdout is not None and proc.stderr is not None
            patches = list(_parse_patches(proc.stdout, max_line_chars=max_line_chars, with_header=True))
            proc.stdout.close()
            err = _decode(proc.stderr.read())
            proc.stderr.close()
            if proc.wait() == 0:
                return patches[0] if patches else None
            bad = _UNREADABLE.search(err)
            more = self._paths_naming(commit, bad.group(1)) if bad else []
            if not more or set(more) <= skip:
                raise InputError(f"{self.root}: git log -p failed on commit {commit[:12]} ({_git_error(err)})")
            unreadable.append(Unreadable(bad.group(1), commit, tuple(sorted(more))))
            skip |= set(more)

    @staticmethod
    def _finish_quietly(proc: subprocess.Popen) -> None:
        for s in (proc.stdout, proc.stderr):
            if s is not None:
                s.close()
        proc.wait()

    # -- staging --------------------------------------------------------------------------------
    def staged_files(self) -> list[TrackedFile]:
        """Files added, copied, modified or renamed in the index relative to HEAD (deletions are
        not listed), with their staged blob SHAs. Works before the first commit."""
        base = self.head or _EMPTY_TREE
        out = self._git("diff", "--cached", "--name-only", "-z", "--no-renames",
                        "--diff-filter=ACMRT", base)
        paths = [p for p in out.split("\0") if p]
        if not paths:
            return []
        wanted = set(paths)
        return [f for f in self.tracked_files() if f.path in wanted]

    def staged_patch(self, *, max_line_chars: int = 100_000) -> Patch:
        """Added lines of the staged change (`git diff --cached -U0`)."""
        base = self.head or _EMPTY_TREE
        proc = self._stream("diff", "--cached", "-U0", "--text", "--no-color", "--no-ext-diff",
                            "--no-renames", base)
        assert proc.stdout is not None
        try:
            patches = list(_parse_patches(proc.stdout, max_line_chars=max_line_chars, with_header=False))
        finally:
            self._finish(proc, "diff --cached", self.root)
        return patches[0] if patches else Patch(commit=None)

    def mailmap(self) -> dict[str, str]:
        """Map of raw author email → canonical email per `.mailmap` (empty when none)."""
        if not (self.root / ".mailmap").exists():
            return {}
        out = self._git("log", "--format=%ae%x1f%aE", "--all", check=False)
        mapping = {}
        for line in out.split("\n"):
            raw, _, canon = line.partition(_UNIT)
            if raw and canon and raw != canon:
                mapping[raw] = canon
        return mapping


# The empty tree's id: the base of `git diff --cached` before the first commit.
_EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


class PlainDir:
    """A directory without git, in working-tree mode: every regular file below `root`, except
    `.git` folders, symlinks (listed with mode 120000, never followed) and the output folder."""

    is_git = False
    head = None
    is_shallow = False

    def __init__(self, path: str | os.PathLike) -> None:
        p = Path(path)
        if not p.is_dir():
            raise InputError(f"{p}: no such directory")
        self.root = p.resolve()

    def tracked_files(self) -> list[TrackedFile]:
        """Every file below `root`, walked in sorted order without following links: `.git` and
        `.repoguard` folders left out, symlinks listed with mode 120000, no blob SHA ("")."""
        files = []
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d not in (".git", ".repoguard"))
            for name in sorted(filenames):
                full = Path(dirpath) / name
                rel = full.relative_to(self.root).as_posix()
                mode = SYMLINK_MODE if full.is_symlink() else "100644"
                files.append(TrackedFile(path=rel, blob_sha="", mode=mode))
        return files

    def read_working_file(self, path: str, *, max_bytes: int | None = None, links_inside: bool = False) -> bytes:
        """Bytes of a working-tree file; reads at most `max_bytes` (+1 so callers can tell).
        Raises `OutsideRoot` (an OSError) for a path through a symlink (`read_inside`; with
        `links_inside`, only for one leading out of the checkout)."""
        return read_inside(self.root, path, max_bytes, links_inside=links_inside)


def open_repo(path: str | os.PathLike, *, allow_plain: bool = False) -> GitRepo | PlainDir:
    """A `GitRepo` for `path`, or — when `allow_plain` and `path` is not in a git repository — a
    `PlainDir`. Raises InputError naming the path otherwise."""
    p = Path(path)
    if allow_plain and p.is_dir():
        probe = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=p, capture_output=True)
        if probe.returncode != 0:
            return PlainDir(p)
    return GitRepo(p)


# -- reading inside the checkout ------------------------------------------------------------------
class OutsideRoot(OSError):
    """A working-tree path that would be read through a symlink: the file itself, or a directory
    above it (a tracked `etcconf/passwd` whose `etcconf` was replaced by a link to `/etc`)."""


def symlinked_component(root: str | os.PathLike, rel: str, cache: dict | None = None) -> str | None:
    """The first component of `rel` (repo-relative POSIX path) below `root` that is a symlink,
    as a repo-relative path, or None. `root` must be a resolved path. The parent directory is
    checked with one `realpath` (memoised per directory in `cache`); only when it differs from
    the lexical path are the components walked to name the link."""
    full = os.path.join(root, rel)
    if os.path.islink(full):
        return rel
    parent = os.path.dirname(full)
    ok = cache.get(parent) if cache is not None else None
    if ok is None:
        ok = os.path.realpath(parent) == os.path.normpath(parent)
        if cache is not None:
            cache[parent] = ok
    if ok:
        return None
    parts = rel.split("/")[:-1]
    for i in range(1, len(parts) + 1):
        if os.path.islink(os.path.join(root, *parts[:i])):
            return "/".join(parts[:i])
    return os.path.dirname(rel) or rel   # a component changed under us: refuse all the same


def read_inside(root: str | os.PathLike, rel: str, max_bytes: int | None = None,
                cache: dict | None = None, *, links_inside: bool = False) -> bytes:
    """Bytes of the working-tree file `rel` under `root` (at most `max_bytes` + 1, so a caller can
    tell it was longer), never through a symlink: raises `OutsideRoot` when the file or any
    directory above it is a symlink (even one pointing inside the checkout: git never tracks a
    file below a symlink, so such a path is a replaced directory), other OSErrors as `open` does.
    The last component is opened with O_NOFOLLOW. `links_inside`: a symlink whose target lies
    inside `root` is followed (metadata such as a linked `.github/CODEOWNERS`, never training
    text); one leading outside is still refused."""
    link = symlinked_component(root, rel, cache)
    full = os.path.join(root, rel)
    if link is not None:
        real, top = os.path.realpath(full), os.path.realpath(root)
        if links_inside and real.startswith(top.rstrip(os.sep) + os.sep):
            with open(real, "rb") as fh:
                return fh.read() if max_bytes is None else fh.read(max_bytes + 1)
        what = "is a symlink" if link == rel else f"lies under {link}, a symlink"
        raise OutsideRoot(errno.ELOOP, f"{rel} {what}; symlinks are not followed")
    fd = os.open(full, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as fh:
        return fh.read() if max_bytes is None else fh.read(max_bytes + 1)


# git's message for an object it cannot read (`git log -p` on a partial mirror).
_UNREADABLE = re.compile(r"unable to read ([0-9a-f]{40,64})")
_PATCH_FORMAT = _REC + _UNIT.join(["%H", "%P", "%an", "%ae", "%aI", "%cI", "%B"]) + "%x00"


def _widen_pipe(fd: int, size: int = 1 << 20) -> None:
    """Ask Linux for a `size`-byte pipe (64 KiB by default): a history's half a gigabyte of
    patches then crosses in 1 MiB reads instead of 64 KiB ones, with fewer wake-ups of git and
    of the reader (issue 45: the kernel's share of the scan's CPU). Elsewhere, or when refused,
    the pipe stays as it is."""
    try:
        import fcntl
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size)
    except (ImportError, AttributeError, OSError):
        pass


def _git_error(err: str) -> str:
    """The line of git's stderr that says what went wrong: the first `fatal:`/`error:` line (a
    bad revision is followed by a usage hint), else the last line."""
    lines = [x.strip() for x in err.strip().split("\n") if x.strip()]
    return next((x for x in lines if x.startswith(("fatal:", "error:"))), lines[-1] if lines else "")


def _patch_args() -> list[str]:
    """`git log -p` arguments of `iter_patches` (before the revisions). The message (`%B`) ends
    at a NUL, which no commit message holds; -M: a pure rename adds no lines, so a moved secret
    is not reported as introduced again; --text: a file git deems binary (a NUL byte) still shows
    its lines, which the scan reads over their printable runs (credentials.names)."""
    return ["log", "-p", "-U0", "--text", "--no-color", "--no-ext-diff", "-M", f"--format={_PATCH_FORMAT}"]
