"""Parsing git's output streams: `git log` records (commits and their name-status changes) and
`git log -p` / `git diff` patches (added lines, the paths a patch names, commit messages).

Pure functions over byte streams, with no subprocess of their own (`source.gitrepo` runs git).
Output is split on NUL / `\\n` only, never `splitlines()` (which also splits on \\x0b, \\x1c,
U+2028 … inside paths and messages). The history's patch loop runs once per line of the whole
history, so it works on raw bytes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
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


@dataclass
class Patch:
    """Added lines of one commit (or of the staged change when `commit` is None); `paths`: every
    new-side path the patch names (a renamed or emptied file adds no line but has a name).

    Kept as the raw bytes of each path's added lines (`by_path`: path → (line numbers, lines
    without newline), in patch order): a history holds millions of added lines, and one object
    and one decode per line cost more than scanning them. `added` builds the `AddedLine` list on
    demand."""

    commit: Commit | None
    by_path: dict[str, tuple[list[int], list[bytes]]] = field(default_factory=dict)
    paths: list[str] = field(default_factory=list)

    @property
    def added(self) -> list[AddedLine]:
        """Every added line as an `AddedLine`, built on demand (path by path, in patch order)."""
        return [AddedLine(path=path, line=n, text=_decode(t))
                for path, (nums, texts) in self.by_path.items() for n, t in zip(nums, texts)]

    def texts(self) -> Iterator[tuple[str, bytes, list[int]]]:
        """(path, its added lines joined by b"\n", their line numbers) per path: the bytes are
        exactly the decoded lines re-encoded (`_decode` is surrogateescape, a round trip)."""
        for path, (nums, texts) in self.by_path.items():
            if nums:
                yield path, b"\n".join(texts), nums


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


_HUNK = re.compile(rb"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


def _hunk_range(raw: bytes) -> tuple[int, int]:
    """(new-side start line, number of new-side lines) of a hunk header "@@ -a[,b] +c[,d] @@…"
    ((0, 0) if malformed; d defaults to 1): `_HUNK` by hand for the usual form, as a history has
    a million hunks; the regex decides the rest."""
    parts = raw.split(b" ", 4)
    if len(parts) >= 4 and parts[0] == b"@@" and parts[3] == b"@@" and parts[1][:1] == b"-" \
            and parts[2][:1] == b"+":
        old, old_comma, old_n = parts[1][1:].partition(b",")
        new, comma, new_n = parts[2][1:].partition(b",")
        if old.isdigit() and new.isdigit() and (not old_n or old_n.isdigit()) \
                and (not comma or new_n.isdigit()) and (not old_comma or old_n):
            return int(new), int(new_n) if comma else 1
    m = _HUNK.match(raw)
    return (int(m.group(1)), 1 if m.group(2) is None else int(m.group(2))) if m else (0, 0)


def _hunk_start(raw: bytes) -> int:
    """The new-side start line of a hunk header (see `_hunk_range`)."""
    return _hunk_range(raw)[0]


def _parse_patches(stream: IO[bytes], *, max_line_chars: int, with_header: bool) -> Iterator[Patch]:
    """Parse `git log -p -U0` / `git diff -U0` output into Patches of added lines.

    The loop runs once per line of the whole history, so it works on raw bytes and dispatches
    on the first byte: "+" (added line, or the "+++ " new-path header), "-" (removed line or
    "--- " header: nothing to keep), then the rarer headers; lines are kept as bytes in
    `Patch.by_path` (no per-line object or decode)."""
    current = Patch(commit=None)
    have_any = not with_header
    nums: list[int] | None = None            # the current path's line numbers and lines, or None
    texts: list[bytes] = []
    lineno = 0
    rec, unit = _REC.encode(), _UNIT.encode()
    message: list[bytes] | None = None        # lines of the commit message being read (up to a NUL)
    left = 0                                  # added lines still to come in the current hunk
    plus, minus = b"+", b"-"
    for block in _iter_line_blocks(stream, max_line_chars):
        for raw in block:
            if message is not None:
                body, nul, _ = raw.partition(b"\0")
                message.append(body)
                if nul:
                    current.commit = _with_message(current.commit, message)
                    message = None
                continue
            head = raw[:1]
            if head == plus:
                if left > 0:
                    # an added line, even one reading `++ x` (`+++ x` in the patch): the hunk
                    # header said how many follow, so it is not taken for the next file's header
                    if nums is not None and lineno:
                        nums.append(lineno)
                        texts.append(raw[1:])
                        lineno += 1
                    left -= 1
                elif raw.startswith(b"+++ "):
                    target = raw[4:].rstrip(b"\t")  # git appends a TAB after names with spaces
                    if target == b"/dev/null":
                        nums = None
                    else:
                        path = _decode(_unquote(target)[2:])
                        current.paths.append(path)
                        nums, texts = current.by_path.setdefault(path, ([], []))
                continue
            if head == minus:
                continue
            if with_header and raw.startswith(rec):
                if have_any:
                    yield current
                f = raw[1:].split(unit, 6)
                current = Patch(commit=Commit(
                    sha=_decode(f[0]), parents=tuple(_decode(f[1]).split()), author_name=_decode(f[2]),
                    author_email=_decode(f[3]), author_date=_decode(f[4]), committer_date=_decode(f[5]),
                    message="",
                ))
                if len(f) > 6:                 # `%B` then NUL (`_PATCH_FORMAT`); older formats have none
                    body, nul, _ = f[6].partition(b"\0")
                    message = [body]
                    if nul:
                        current.commit = _with_message(current.commit, message)
                        message = None
                have_any = True
                nums = None
                left = 0
                continue
            if raw.startswith(b"@@"):
                lineno, left = _hunk_range(raw)
                continue
            if raw.startswith((b"rename to ", b"copy to ")):
                current.paths.append(_decode(_unquote(raw.split(b" to ", 1)[1])))
    if have_any:
        yield current


def _with_message(commit: Commit | None, lines: list[bytes]) -> Commit | None:
    if commit is None:
        return None
    import dataclasses
    return dataclasses.replace(commit, message=_decode(b"\n".join(lines)).rstrip("\n"))


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


def _iter_lines(stream: IO[bytes], max_line_chars: int) -> Iterator[bytes]:
    """Lines split on b"\\n" only, each cut to `max_line_chars` bytes without buffering the rest."""
    for block in _iter_line_blocks(stream, max_line_chars):
        yield from block


def _iter_line_blocks(stream: IO[bytes], max_line_chars: int, chunk_size: int = 1 << 16) -> Iterator[list[bytes]]:
    """`_iter_lines` a chunk at a time: the lines completed by each read of up to `chunk_size`
    bytes, split on b"\\n" only (never splitlines: a CR or a form feed is part of a line).
    A line is cut to `max_line_chars` bytes; the rest of an over-long line is skipped as it
    arrives, so memory stays bounded by the chunk and the cut. One readline per line cost more
    than the scan of a history (issue 45)."""
    read = getattr(stream, "read1", stream.read)
    buf = b""
    skipping = False                    # inside an over-long line whose head was yielded
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
        parts = data.split(b"\n")
        buf = parts.pop()
        if len(buf) > max_line_chars:
            parts.append(buf)
            buf, skipping = b"", True
        if len(data) <= max_line_chars:
            yield parts                  # no line can be longer than what was read (the usual case)
        else:
            yield [ln if len(ln) <= max_line_chars else ln[:max_line_chars] for ln in parts]
    if buf:
        yield [buf]
