"""The git layer against git itself: history, renames, merges, staging, odd paths, broken repos."""
from __future__ import annotations

import subprocess

import pytest
from conftest import git

from repoguard.core.errors import InputError
from repoguard.source.gitrepo import GitRepo, PlainDir, git_blob_sha, open_repo


def _git_log_reference(repo, *extra):
    """Independent reference: one `git show` per commit (slow, simple)."""
    shas = git(repo, "rev-list", "--no-merges", "HEAD").split()
    ref = {}
    for sha in shas:
        out = git(repo, "show", "--name-status", "-M", "--format=%an%x00%ae%x00%aI%x00%P", sha, *extra)
        head, _, body = out.partition("\n")
        an, ae, ad, parents = head.split("\0")
        changes = []
        for line in body.split("\n"):
            if not line.strip():
                continue
            parts = line.split("\t")
            status = parts[0][0]
            if status in "RC":
                changes.append((status, parts[2], parts[1]))
            else:
                changes.append((status, parts[1], None))
        ref[sha] = (an, ae, ad, tuple(parents.split()), sorted(changes, key=str))
    return shas, ref


def test_history_reader_agrees_with_git_log_on_fixture(fixture_repo):
    repo = GitRepo(fixture_repo)
    commits = list(repo.iter_commits())
    shas, ref = _git_log_reference(fixture_repo)
    assert [c.sha for c in commits] == shas  # same commits, same (newest-first) order
    renames = 0
    for c in commits:
        an, ae, ad, parents, changes = ref[c.sha]
        assert (c.author_name, c.author_email, c.author_date, c.parents) == (an, ae, ad, parents)
        got = sorted(((ch.status, ch.path, ch.old_path) for ch in c.changes), key=str)
        assert got == changes, c.sha
        renames += sum(ch.status == "R" for ch in c.changes)
    assert renames >= 1, "the fixture has a rename in its history"
    # Messages round-trip exactly (multi-line bodies included).
    for c in commits[:10]:
        assert c.message == git(fixture_repo, "log", "-1", "--format=%B", c.sha).rstrip("\n")


def test_merges_are_listed_on_request(fixture_repo):
    repo = GitRepo(fixture_repo)
    merges = [c for c in repo.iter_commits(merges="first-parent") if c.is_merge]
    expected = git(fixture_repo, "rev-list", "--merges", "HEAD").split()
    assert [c.sha for c in merges] == expected and expected, "the fixture has a merge commit"
    # Against its first parent a merge shows what the branch brought in.
    m = merges[0]
    ref = git(fixture_repo, "diff", "--name-only", "-M", f"{m.parents[0]}", m.sha).split("\n")
    assert sorted(m.paths) == sorted(p for p in ref if p)


def test_tracked_files_match_ls_files_with_blob_shas(fixture_repo):
    repo = GitRepo(fixture_repo)
    files = repo.tracked_files()
    ref = git(fixture_repo, "ls-files").split("\n")
    assert [f.path for f in files] == sorted(p for p in ref if p)
    for f in files[:25]:
        if not f.is_symlink:
            assert git_blob_sha((fixture_repo / f.path).read_bytes()) == f.blob_sha


def test_odd_paths_renames_and_staged_changes(make_repo):
    repo_dir = make_repo({"a b/é.py": "x = 1\n", "tab\tname.txt": "t\n", "nl.txt": "one\x0btwo\u2028three\n"})
    git(repo_dir, "mv", "a b/é.py", "a b/ü.py")
    git(repo_dir, "commit", "-q", "-m", "rename\n\nwith a body\x0bline")
    (repo_dir / "new.py").write_text("token = 'abc'\nsecond = 2\n")
    git(repo_dir, "add", "new.py")
    repo = GitRepo(repo_dir)
    first, second = list(repo.iter_commits())
    assert first.changes[0].status == "R" and first.changes[0].path == "a b/ü.py"
    assert first.changes[0].old_path == "a b/é.py"
    assert first.message == "rename\n\nwith a body\x0bline"
    assert {c.path for c in second.changes} == {"a b/é.py", "tab\tname.txt", "nl.txt"}
    assert [f.path for f in repo.staged_files()] == ["new.py"]
    added = repo.staged_patch().added
    assert [(a.path, a.line, a.text) for a in added] == [("new.py", 1, "token = 'abc'"), ("new.py", 2, "second = 2")]
    patches = list(repo.iter_patches())
    assert patches[0].added == []  # a pure rename adds no lines
    assert {a.path for a in patches[1].added} == {"a b/é.py", "tab\tname.txt", "nl.txt"}


