"""Parsing git's output streams: `git log` records (commits and their name-status changes) and
`git log -p` / `git diff` patches (added lines, the paths a patch names, commit messages).

Pure functions over byte streams, with no subprocess of their own (`source.gitrepo` runs git).
Output is split on NUL / `\\n` only, never `splitlines()` (which also splits on \\x0b, \\x1c,
U+2028 … inside paths and messages). A history's patches are half a gigabyte, a million hunks
and millions of lines (issue 45), so they are parsed on raw bytes a file's hunks at a time
(`_parse_patches`): no Python step per line or per hunk, and nothing decoded that is not scanned.
"""
from __future__ import annotations

import functools
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate, repeat
from operator import itemgetter
from collections.abc import Sequence
from typing import IO, Iterable, Iterator

# Separators for the log format: ASCII record/unit separators never occur in git metadata we read.
_REC = "\x1e"
_UNIT = "\x1f"


@dataclass(frozen=True)
class Change:
    """One path changed by a commit. `status` is git's letter (A, M, D, R, C, T); for renames and
    copies `old_path` is the source and `similarity` git's score (0–100)."""

    status: str
    path: str
    old_path: str | None = None
    similarity: int | None = None


@dataclass(frozen=True)
class Commit:
    """One commit from `git log`: dates are ISO-8601 strings with offset (`%aI`, `%cI`);
    `committer_name`/`committer_email` are filled by `iter_commits` ("" from `iter_patches`)."""

    sha: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    author_date: str
    committer_date: str
    message: str
    changes: tuple[Change, ...] = ()
    committer_name: str = ""
    committer_email: str = ""

    @property
    def is_merge(self) -> bool:
        """Whether the commit has more than one parent."""
        return len(self.parents) > 1

    @property
    def paths(self) -> tuple[str, ...]:
        """The new-side paths of the commit's changes, in `changes` order."""
        return tuple(c.path for c in self.changes)


@dataclass(frozen=True)
class AddedLine:
    """A line added by a patch: new-side `path`, 1-based `line` number, `text` without newline."""

    path: str
    line: int
    text: str


class LineNumbers(Sequence[int]):
    """The new-side line numbers of one path's added lines in a patch (`Patch.texts`), from its
    hunks (start line, added run): computed on first use, as most texts have no finding and a
    history has millions of lines. Pickles as two lists of one int per hunk."""

    __slots__ = ("_hunks", "_starts", "_ends")

    def __init__(self, hunks: list[tuple[bytes, bytes]]) -> None:
        self._hunks: list[tuple[bytes, bytes]] | None = hunks
        self._starts: list[int] = []
        self._ends: list[int] = []          # cumulative count of added lines after each hunk

    def _spans(self) -> tuple[list[int], list[int]]:
        if self._hunks is not None:
            h, self._hunks = self._hunks, None
            self._starts = list(map(int, map(_START, h)))
            self._ends = list(accumulate(map(bytes.count, map(_RUN, h), repeat(b"\n"))))
        return self._starts, self._ends

    def __len__(self) -> int:
        ends = self._spans()[1]
        return ends[-1] if ends else 0

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return list(self)[i]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        starts, ends = self._spans()
        k = bisect_right(ends, i)
        return starts[k] + i - (ends[k - 1] if k else 0)

    def __iter__(self) -> Iterator[int]:
        starts, ends = self._spans()
        before = 0
        for s, e in zip(starts, ends):
            yield from range(s, s + e - before)
            before = e

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (list, tuple, LineNumbers)) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"LineNumbers({list(self)!r})"

    def __getstate__(self):
        return self._spans()

    def __setstate__(self, state) -> None:
        self._hunks = None
        self._starts, self._ends = state


_START, _RUN = itemgetter(0), itemgetter(1)


