"""The history's patch parser (`source.gitlog._parse_patches`, issue 45) against an independent
line-by-line reading of the same `git log -p -U0 --text` output, on a real repository built to
hold what a hunk-at-a-time parser could get wrong: commit messages with hunk headers, `+++ `
lines and diff headers in them; added lines that read `++ x` or `-- x`; files without a final
newline on either side; renames; spaces and non-ASCII in names; binary bytes (the record
separator, NUL, CR); an empty commit; and every split of the stream into reads."""
from __future__ import annotations

import io
import subprocess

from conftest import git

from repoguard.source.gitlog import _parse_patches
from repoguard.source.gitrepo import GitRepo, _patch_args


def _reference(raw: bytes, max_line_chars: int) -> list[tuple[str, list[str], dict[str, list[tuple[int, bytes]]]]]:
    """(sha, paths, path → [(line number, added line)]) per commit, one line at a time."""
    out: list = []
    msg = False
    left = lineno = 0
    path = None
    for ln in raw.split(b"\n"):
        ln = ln[:max_line_chars]
        if msg:
            msg = b"\0" not in ln
            continue
        if ln.startswith(b"\x1e"):
            out.append((ln[1:].split(b"\x1f")[0].decode(), [], {}))
            msg, path, left = b"\0" not in ln, None, 0
        elif left and ln.startswith(b"+"):
            if path is not None:
                out[-1][2].setdefault(path, []).append((lineno, ln[1:]))
            lineno += 1
            left -= 1
        elif ln.startswith(b"+++ "):
            t = ln[4:].rstrip(b"\t")
            path = None if t == b"/dev/null" else _name(t)[2:]
            if path is not None:
                out[-1][1].append(path)
        elif ln.startswith(b"@@ "):
            new = ln.split(b" ")[2][1:].split(b",")
            lineno, left = int(new[0]), int(new[1]) if len(new) > 1 else 1
        elif ln.startswith(b"rename to "):
            out[-1][1].append(_name(ln[10:]))
    return out


def _name(b: bytes) -> str:
    """A path as git prints it, quoted ("a/\\303\\274.txt") when unusual."""
    b = b[1:-1] if b.startswith(b'"') and b.endswith(b'"') else b
    return b.decode("unicode_escape").encode("latin-1").decode("utf-8", "surrogateescape") if b"\\" in b \
        else b.decode("utf-8", "surrogateescape")


def _parsed(raw: bytes, max_line_chars: int, chunk_size: int) -> list:
    got = []
    for p in _parse_patches(io.BytesIO(raw), max_line_chars=max_line_chars, with_header=True, chunk_size=chunk_size):
        lines = {path: list(zip(nums, text.split(b"\n"))) for path, text, nums in p.texts()}
        got.append((p.commit.sha, list(p.paths), lines))
        # `added` (the staged path's reader) agrees with `texts`
        assert [(a.path, a.line, a.text.encode("utf-8", "surrogateescape")) for a in p.added] == \
            [(path, n, t) for path, ls in lines.items() for n, t in ls]
    return got


def test_patch_parser_agrees_with_a_line_by_line_reading(make_repo):
    repo = make_repo({"a.py": "x = 1\ny = 2\n", "b c/ü.txt": "one\n"}, message="first\n\n@@ -1 +1 @@\n+++ b/fake.py\n")
    steps = [
        ({"a.py": "x = 1\n++ not a header\n-- not removed\n+++ b/nor.py\ny = 3"}, "no newline at the end\n\ndiff --git a/m b/m\n@@ -0,0 +1 @@\n+fake"),
        ({"a.py": "x = 2\n++ not a header\n", "bin.dat": b"\x00\x1ehead\x1f\n\x1e\r\nk = 'v'\n"}, "binary bytes, a final newline again"),
        ({"b c/ü.txt": "one\ntwo\n" * 40, "long.js": "v = '" + "k" * 1000 + "'\n"}, "@@ -1 +1 @@\n+++ b/x\n-- y"),
    ]
    for files, message in steps:
        for name, content in files.items():
            p = repo / name
            p.write_bytes(content) if isinstance(content, bytes) else p.write_text(content)
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", message)
    git(repo, "mv", "b c/ü.txt", "renamed ü.txt")
    (repo / "renamed ü.txt").write_text("one\ntwo\n" * 40 + "three\n")
    git(repo, "commit", "-qam", "rename with a change")
    git(repo, "commit", "-q", "--allow-empty", "-m", "empty")
    raw = subprocess.run(["git", *_patch_args(), "--no-merges", "HEAD"], cwd=repo, capture_output=True, check=True).stdout
    for max_line_chars in (100_000, 400):         # 400: the long line is cut, the headers are not
        ref = _reference(raw, max_line_chars)
        assert len(ref) == 6 and any(ref[i][2] for i in range(6))
        for chunk_size in (1, 2, 3, 7, 64, 1000, 1 << 20):
            assert _parsed(raw, max_line_chars, chunk_size) == ref, (max_line_chars, chunk_size)
    # and through git itself: the same as the reference, the message read whole
    patches = list(GitRepo(repo).iter_patches())
    assert [p.commit.sha for p in patches] == [r[0] for r in _reference(raw, 100_000)]
    assert patches[-1].commit.message == "first\n\n@@ -1 +1 @@\n+++ b/fake.py"
    added = {(a.path, a.text) for p in patches for a in p.added}
    assert ("a.py", "++ not a header") in added and ("a.py", "-- not removed") in added
    assert ("a.py", "+++ b/nor.py") in added and not any(a[0] in ("fake.py", "x", "nor.py") for a in added)
