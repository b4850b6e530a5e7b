"""The pre-commit hook, run by the real `pre-commit` on temporary repositories (offline: the hook is
`language: system`, so nothing is installed; HOME and PRE_COMMIT_HOME point into tmp)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import git

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
GH = "ghp_" + "a0B1c2D3e4F5g6H7i8J9k0L1m2N3o4P5q6R7"   # fake, format-valid

pytestmark = pytest.mark.skipif(not (BIN / "pre-commit").exists(), reason="pre-commit not installed")


@pytest.fixture(scope="module")
def hs_cache(tmp_path_factory):
    """One compiled-rules cache for the module's hook runs (compiling takes a second or more)."""
    return tmp_path_factory.mktemp("hs-cache")


@pytest.fixture
def env(tmp_path, hs_cache):
    home = tmp_path / "home"
    home.mkdir()
    return {**os.environ, "HOME": str(home), "PRE_COMMIT_HOME": str(tmp_path / "pc"),
            "REPOGUARD_CACHE": str(hs_cache), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
            "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.com",
            "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.com",
            "GIT_CONFIG_NOSYSTEM": "1", "PRE_COMMIT_NO_CONCURRENCY": "1"}


@pytest.fixture
def hooks_repo(tmp_path):
    """A git repository holding this project's .pre-commit-hooks.yaml (committed)."""
    d = tmp_path / "hooks"
    d.mkdir()
    shutil.copy(ROOT / ".pre-commit-hooks.yaml", d / ".pre-commit-hooks.yaml")
    git(d, "init", "-q", "-b", "main")
    git(d, "add", "-A")
    git(d, "commit", "-qm", "hooks")
    return d


def _run(cmd, cwd, env):
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    assert GH not in p.stdout + p.stderr, "the secret was printed"
    return p


def test_hook_definition_is_a_yaml_list():
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert isinstance(hooks, list)
    (hook,) = [h for h in hooks if h["id"] == "repoguard-credentials"]
    assert hook["pass_filenames"] is True and hook["entry"].startswith("repoguard scan")


def test_try_repo_blocks_staged_secret(make_repo, hooks_repo, env):
    repo = make_repo({"README.md": "hi\n"})
    (repo / "app.py").write_text(f"import os\nTOKEN = '{GH}'\n")
    git(repo, "add", "app.py")
    p = _run([str(BIN / "pre-commit"), "try-repo", str(hooks_repo), "repoguard-credentials"], repo, env)
    assert p.returncode == 1, p.stdout + p.stderr
    assert f"app.py:2:10: github-pat: ****({len(GH)} chars)" in p.stdout
    assert "Failed" in p.stdout


def test_try_repo_all_files_scans_committed_files(make_repo, hooks_repo, env):
    repo = make_repo({"README.md": "hi\n", "deep/dir/old.py": f"T = '{GH}'\n"})
    # Nothing staged: a normal run has no files; --all-files must scan every tracked file.
    p = _run([str(BIN / "pre-commit"), "try-repo", str(hooks_repo), "repoguard-credentials"], repo, env)
    assert p.returncode == 0, p.stdout + p.stderr
    p = _run([str(BIN / "pre-commit"), "try-repo", str(hooks_repo), "repoguard-credentials",
              "--all-files"], repo, env)
    assert p.returncode == 1, p.stdout + p.stderr
    assert f"deep/dir/old.py:1:6: github-pat: ****({len(GH)} chars)" in p.stdout
    assert "2 files" in p.stdout  # it said how much it scanned: never silently nothing


def test_installed_hook_blocks_commit_and_clean_commit_passes(make_repo, hooks_repo, env):
    repo = make_repo({"README.md": "hi\n"})
    rev = git(hooks_repo, "rev-parse", "HEAD").strip()
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {hooks_repo}\n  rev: {rev}\n  hooks:\n  - id: repoguard-credentials\n")
    git(repo, "add", ".pre-commit-config.yaml")
    git(repo, "commit", "-qm", "config")
    p = _run([str(BIN / "pre-commit"), "install"], repo, env)
    assert p.returncode == 0, p.stderr
    (repo / "ok.py").write_text("x = 1\n")
    git(repo, "add", "ok.py")
    p = _run(["git", "commit", "-m", "clean"], repo, env)
    assert p.returncode == 0, p.stdout + p.stderr
    (repo / "bad.py").write_text(f"T = '{GH}'\n")
    git(repo, "add", "bad.py")
    head = git(repo, "rev-parse", "HEAD")
    p = _run(["git", "commit", "-m", "leak"], repo, env)
    assert p.returncode != 0
    assert "bad.py:1:6: github-pat" in p.stdout + p.stderr
    assert git(repo, "rev-parse", "HEAD") == head  # the commit was blocked


def _docs_hook_config() -> str:
    """The YAML block of the docs' "## Pre-commit" section (docs/scanning.md), as a user copies it."""
    text = (ROOT / "docs" / "scanning.md").read_text()
    section = text[text.index("## Pre-commit\n"):]
    start = section.index("```yaml\n") + len("```yaml\n")
    return section[start:section.index("```", start)]