@dataclass
class Patch:
    """Added lines of one commit (or of the staged change when `commit` is None); `paths`: every
    new-side path the patch names (a renamed or emptied file adds no line but has a name).

    Kept as git printed them (`by_path`: path → its hunks in patch order, each (new-side start
    line as ASCII digits, added run: the "+" lines with their newlines)): a history holds a
    million hunks and millions of added lines, and one Python object or decode per line or per
    hunk cost more than scanning them. `texts` joins a path's runs; `added` builds the
    `AddedLine` list on demand."""

    commit: Commit | None
    by_path: dict[str, list[tuple[bytes, bytes]]] = field(default_factory=dict)
    paths: list[str] = field(default_factory=list)

    @property
    def added(self) -> list[AddedLine]:
        """One `AddedLine` per added line, in patch order."""
        out: list[AddedLine] = []
        for path, hunks in self.by_path.items():
            for start, run in hunks:
                if run:
                    n = int(start)
                    out += [AddedLine(path=path, line=n + i, text=_decode(t))
                            for i, t in enumerate(run[1:-1].split(b"\n+"))]
        return out

    def texts(self) -> Iterator[tuple[str, bytes, LineNumbers]]:
        """(path, its added lines joined by b"\n", their line numbers) per path with any: the
        bytes are exactly the decoded lines re-encoded (`_decode` is surrogateescape, a round
        trip). Each run is "+line\n+line\n…", so dropping the first "+", the last newline and
        every "\n+" leaves the lines joined by newlines."""
        for path, hunks in self.by_path.items():
            joined = b"".join(map(_RUN, hunks))
            if joined:
                yield path, joined[1:-1].replace(b"\n+", b"\n"), LineNumbers(hunks)


@dataclass(frozen=True)
class Unreadable:
    """An object `git log -p` could not read (a partial mirror, a promisor clone, a deleted loose
    object): the blob `sha`, the `commit` whose patch needed it and the `paths` naming it there.
    That commit's other files were scanned; these were not."""

    sha: str
    commit: str
    paths: tuple[str, ...]


def _decode(b: bytes) -> str:
    return b.decode("utf-8", errors="surrogateescape")


# -- parsers ------------------------------------------------------------------------------------
def _read_records(stream: IO[bytes], chunk_size: int = 1 << 16) -> Iterator[str]:
    """Split a byte stream on the record separator; yields decoded records (without it)."""
    buf = b""
    sep = _REC.encode()
    while True:
        chunk = stream.read(chunk_size)
        if not chunk:
            break
        buf += chunk
        parts = buf.split(sep)
        buf = parts.pop()
        for part in parts:
            if part:
                yield _decode(part)
    if buf:
        yield _decode(buf)


def _parse_log(records: Iterable[str]) -> Iterator[Commit]:
    for rec in records:
        fields = rec.split(_UNIT, 9)
        if len(fields) < 10:
            continue
        sha, parents, an, ae, ad, cd, cn, ce, msg, rest = fields
        yield Commit(
            sha=sha, parents=tuple(parents.split()), author_name=an, author_email=ae,
            author_date=ad, committer_date=cd, message=msg.rstrip("\n"),
            changes=tuple(_parse_name_status(rest)), committer_name=cn, committer_email=ce,
        )


def _parse_name_status(rest: str) -> Iterator[Change]:
    # With -z: "\0" after the format, then STATUS\0path\0 (or Rnnn\0old\0new\0) per change.
    tokens = [t for t in rest.split("\0")]
    i = 0
    while i < len(tokens):
        tok = tokens[i].strip("\n")
        i += 1
        if not tok:
            continue
        letter = tok[0]
        if letter in "RC":
            if i + 1 >= len(tokens) + 1:
                break
            old, new = tokens[i], tokens[i + 1]
            i += 2
            score = int(tok[1:]) if tok[1:].isdigit() else None
            yield Change(status=letter, path=new, old_path=old, similarity=score)
        elif letter in "AMDTUX":
            yield Change(status=letter, path=tokens[i])
            i += 1


# A hunk header's new-side start: the reference form, kept for the tests of `_HUNKS`.
_HUNK = re.compile(rb"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")
# Every `-U0` hunk of a region of one file's patch, for `findall`: group 1 the header's new-side
# start line, group 2 the added run ("+" prefixes and newlines kept). With -U0 a hunk is its
# header, the removed run, git's "\ No newline at end of file" marker and the added run (the
# marker after it is skipped by the search). A malformed header is skipped with its lines.
_HUNKS = re.compile(rb"(?m)^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@[^\n]*+\n(?:-[^\n]*+\n)*+(?:\\[^\n]*+\n)?"
                    rb"((?:\+[^\n]*+\n)*+)")


