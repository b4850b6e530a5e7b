"""Baselines: fingerprints survive line moves, rebases and squash merges; stale entries are
reported; the baseline file never contains a secret."""
from __future__ import annotations

import json

from repoguard.cli import main
from conftest import git

GH = "ghp_" + "a0B1c2D3e4F5g6H7i8J9k0L1m2N3o4P5q6R7"   # fake, format-valid
SL = "xoxb-" + "739218465093-5820147396281-" + "a0B1c2D3e4F5g6H7i8J9k0L1"


def scan(capsys, *args):
    rc = main(["scan", "--jobs", "1", "--format", "json", *args])
    out, err = capsys.readouterr()
    assert GH not in out + err and SL not in out + err
    return rc, json.loads(out) if out else None, err


def test_update_then_suppress_then_line_move(make_repo, capsys, tmp_path):
    repo = make_repo({"app.py": f"import os\nTOKEN = '{GH}'\n"})
    base = tmp_path / "baseline.json"
    rc, _, err = scan(capsys, str(repo), "--baseline", str(base), "--update-baseline")
    assert rc == 0 and "wrote 1 baseline entries" in err
    text = base.read_text()
    assert GH not in text and GH[4:] not in text
    entry = json.loads(text)["entries"][0]
    assert entry["rule_id"] == "github-pat" and entry["path"] == "app.py"
    rc, doc, _ = scan(capsys, str(repo), "--baseline", str(base))
    assert rc == 0 and doc["findings"] == [] and doc["stats"]["baselined"] == 1
    # Move the line down 40 lines: still suppressed (no line in the fingerprint).
    (repo / "app.py").write_text("import os\n" + "x = 1\n" * 40 + f"TOKEN = '{GH}'\n")
    git(repo, "commit", "-qam", "move")
    rc, doc, _ = scan(capsys, str(repo), "--baseline", str(base))
    assert rc == 0 and doc["stats"]["baselined"] == 1
    # A new secret fails the scan, and only it is reported.
    (repo / "b.py").write_text(f"S = '{SL}'\n")
    git(repo, "add", "b.py")
    git(repo, "commit", "-qm", "new")
    rc, doc, _ = scan(capsys, str(repo), "--baseline", str(base))
    assert rc == 1 and [f["rule_id"] for f in doc["findings"]] == ["slack-bot-token"]


def test_stale_entries_are_reported(make_repo, capsys, tmp_path):
    repo = make_repo({"app.py": f"TOKEN = '{GH}'\n", "b.py": f"S = '{SL}'\n"})
    base = tmp_path / "baseline.json"
    scan(capsys, str(repo), "--baseline", str(base), "--update-baseline")
    (repo / "app.py").write_text("TOKEN = os.environ['TOKEN']\n")
    git(repo, "commit", "-qam", "rotate")
    rc, doc, err = scan(capsys, str(repo), "--baseline", str(base))
    assert rc == 0
    assert [e["rule_id"] for e in doc["stats"]["stale_baseline"]] == ["github-pat"]
    assert "stale baseline entry github-pat in app.py" in err


def test_history_baseline_survives_squash_merge_and_rebase(make_repo, capsys, tmp_path):
    repo = make_repo({"README.md": "hello\n"}, message="root")
    git(repo, "checkout", "-qb", "feature")
    (repo / "cfg.py").write_text(f"TOKEN = '{GH}'\n")
    git(repo, "add", "cfg.py")
    git(repo, "commit", "-qm", "wip 1")
    (repo / "cfg.py").write_text(f"# settings\nTOKEN = '{GH}'\nDEBUG = False\n")
    git(repo, "commit", "-qam", "wip 2")
    base = tmp_path / "baseline.json"
    rc, _, _ = scan(capsys, "--history", str(repo), "--baseline", str(base), "--update-baseline")
    assert rc == 0
    git(repo, "checkout", "-q", "main")
    (repo / "README.md").write_text("hello\nworld\n")
    git(repo, "commit", "-qam", "main moves on")
    # Rebase a copy of the feature branch onto main: rewritten commits, same fingerprint.
    git(repo, "checkout", "-qb", "rebased", "feature")
    git(repo, "rebase", "-q", "main")
    rc, doc, _ = scan(capsys, "--history", str(repo), "--baseline", str(base))
    assert rc == 0 and doc["findings"] == [] and doc["stats"]["baselined"] == 1
    # Squash-merge the feature branch into main: one new commit, the secret on line 2.
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "--squash", "feature")
    git(repo, "commit", "-qm", "feature (squashed)")
    rc, doc, _ = scan(capsys, "--history", str(repo), "--baseline", str(base))
    assert rc == 0 and doc["stats"]["baselined"] == 1 and doc["findings"] == []
    rc, doc, _ = scan(capsys, "--history", str(repo))
    assert rc == 1 and doc["findings"][0]["line"] == 2


def test_same_secret_in_another_file_is_new(make_repo, capsys, tmp_path):
    repo = make_repo({"a.py": f"T = '{GH}'\n"})
    base = tmp_path / "baseline.json"
    scan(capsys, str(repo), "--baseline", str(base), "--update-baseline")
    (repo / "copy.py").write_text(f"T = '{GH}'\n")
    git(repo, "add", "copy.py")
    git(repo, "commit", "-qm", "copy")
    rc, doc, _ = scan(capsys, str(repo), "--baseline", str(base))
    assert rc == 1 and [f["path"] for f in doc["findings"]] == ["copy.py"]


def test_update_baseline_requires_a_file(make_repo, capsys):
    repo = make_repo({"a.py": "x = 1\n"})
    rc = main(["scan", str(repo), "--update-baseline"])
    assert rc == 2 and "--update-baseline needs --baseline" in capsys.readouterr().err


def test_updating_the_baseline_for_some_files_keeps_the_others(make_repo, capsys, tmp_path, monkeypatch):
    """Issue 41 item 15: `scan --write-baseline FILE` (a hook's or a developer's partial run)
    updates FILE's entries and keeps every other file's, instead of rewriting the baseline
    with FILE's findings alone."""
    repo = make_repo({"app.py": f"TOKEN = '{GH}'\n", "b.py": f"S = '{SL}'\n"})
    base = tmp_path / "baseline.json"
    scan(capsys, str(repo), "--baseline", str(base), "--update-baseline")
    (repo / "app.py").write_text("TOKEN = os.environ['TOKEN']\n")
    monkeypatch.chdir(repo)
    rc = main(["scan", "--jobs", "1", "app.py", "--baseline", str(base), "--write-baseline"])
    assert rc == 0 and "wrote 1 baseline entries" in capsys.readouterr().err
    assert [e["path"] for e in json.loads(base.read_text())["entries"]] == ["b.py"]
    rc, doc, _ = scan(capsys, str(repo), "--baseline", str(base))
    assert rc == 0 and doc["stats"]["baselined"] == 1