def test_unborn_head_and_first_commit_staging(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "f.py").write_text("a\n")
    git(tmp_path, "add", "f.py")
    repo = GitRepo(tmp_path)
    assert repo.head is None and list(repo.iter_commits()) == []
    assert [f.path for f in repo.staged_files()] == ["f.py"]


def test_shallow_clone(fixture_repo, tmp_path):
    dest = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "3", f"file://{fixture_repo}", str(dest)], check=True)
    repo = GitRepo(dest)
    assert repo.is_shallow
    assert len(list(repo.iter_commits(merges="none"))) <= 4


def test_broken_and_missing_repos_give_one_line_errors(tmp_path):
    with pytest.raises(InputError, match="not a git repository"):
        GitRepo(tmp_path)
    with pytest.raises(InputError, match="no such directory"):
        GitRepo(tmp_path / "missing")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / ".git").mkdir()
    (broken / ".git" / "HEAD").write_text("garbage\n")
    with pytest.raises(InputError) as exc:
        GitRepo(broken)
    assert "\n" not in str(exc.value)
    # A plain directory is accepted only where a command allows it (`scan --no-git`, `scan FILE…`).
    assert isinstance(open_repo(tmp_path, allow_plain=True), PlainDir)


def test_huge_single_line_is_cut_while_streaming(make_repo):
    big = "k" * 300_000 + "\n"
    repo = GitRepo(make_repo({"big.txt": big}))
    (patch,) = list(repo.iter_patches(max_line_chars=1000))
    assert len(patch.added) == 1 and 900 < len(patch.added[0].text) <= 1000


def test_added_lines_come_back_as_the_committed_bytes(make_repo):
    """`Patch.texts()` (the history scan's input, issue 45) is each path's added lines joined by
    "\\n", byte for byte: invalid UTF-8, a CR and a form feed stay inside their line (lines are
    split on "\\n" only), and `added` decodes the same lines."""
    body = b"ok = 1\r\nbad = b'\xff\xfe'\x0cff\nlast\n"
    repo = GitRepo(make_repo({"odd.py": body}))
    (patch,) = list(repo.iter_patches())
    ((path, text, lines),) = list(patch.texts())
    assert path == "odd.py" and lines == [1, 2, 3]
    assert text == body.rstrip(b"\n")
    assert [a.text.encode("utf-8", "surrogateescape") for a in patch.added] == body.rstrip(b"\n").split(b"\n")


def test_chunks_cut_long_lines_across_reads():
    """Lines split across reads are joined; an over-long one is cut to its head and its rest
    skipped however many reads it spans; chunks hold whole lines only."""
    import io

    from repoguard.source.gitlog import _iter_chunks

    data = b"a\n" + b"x" * 50 + b"\nbb\n\n" + b"y" * 7 + b"\r\nz"
    for chunk in (1, 3, 8, 64):
        got = list(_iter_chunks(io.BytesIO(data), 10, chunk_size=chunk))
        assert all(c.endswith(b"\n") for c in got[:-1]), chunk
        assert b"".join(got).split(b"\n") == [b"a", b"x" * 10, b"bb", b"", b"y" * 7 + b"\r", b"z"], chunk


def test_hunk_headers_parse_like_the_reference_regex():
    """`_HUNKS` (all of a file's hunks in one `findall`) reads a header's new-side start as the
    reference `_HUNK` does, on the usual forms and on malformed ones (skipped with their lines)."""
    from repoguard.source.gitlog import _HUNK, _HUNKS

    cases = [b"@@ -1 +1 @@", b"@@ -0,0 +1,3 @@", b"@@ -10,2 +12 @@ def f():", b"@@ -1, +2 @@", b"@@ -a +2 @@",
             b"@@ -1 +2,x @@", b"@@@ -1 +2 @@", b"@@ -1 +2 @@@", b"@@ -1,2,3 +4 @@", b"@@ -1 +2", b"@@ -1 +22",
             b"@@ -1 +\xd9\xa3 @@", b"@@  -1 +2 @@", b"@@ -1 +2, @@", b"@@ -1 +-2 @@", b"@@ -+1 +2 @@"]
    for c in cases:
        m = _HUNK.match(c)
        got = _HUNKS.findall(c + b"\n+added\n")
        assert got == ([(m.group(1), b"+added\n")] if m else []), c