def _parse_patches(stream: IO[bytes], *, max_line_chars: int, with_header: bool,
                   chunk_size: int = 1 << 20) -> Iterator[Patch]:
    """Parse `git log -p -U0` / `git diff -U0` output into Patches of added lines.

    Works on blocks of whole lines that never end inside a file's hunks (`_iter_blocks`) and
    on a file's hunks at once: one `_HUNKS.findall` over them (in C) gives each hunk's start
    line and added run, kept as they are in `Patch.by_path` (no per-line, and no per-hunk,
    Python step: a history has a million hunks and millions of lines, issue 45). Header lines
    (the commit record, "+++ ", "rename to ") are dispatched one by one: a few per file."""
    current = Patch(commit=None)
    have_any = not with_header
    hunks: list[tuple[bytes, bytes]] | None = None   # the current path's hunks, or None
    message: list[bytes] | None = None       # the commit message being read (up to a NUL)
    rec, unit = _REC.encode()[0], _UNIT.encode()
    plus, at, r_, c_ = ord("+"), ord("@"), ord("r"), ord("c")
    findall = _HUNKS.findall
    for buf in _iter_blocks(stream, max_line_chars, chunk_size):
        pos, end = 0, len(buf)
        next_diff = next_rec = -1             # where the next file / commit starts (cached finds)
        if message is not None:              # the message goes on up to its NUL
            nul = buf.find(b"\0")
            if nul < 0:
                message.append(buf)
                continue
            message.append(buf[:nul])
            current.commit = _with_message(current.commit, message)
            message = None
            pos = buf.find(b"\n", nul) + 1 or end   # the rest of the NUL's line is git's
        while pos < end:
            head = buf[pos]
            if head == at:                   # this file's hunks, up to the next file or commit
                if next_diff < pos:
                    next_diff = buf.find(b"\ndiff --git ", pos) + 1 or end
                if next_rec < pos:
                    next_rec = _next_record(buf, pos) if with_header else end
                stop = min(next_diff, next_rec)
                if hunks is not None:
                    hunks += findall(buf, pos, stop)
                pos = stop
                continue
            nl = buf.find(b"\n", pos) + 1 or end
            if head == plus:
                if buf.startswith(b"+++ ", pos):
                    target = buf[pos + 4:nl].rstrip(b"\n").rstrip(b"\t")  # git appends a TAB after names with spaces
                    if target == b"/dev/null":
                        hunks = None
                    else:
                        path = _decode(_unquote(target)[2:])
                        current.paths.append(path)
                        hunks = current.by_path.setdefault(path, [])
            elif head == rec and with_header:
                if have_any:
                    yield current
                f = buf[pos + 1:nl].split(unit, 6)
                current = Patch(commit=Commit(
                    sha=_decode(f[0]), parents=tuple(_decode(f[1]).split()), author_name=_decode(f[2]),
                    author_email=_decode(f[3]), author_date=_decode(f[4]), committer_date=_decode(f[5]),
                    message="",
                ))
                have_any = True
                hunks = None
                if len(f) > 6:                 # `%B` then NUL (`_PATCH_FORMAT`); older formats have none
                    body, nul, _ = f[6].partition(b"\0")
                    message = [body]
                    if not nul:                # the message goes on past this line
                        m_end = buf.find(b"\0", nl)
                        if m_end < 0:
                            message.append(buf[nl:])
                            break
                        message.append(buf[nl:m_end])
                        nl = buf.find(b"\n", m_end) + 1 or end
                    current.commit = _with_message(current.commit, message)
                    message = None
            elif (head == r_ or head == c_) and buf.startswith((b"rename to ", b"copy to "), pos):
                current.paths.append(_decode(_unquote(buf[pos:nl].rstrip(b"\n").split(b" to ", 1)[1])))
            pos = nl
    if have_any:
        yield current


def _next_record(buf: bytes, pos: int) -> int:
    """Where the first commit record line at or after `pos` starts (`len(buf)` if none): a
    one-byte `find` (memchr) for the separator, which a file's bytes may hold mid-line too."""
    sep = _REC.encode()
    r = buf.find(sep, pos)
    while r > 0 and buf[r - 1] != 10:        # not at a line start: content, look further
        r = buf.find(sep, r + 1)
    return r if r >= 0 else len(buf)


