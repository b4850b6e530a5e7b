"""`scan --history` on a repository missing an object (issue 41 item 14): a partial mirror or a
promisor clone made `git log -p` die (`fatal: unable to read …`, exit 2). The unreadable blob is
skipped with a warning naming it, everything else is scanned, and the summary says so; a revision
range limits the walk. The repositories are real: a loose object is deleted from `.git/objects`."""
from __future__ import annotations

import json
import random

from conftest import git
from fake_values import random_key

from repoguard.cli import main
from repoguard.source.gitrepo import GitRepo


def _keys(n: int) -> list[str]:
    rng = random.Random(1441)
    return ["ghp_" + random_key(rng, 36) for _ in range(n)]


def _broken_repo(make_repo) -> tuple:
    """Four commits; the blob of `big.py` written by the second is deleted. Credentials: one in
    the first commit, one in another file of the second (the broken one), one in the third
    commit's message, one in the fourth."""
    k = _keys(4)
    repo = make_repo({"a.py": f"A = '{k[0]}'\n"}, message="first")
    for name, content, msg in (("second", {"big.py": "lost = 1\n" * 3, "b.py": f"B = '{k[1]}'\n"}, "second"),
                               ("third", {"big.py": "kept = 2\n"}, f"third\n\ntoken {k[2]}"),
                               ("fourth", {"d.py": f"D = '{k[3]}'\n"}, "fourth")):
        for p, text in content.items():
            (repo / p).write_text(text)
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", msg)
    second = git(repo, "rev-parse", "HEAD~2").strip()
    lost = git(repo, "rev-parse", "HEAD~2:big.py").strip()
    (repo / ".git" / "objects" / lost[:2] / lost[2:]).unlink()
    return repo, k, second, lost


def test_history_skips_an_unreadable_blob_and_scans_the_rest(make_repo, capsys, caplog):
    repo, k, second, lost = _broken_repo(make_repo)
    assert not (repo / ".git" / "objects" / lost[:2] / lost[2:]).exists()   # really gone (loose)
    rc = main(["scan", str(repo), "--history", "--jobs", "1", "--format", "json"])
    out, err = capsys.readouterr()
    for key in k:
        assert key not in out + err
    assert rc == 1, err
    doc = json.loads(out)
    got = sorted((f["path"], f["commit"]) for f in doc["findings"])
    head = git(repo, "rev-parse", "HEAD").strip()
    assert [p for p, _ in got] == ["(commit message)", "a.py", "b.py", "d.py"]
    assert dict(got)["b.py"] == second and dict(got)["d.py"] == head
    assert doc["stats"]["commits"] == 4
    third = git(repo, "rev-parse", "HEAD~1").strip()      # its patch reads the lost blob as the old side
    assert doc["stats"]["unreadable"] == [{"object": lost, "commit": c, "paths": ["big.py"]} for c in (third, second)]
    assert f"skipped unreadable object {lost} (big.py in commits {third[:12]}, {second[:12]})" in caplog.text
    assert "1 object(s) git could not read were skipped" in err
    # text output: the same note closes the report
    rc = main(["scan", str(repo), "--history", "--jobs", "1"])
    out, err = capsys.readouterr()
    assert rc == 1 and f"note: 1 object(s) git could not read were skipped: {lost[:12]} (big.py in commits " in out


def test_unreadable_blob_without_recovery_is_one_line_error(make_repo):
    """The library call without a list for unreadable objects keeps the old contract: one
    InputError line naming the repository."""
    import pytest

    from repoguard.core.errors import InputError

    repo, *_ = _broken_repo(make_repo)
    with pytest.raises(InputError, match="unable to read") as exc:
        list(GitRepo(repo).iter_patches())
    assert "\n" not in str(exc.value)


def test_history_range_and_since(make_repo, capsys):
    """`--range A..B` and `--since A` scan only the commits after A (the third reads the lost
    blob as its old side: still skipped there)."""
    repo, k, second, _ = _broken_repo(make_repo)
    third = git(repo, "rev-parse", "HEAD~1").strip()
    for flags in (["--range", f"{second}..HEAD"], ["--since", second]):
        rc = main(["scan", str(repo), "--jobs", "1", "--format", "json", *flags])
        out, err = capsys.readouterr()
        doc = json.loads(out)
        assert rc == 1 and doc["stats"]["commits"] == 2, flags
        assert [u["commit"] for u in doc["stats"]["unreadable"]] == [third]
        assert sorted(f["path"] for f in doc["findings"]) == ["(commit message)", "d.py"]
    rc = main(["scan", str(repo), "--range", "no-such-rev..HEAD"])
    _, err = capsys.readouterr()
    assert rc == 2 and err.count("\n") == 1 and "no-such-rev" in err
    rc = main(["scan", str(repo), "--range", "HEAD~1..HEAD", "--staged"])
    _, err = capsys.readouterr()
    assert rc == 2 and "--range" in err


def test_added_line_reading_like_a_file_header_stays_an_added_line(make_repo):
    """`++ x` added to a file is `+++ x` in the patch: it is an added line of that file (and the
    lines after it too), not the header of a file `x`."""
    repo = make_repo({"c.c": "int i;\n"})
    (repo / "c.c").write_text("int i;\n++ b/fake\nsecond\n")
    git(repo, "commit", "-qam", "inc")
    patch = next(GitRepo(repo).iter_patches())
    assert [(a.path, a.line, a.text) for a in patch.added] == [("c.c", 2, "++ b/fake"), ("c.c", 3, "second")]
    assert patch.paths == ["c.c"] and patch.commit.message == "inc"
