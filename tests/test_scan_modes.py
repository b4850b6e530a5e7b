"""`repoguard scan` modes on real git repositories: working tree, --no-git, explicit files,
--staged, --history/--since, output formats, exit codes, and hostile files (binary, 100 MB single
line, non-UTF-8, symlinks out of the repository, FIFOs). Ends with the fixture monorepo."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from repoguard.cli import main
from conftest import git

GH = "ghp_" + "a0B1c2D3e4F5g6H7i8J9k0L1m2N3o4P5q6R7"   # fake, format-valid
SL = "xoxb-" + "739218465093-5820147396281-" + "a0B1c2D3e4F5g6H7i8J9k0L1"
PG = "postgresql://app:" + "Xk9-qzvpw7@db.internal/app"


def scan(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["scan", "--jobs", "1", *args])
    out, err = capsys.readouterr()
    for secret in (GH, SL, "Xk9-qzvpw7"):
        assert secret not in out and secret not in err, "a secret was printed"
    return rc, out, err


def scan_json(capsys, *args: str) -> tuple[int, dict]:
    rc, out, _ = scan(capsys, *args, "--format", "json")
    return rc, json.loads(out)


def test_working_tree_json_contract(make_repo, capsys):
    repo = make_repo({"app/settings.py": f'DB = "{PG}"\nTOKEN = "{GH}"\n', "app/clean.py": "x = 1\n",
                      "notify.py": f"SLACK = '{SL}'\n"})
    rc, doc = scan_json(capsys, str(repo))
    assert rc == 1
    got = sorted((f["path"], f["line"], f["rule_id"]) for f in doc["findings"])
    assert got == [("app/settings.py", 1, "database-connection-string-password"),
                   ("app/settings.py", 2, "github-pat"), ("notify.py", 1, "slack-bot-token")]
    keys = {"rule_id", "path", "line", "column", "fingerprint", "redacted", "entropy", "commit", "author", "date"}
    for f in doc["findings"]:
        assert keys <= set(f)
        assert f["redacted"].startswith("****(") and f["redacted"].endswith(" chars)")   # no value character
        assert f["commit"] is None
    assert doc["stats"]["files"] == 3 and doc["stats"]["findings"] == 3
    artefact = json.loads((repo / ".repoguard" / "scan" / "findings.json").read_text())
    assert len(artefact["findings"]) == 3


def test_clean_repo_exits_zero_and_text_format(make_repo, capsys):
    repo = make_repo({"a.py": "def f():\n    return 1\n"})
    rc, out, err = scan(capsys, str(repo))
    assert (rc, out) == (0, "")
    assert "0 new finding(s) in 1 files" in err
    repo2 = make_repo({"b.py": f"T = '{GH}'\n"}, path=repo.parent / "r2")
    rc, out, _ = scan(capsys, str(repo2))
    assert rc == 1 and out.startswith(f"b.py:1:6: github-pat: ****({len(GH)} chars)")


def test_subdirectory_paths_are_relative_to_it(make_repo, capsys):
    repo = make_repo({"svc/a/x.py": f"T = '{GH}'\n", "other/y.py": f"T = '{GH}'\n"})
    _, doc = scan_json(capsys, str(repo / "svc"))
    assert [f["path"] for f in doc["findings"]] == ["a/x.py"]


def test_only_tracked_files_unless_no_git(make_repo, capsys, tmp_path):
    repo = make_repo({"a.py": "x = 1\n"})
    (repo / "untracked.py").write_text(f"T = '{GH}'\n")
    rc, _ = scan_json(capsys, str(repo))
    assert rc == 0
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "conf.yaml").write_text("db:\n  password: Fake-S3cret-pw\n")
    (plain / "sub").mkdir()
    (plain / "sub" / "t.py").write_text(f"T = '{GH}'\n")
    rc, doc = scan_json(capsys, "--no-git", str(plain))
    assert rc == 1
    assert sorted((f["path"], f["rule_id"]) for f in doc["findings"]) == [
        ("conf.yaml", "password-in-config-file"), ("sub/t.py", "github-pat")]


def test_explicit_files_scan_exactly_those(make_repo, capsys, monkeypatch):
    repo = make_repo({"a.py": f"T = '{GH}'\n", "b.py": f"S = '{SL}'\n", "c.py": "x = 1\n"})
    monkeypatch.chdir(repo)
    rc, doc = scan_json(capsys, "b.py", "c.py")
    assert rc == 1 and [f["path"] for f in doc["findings"]] == ["b.py"]
    assert doc["stats"]["files"] == 2
    assert not (repo / ".repoguard").exists()  # file mode (pre-commit) writes nothing into the repo


def test_staged_scans_only_the_staged_change(make_repo, capsys, monkeypatch):
    repo = make_repo({"a.py": f"OLD = '{GH}'\n"})
    (repo / "a.py").write_text(f"OLD = '{GH}'\nNEW = '{SL}'\n")
    (repo / "b.py").write_text(f"DB = '{PG}'\n")
    (repo / "cert.p12").write_bytes(b"\x30\x82\x00\x00binary")
    git(repo, "add", "a.py", "cert.p12")
    rc, doc = scan_json(capsys, "--staged", str(repo))
    assert rc == 1
    got = sorted((f["path"], f["line"], f["rule_id"]) for f in doc["findings"])
    # The committed OLD token is not re-reported; unstaged b.py is not scanned.
    assert got == [("a.py", 2, "slack-bot-token"), ("cert.p12", 1, "pkcs12-file")]


def test_history_reports_introducing_commit_and_presence_at_head(make_repo, capsys):
    repo = make_repo({"a.py": "x = 1\n"}, message="start")
    base = git(repo, "rev-parse", "HEAD").strip()
    make_repo({"deploy.sh": f"export TOKEN={GH}\n", "b.py": f"S = '{SL}'\n"}, message="add creds", path=repo)
    intro = git(repo, "rev-parse", "HEAD").strip()
    (repo / "deploy.sh").write_text("export TOKEN=$TOKEN\n")
    (repo / "b.py").write_text(f"# moved\n\nS = '{SL}'\n")
    git(repo, "commit", "-qam", "remove token, move slack line")
    rc, doc = scan_json(capsys, "--history", str(repo))
    assert rc == 1
    by_rule = {f["rule_id"]: f for f in doc["findings"]}
    assert sorted(by_rule) == ["github-pat", "slack-bot-token"]  # each secret once
    gh = by_rule["github-pat"]
    assert (gh["commit"], gh["path"], gh["line"], gh["present_at_head"]) == (intro, "deploy.sh", 1, False)
    assert gh["author"] == "Test <test@example.com>" and gh["date"].startswith("20")
    assert by_rule["slack-bot-token"]["present_at_head"] is True
    assert by_rule["slack-bot-token"]["commit"] == intro
    assert doc["stats"]["commits"] == 3
    rc, doc = scan_json(capsys, "--since", intro, str(repo))
    assert rc == 0 and doc["findings"] == [] and doc["stats"]["commits"] == 1
    rc, doc = scan_json(capsys, "--since", base, str(repo))
    assert len(doc["findings"]) == 2


def test_sarif_is_code_scanning_shaped(make_repo, capsys, tmp_path):
    repo = make_repo({"a.py": f"T = '{GH}'\nDB = '{PG}'\n"})
    out = tmp_path / "out" / "r.sarif"
    rc, stdout, _ = scan(capsys, str(repo), "--format", "sarif", "--output", str(out))
    assert rc == 1 and stdout == ""
    doc = json.loads(out.read_text())
    assert doc["version"] == "2.1.0" and "sarif" in doc["$schema"]
    (run,) = doc["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert run["tool"]["driver"]["name"] == "repoguard"
    assert all(r["id"] and r["shortDescription"]["text"] for r in rules)
    assert len(run["results"]) == 2
    for res in run["results"]:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
        loc = res["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uri"] == "a.py"
        assert loc["region"]["startLine"] >= 1 and loc["region"]["startColumn"] >= 1
        assert res["partialFingerprints"]["repoguardFingerprint/v2"].startswith(res["ruleId"] + ":a.py:")
        assert GH not in res["message"]["text"]


@pytest.mark.parametrize("args, problem", [
    (["/nonexistent/dir"], "no such"),
    (["--history", "--no-git", "."], "--history/--staged"),
    (["--since", "no-such-rev", "{repo}"], "failed"),
    (["--rules", "/nonexistent.toml", "{repo}"], "rule file not found"),
    (["--baseline", "{repo}/a.py", "{repo}"], "baseline"),
    (["--jobs", "0", "{repo}"], "--jobs"),
])
def test_bad_input_exits_2_with_one_line(make_repo, capsys, args, problem):
    repo = make_repo({"a.py": "x = 1\n"})
    rc, out, err = scan(capsys, *[a.replace("{repo}", str(repo)) for a in args])
    assert rc == 2
    assert problem in err and err.count("\n") == 1 and "Traceback" not in err


def test_user_rules_replace_defaults(make_repo, capsys, tmp_path):
    repo = make_repo({"a.py": f"T = '{GH}'\nK = 'acme_a0b1c2d3e4f5g6h7i8j9k0l1'\n"})
    cfg = tmp_path / "gitleaks.toml"
    cfg.write_text("[[rules]]\nid = 'acme'\nregex = '''acme_[a-z0-9]{24}'''\nkeywords = ['acme_']\n")
    _, doc = scan_json(capsys, str(repo), "--rules", str(cfg))
    assert [f["rule_id"] for f in doc["findings"]] == ["acme"]
    cfg.write_text(cfg.read_text() + "[extend]\nuseDefault = true\n")
    _, doc = scan_json(capsys, str(repo), "--rules", str(cfg))
    assert sorted(f["rule_id"] for f in doc["findings"]) == ["acme", "github-pat"]


# -- hostile files ----------------------------------------------------------------------------------
def test_binary_and_non_utf8_files(make_repo, capsys):
    repo = make_repo({"img.bin": b"\x89PNG\x00\x00" + f"T = '{GH}'".encode(),
                      "latin1.txt": b"caf\xe9 \xff\xfe\n" + f"T = '{GH}'\n".encode()})
    rc, doc = scan_json(capsys, str(repo))
    # a binary file is read over its printable runs (issue 41 item 5): its key is found too
    assert [(f["path"], f["line"]) for f in doc["findings"]] == [("img.bin", 1), ("latin1.txt", 2)]
    assert doc["stats"]["binary"] == 1


def test_100mb_single_line_file_is_capped(make_repo, capsys, tmp_path):
    repo = make_repo({"a.py": "x = 1\n"})
    big = repo / "huge.min.js"
    chunk = b"var a=1;function f(b){return b+1};" * 1000
    with open(big, "wb") as fh:
        fh.write(f"var t='{GH}';".encode())
        for _ in range(100_000_000 // len(chunk)):
            fh.write(chunk)
    git(repo, "add", "huge.min.js")
    git(repo, "commit", "-qm", "big")
    # the cap, not a time limit, is what bounds the work: at most 20 MB of it is read
    rc, doc = scan_json(capsys, str(repo), "--max-file-bytes", "20000000")
    assert [f["path"] for f in doc["findings"]] == ["huge.min.js"]
    assert doc["stats"]["truncated"] == 1 and doc["stats"]["bytes"] <= 20_000_006


def test_symlinks_are_never_followed_out_of_the_repo(make_repo, capsys, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"T = '{GH}'\n")
    (outside / "f.py").write_text(f"T = '{GH}'\n")
    repo = make_repo({"sub/f.py": "x = 1\n", "a.py": "y = 2\n"})
    os.symlink(outside / "secret.txt", repo / "link.txt")
    git(repo, "add", "link.txt")
    git(repo, "commit", "-qm", "link")
    # Replace a tracked directory by a symlink to outside the repo.
    (repo / "sub" / "f.py").unlink()
    (repo / "sub").rmdir()
    os.symlink(outside, repo / "sub")
    rc, doc = scan_json(capsys, str(repo))
    assert rc == 0 and doc["findings"] == []
    assert doc["stats"]["skipped_symlink"] == 1 and doc["stats"]["skipped_outside"] == 1
    rc, doc = scan_json(capsys, "--no-git", str(repo))
    assert rc == 0 and doc["findings"] == []


def test_fifo_does_not_hang(tmp_path, capsys):
    plain = tmp_path / "plain"
    plain.mkdir()
    os.mkfifo(plain / "pipe")
    (plain / "a.py").write_text(f"T = '{GH}'\n")
    rc, doc = scan_json(capsys, "--no-git", str(plain))
    assert rc == 1 and [f["path"] for f in doc["findings"]] == ["a.py"]


def test_parallel_pool_matches_serial(make_repo, capsys):
    files = {f"pkg/m{i}.py": (f"T = '{GH}'\n" if i % 50 == 0 else f"x{i} = {i}\n") for i in range(300)}
    repo = make_repo(files)
    rc, serial = scan_json(capsys, str(repo))
    rc2 = main(["scan", "--jobs", "2", "--format", "json", str(repo)])
    parallel = json.loads(capsys.readouterr().out)
    assert rc == rc2 == 1
    assert serial["findings"] == parallel["findings"] and len(serial["findings"]) == 6


# -- the fixture monorepo ------------------------------------------------------------------------------
def test_fixture_head_finds_every_planted_credential_and_no_bait(fixture_repo, monorepo_module, capsys):
    rc, doc = scan_json(capsys, str(fixture_repo))
    assert rc == 1
    found = {(f["path"], f["line"]) for f in doc["findings"]}
    for cred in monorepo_module.PLANTED_CREDENTIALS:
        if cred["in_head"]:
            assert (cred["path"], cred["line"]) in found, cred["id"]
    for bait in monorepo_module.FALSE_POSITIVE_BAIT:
        assert (bait["path"], bait["line"]) not in found, bait["kind"]
    planted_paths = {c["path"] for c in monorepo_module.PLANTED_CREDENTIALS if c["in_head"]}
    # Nothing flagged outside the files with planted credentials (a service-account JSON is
    # reported twice: its private_key_id and its private key).
    assert {p for p, _ in found} == planted_paths


def test_fixture_history_finds_deleted_credentials(fixture_repo, monorepo_module, capsys):
    rc, doc = scan_json(capsys, "--history", str(fixture_repo))
    assert rc == 1
    for cred in monorepo_module.PLANTED_CREDENTIALS:
        hits = [f for f in doc["findings"] if f["path"] == cred["path"]
                and f["present_at_head"] == cred["in_head"]]
        assert hits, cred["id"]
        if not cred["in_head"]:
            msgs = {subprocess.run(["git", "log", "-1", "--format=%s", f["commit"]], cwd=fixture_repo,
                                   capture_output=True, text=True).stdout.strip() for f in hits}
            assert cred["commit_message"] in msgs, cred["id"]
    bait = {(b["path"], b["line"]) for b in monorepo_module.FALSE_POSITIVE_BAIT}
    assert not [f for f in doc["findings"] if f["present_at_head"] and (f["path"], f["line"]) in bait]


def test_config_scan_section_excludes_and_baselines(make_repo, capsys):
    repo = make_repo({"vendor/lib.py": f"T = '{GH}'\n", "app.py": f"S = '{SL}'\n",
                      "repoguard.toml": '[scan]\nexclude = ["vendor/"]\nbaseline = "creds-baseline.json"\n'})
    rc, _, err = scan(capsys, str(repo), "--update-baseline")
    assert rc == 0 and "wrote 1 baseline entries" in err and (repo / "creds-baseline.json").exists()
    rc, doc = scan_json(capsys, str(repo))
    assert rc == 0 and doc["findings"] == [] and doc["stats"]["baselined"] == 1
    rc, doc = scan_json(capsys, "--history", str(repo))
    assert rc == 0 and doc["stats"]["baselined"] == 1  # vendor/ excluded in history too


def test_config_rule_files_are_relative_to_the_repo(make_repo, capsys, monkeypatch, tmp_path):
    repo = make_repo({"a.py": f"T = '{GH}'\nK = 'acme_a0b1c2d3e4f5g6h7i8j9k0l1'\n",
                      "ci/rules.toml": "[[rules]]\nid = 'acme'\nregex = '''acme_[a-z0-9]{24}'''\n",
                      "repoguard.toml": '[scan]\nrules = ["ci/rules.toml"]\n'})
    monkeypatch.chdir(tmp_path)
    _, doc = scan_json(capsys, str(repo))
    assert sorted(f["rule_id"] for f in doc["findings"]) == ["acme", "github-pat"]  # ours + theirs
    rc, _, err = scan(capsys, "--staged", "--since", "HEAD", str(repo))
    assert rc == 2 and "--since" in err