def _with_message(commit: Commit | None, pieces: list[bytes]) -> Commit | None:
    """`commit` with its message: `pieces` are consecutive bytes of it (newlines included)."""
    if commit is None:
        return None
    import dataclasses
    return dataclasses.replace(commit, message=_decode(b"".join(pieces)).rstrip("\n"))


def _unquote(b: bytes) -> bytes:
    """Undo git's C-style quoting of unusual paths ("b/caf\\303\\251.py")."""
    if not (b.startswith(b'"') and b.endswith(b'"')):
        return b
    body = b[1:-1]
    out = bytearray()
    i = 0
    esc = {b"n": b"\n", b"t": b"\t", b'"': b'"', b"\\": b"\\", b"a": b"\a", b"b": b"\b",
           b"f": b"\f", b"r": b"\r", b"v": b"\v"}
    while i < len(body):
        c = body[i:i + 1]
        if c == b"\\" and i + 1 < len(body):
            nxt = body[i + 1:i + 2]
            if nxt.isdigit() and i + 3 < len(body) + 1:
                out.append(int(body[i + 1:i + 4], 8))
                i += 4
                continue
            out += esc.get(nxt, nxt)
            i += 2
            continue
        out += c
        i += 1
    return bytes(out)


def _iter_chunks(stream: IO[bytes], max_line_chars: int, chunk_size: int = 1 << 16) -> Iterator[bytes]:
    """The stream in chunks of whole lines (each chunk ends with b"\\n", except a last line
    without one), split on b"\\n" only (never splitlines: a CR or a form feed is part of a
    line). A line longer than `max_line_chars` bytes is cut to its head (and its newline); the
    rest is skipped as it arrives, so memory stays bounded by the chunk and the cut."""
    read = getattr(stream, "read1", stream.read)
    buf = b""                           # an incomplete last line, carried to the next read
    skipping = False                    # inside an over-long line whose head was yielded
    cut = _long_lines(max_line_chars)
    while True:
        chunk = read(chunk_size)
        if not chunk:
            break
        if skipping:
            i = chunk.find(b"\n")
            if i < 0:
                continue
            chunk, skipping = chunk[i + 1:], False
        data = buf + chunk if buf else chunk
        nl = data.rfind(b"\n") + 1
        body, buf = data[:nl], data[nl:]
        if len(data) > max_line_chars and _may_hold_long_line(body, max_line_chars):
            body = cut.sub(rb"\1", body)
            if len(buf) > max_line_chars:
                body += buf[:max_line_chars] + b"\n"
                buf, skipping = b"", True
        if body:
            yield body
    if buf:
        yield buf


def _iter_blocks(stream: IO[bytes], max_line_chars: int, chunk_size: int = 1 << 16) -> Iterator[bytes]:
    """`_iter_chunks` regrouped so that a block never ends inside a file's hunks: each ends
    before a line starting "@", "d" (`diff --git`) or the commit record, or at the end. A file's
    hunks longer than a read are carried, in pieces, to the next one (linear, however long)."""
    pending: list[bytes] = []
    for chunk in _iter_chunks(stream, max_line_chars, chunk_size):
        # the last hunk header is usually near the end; the other marks are searched only without one
        cut = (chunk.rfind(b"\n@") + 1 or chunk.rfind(b"\nd") + 1 or chunk.rfind(b"\n" + _REC.encode()) + 1)
        if cut <= 0:
            pending.append(chunk)
            continue
        if pending:
            pending.append(chunk[:cut])
            yield b"".join(pending)
            pending = []
        else:
            yield chunk[:cut]
        if cut < len(chunk):
            pending.append(chunk[cut:])
    if pending:
        yield b"".join(pending)


def _may_hold_long_line(data: bytes, max_line_chars: int) -> bool:
    """False when no line of `data` is longer than `max_line_chars`: every window of half that
    length holds a newline (a longer line would cover one such window whole). A few `find`s per
    megabyte instead of a regex pass over every byte."""
    half = max(1, max_line_chars // 2)
    find = data.find
    return any(find(b"\n", w, w + half) < 0 for w in range(0, len(data) - half + 1, half))


@functools.lru_cache(maxsize=8)
def _long_lines(max_line_chars: int) -> re.Pattern[bytes]:
    """A line of more than `max_line_chars` bytes: group 1 its head of that many bytes."""
    return re.compile(rb"(?m)^([^\n]{%d})[^\n]+" % max_line_chars)   # ^: one try per line