def test_docs_snippet_matches_the_published_hooks():
    config = yaml.safe_load(_docs_hook_config())
    (repo,) = config["repos"]
    assert repo["repo"] == "local" and "rev" not in repo
    published = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert [h["id"] for h in repo["hooks"]] == list(published)
    for hook in repo["hooks"]:
        assert hook == {k: v for k, v in published[hook["id"]].items() if k != "description"}


@pytest.mark.slow
def test_docs_snippet_works_as_written(make_repo, env):
    """Issue 28 item 9: the documented block (it said `rev: v0.1.0`, a tag that does not exist),
    copied into a repository, installed with the real pre-commit: a clean commit passes, a commit
    adding a credential is blocked, and committing the manifest the tag hook wrote passes."""
    repo = make_repo({"README.md": "hi\n"})
    (repo / ".pre-commit-config.yaml").write_text(_docs_hook_config())
    git(repo, "add", ".pre-commit-config.yaml")
    git(repo, "commit", "-qm", "config")
    p = _run([str(BIN / "pre-commit"), "install"], repo, env)
    assert p.returncode == 0, p.stdout + p.stderr
    (repo / "ok.py").write_text("x = 1\n")
    git(repo, "add", "ok.py")
    p = _run(["git", "commit", "-m", "clean"], repo, env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "repoguard credentials" in p.stdout + p.stderr   # the hooks ran
    (repo / "bad.py").write_text(f"T = '{GH}'\n")
    git(repo, "add", "bad.py")
    head = git(repo, "rev-parse", "HEAD")
    p = _run(["git", "commit", "-m", "leak"], repo, env)
    assert p.returncode != 0
    assert "bad.py:1:6: github-pat" in p.stdout + p.stderr
    assert git(repo, "rev-parse", "HEAD") == head           # blocked
    # A password-like credential: the tag hook records its id in the manifest; committing the
    # manifest must not be blocked by the scan hook reading the id as a password.
    git(repo, "rm", "-q", "--cached", "bad.py")
    (repo / "bad.py").unlink()
    (repo / "app.yaml").write_text("db:\n  password: q9W8e7R6t5zz\n")
    git(repo, "add", "app.yaml")
    p = _run(["git", "commit", "-m", "pw"], repo, env)
    assert p.returncode != 0 and "password-in-config-file" in p.stdout + p.stderr
    manifest = repo / ".repoguard" / "sensitive.toml"
    assert "credential:password" in manifest.read_text()
    git(repo, "rm", "-q", "--cached", "app.yaml")
    (repo / "app.yaml").unlink()
    git(repo, "add", ".repoguard/sensitive.toml")
    p = _run([str(BIN / "pre-commit"), "run", "repoguard-credentials", "--files",
              ".repoguard/sensitive.toml"], repo, env)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.slow
def test_hook_with_a_baseline_reports_only_new_findings(make_repo, hooks_repo, env):
    """Issue 41 item 15: a file with old findings (moto's test_cognitoidp.py has 36) no longer
    blocks every edit. With `[scan] baseline` in repoguard.toml and the baseline written by
    `repoguard scan --write-baseline` and committed (the hook must not read its fingerprints as
    keys), an edit that only touches the file passes and says the findings are known; an edit
    adding a credential is blocked and reports that one alone."""
    import random

    from fake_values import random_key

    rng = random.Random(4115)
    old = ["ghp_" + random_key(rng, 36), "sk_live_" + random_key(rng, 24)]
    new = "ghp_" + random_key(rng, 36)
    repo = make_repo({"tests/test_idp.py": f"A = '{old[0]}'\nB = '{old[1]}'\n",
                      "repoguard.toml": '[scan]\nbaseline = ".repoguard/baseline.json"\n'})
    rev = git(hooks_repo, "rev-parse", "HEAD").strip()
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {hooks_repo}\n  rev: {rev}\n  hooks:\n  - id: repoguard-credentials\n")
    p = _run([str(BIN / "repoguard"), "scan", "--write-baseline"], repo, env)
    assert p.returncode == 0 and "wrote 2 baseline entries" in p.stderr, p.stdout + p.stderr
    assert _run([str(BIN / "pre-commit"), "install"], repo, env).returncode == 0
    git(repo, "add", "-A")
    p = _run(["git", "commit", "-m", "baseline"], repo, env)
    assert p.returncode == 0, p.stdout + p.stderr                  # the baseline itself passes
    (repo / "tests" / "test_idp.py").write_text(f"A = '{old[0]}'\nB = '{old[1]}'\nC = 3\n")
    git(repo, "add", "-A")
    p = _run(["git", "commit", "-m", "touch"], repo, env)
    assert p.returncode == 0, p.stdout + p.stderr
    p = _run([str(BIN / "repoguard"), "scan", "tests/test_idp.py"], repo, env)
    assert p.returncode == 0 and "0 new finding(s) (2 known, in the baseline) in 1 files" in p.stderr
    (repo / "tests" / "test_idp.py").write_text(f"A = '{old[0]}'\nB = '{old[1]}'\nC = '{new}'\n")
    git(repo, "add", "-A")
    p = _run(["git", "commit", "-m", "leak"], repo, env)
    assert p.returncode != 0
    out = p.stdout + p.stderr
    for s in (*old, new):
        assert s not in out
    assert "tests/test_idp.py:3:6: github-pat" in out and out.count("tests/test_idp.py:") == 1
