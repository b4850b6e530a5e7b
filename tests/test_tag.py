"""The tagging hook: incremental manifest updates, exit codes, and the hook through pre-commit."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import git

from repoguard.core.config import load_config
from repoguard.source.gitrepo import GitRepo
from repoguard.tagging.tag import MANIFEST, read_manifest, render_manifest, tag

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tag(repo_dir: Path, **kw):
    repo = GitRepo(repo_dir)
    return tag(repo, load_config(repo_dir / "repoguard.toml"), repo_dir / ".repoguard", **kw)


def test_staged_files_are_tagged_then_stable(fixture_repo_copy):
    root = fixture_repo_copy
    (root / "tools/new_tool.py").write_text("from trading.alpha import signals\n")
    (root / "tools/notes.py").write_text('"""Falcon backtest notes."""\n')
    (root / "tools/plain.py").write_text("x = 1\n")
    git(root, "add", "tools")
    r = _tag(root)
    assert r.changed and r.examined == ["tools/new_tool.py", "tools/notes.py", "tools/plain.py"]
    assert read_manifest(root / MANIFEST) == {
        "tools/new_tool.py": {"alpha-strategy": ["imports"]},
        "tools/notes.py": {"alpha-strategy": ["codenames"]},
    }
    assert (root / ".repoguard/.gitignore").read_text().splitlines()[1:] == ["*", "!sensitive.toml"]
    # only the manifest shows up for git; the cache and the .gitignore itself are ignored
    status = git(root, "status", "--porcelain", "--untracked-files=all", "--", ".repoguard")
    assert status.split() == ["??", ".repoguard/sensitive.toml"]
    # nothing changed: exit 0 and the file is not rewritten
    mtime = (root / MANIFEST).stat().st_mtime_ns
    assert not _tag(root).changed
    assert (root / MANIFEST).stat().st_mtime_ns == mtime
    # the staged content counts, not the working tree
    (root / "tools/plain.py").write_text("from trading.alpha import model\n")
    assert not _tag(root).changed
    git(root, "add", "tools/plain.py")
    r = _tag(root)
    assert r.changed and r.tagged["tools/plain.py"] == {"alpha-strategy": ["imports"]}
    # removing the import and the file drops their entries
    (root / "tools/plain.py").write_text("x = 2\n")
    git(root, "add", "tools/plain.py")
    git(root, "rm", "-q", "--cached", "tools/notes.py")
    r = _tag(root)
    assert r.changed and sorted(r.removed) == ["tools/notes.py", "tools/plain.py"]
    assert sorted(read_manifest(root / MANIFEST)) == ["tools/new_tool.py"]


def test_history_ties_are_kept_and_all_rebuilds(fixture_repo_copy):
    root = fixture_repo_copy
    r = _tag(root, all_files=True)
    full = read_manifest(root / MANIFEST)
    assert r.changed and full["config/alpha_params.yaml"] == {"alpha-strategy": ["cochange"]}
    assert full["trading/execution/router.py"]["alpha-strategy"] == ["imports"]
    assert "shared/utils/files.py" not in full
    # a staged edit of a co-changed file keeps its history-based tie
    with open(root / "config/alpha_params.yaml", "a") as fh:
        fh.write("# tweak\n")
    git(root, "add", "config/alpha_params.yaml")
    assert not _tag(root).changed
    assert read_manifest(root / MANIFEST) == full


def test_render_is_deterministic_and_quoted():
    entries = {"b.py": {"s2": ["imports"], "credential:x:1": ["credentials"]}, 'a "q".py': {"s1": ["declared"]}}
    text = render_manifest(entries)
    assert text.index('[files."a \\"q\\".py"]') < text.index('[files."b.py"]')
    import tomllib
    assert tomllib.loads(text)["files"]["b.py"] == {"credential:x:1": ["credentials"], "s2": ["imports"]}


@pytest.mark.slow
def test_hook_through_pre_commit_try_repo(fixture_repo_copy, tmp_path):
    hooks = tmp_path / "hookrepo"
    hooks.mkdir()
    shutil.copy(ROOT / ".pre-commit-hooks.yaml", hooks / ".pre-commit-hooks.yaml")
    git(hooks, "init", "-q", "-b", "main")
    git(hooks, "add", "-A")
    git(hooks, "commit", "-q", "-m", "hooks")
    root = fixture_repo_copy
    (root / "reports/new_report.py").write_text("from trading.execution import router\n")
    git(root, "add", "reports/new_report.py")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "PRE_COMMIT_HOME": str(tmp_path / "pc-home"), "NO_COLOR": "1"}
    cmd = [str(BIN / "pre-commit"), "try-repo", str(hooks), "repoguard-tag"]
    first = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    assert first.returncode == 1, first.stdout + first.stderr
    assert "Failed" in first.stdout and "sensitive.toml" in first.stdout
    assert read_manifest(root / MANIFEST) == {"reports/new_report.py": {"alpha-strategy": ["imports"]}}
    git(root, "add", MANIFEST)
    second = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Passed" in second.stdout


def test_paths_from_pre_commit_are_read_from_the_index(fixture_repo_copy):
    root = fixture_repo_copy
    r = _tag(root, paths=["trading/execution/router.py", "shared/utils/files.py"])
    assert r.changed and r.examined == ["shared/utils/files.py", "trading/execution/router.py"]
    assert read_manifest(root / MANIFEST) == {"trading/execution/router.py": {"alpha-strategy": ["imports"]}}


def test_output_folder_ignores_itself_without_a_root_gitignore(tmp_path):
    from analyzer_helpers import make_repo

    from repoguard.analyzers.analyze import run_analyze
    from repoguard.core.config import parse_config

    repo = make_repo(tmp_path / "r", {"alpha/core.py": "X = 1\n", "app.py": "import alpha.core\n"})
    cfg = parse_config('[[secret]]\nid = "alpha"\npaths = ["alpha/"]\n')
    run_analyze(repo, cfg, repo.root / ".repoguard")
    assert git(repo.root, "status", "--porcelain", "--untracked-files=all") == ""
    (repo.root / "app.py").write_text("import alpha.core\nY = 2\n")
    git(repo.root, "add", "app.py")
    assert tag(repo, cfg, repo.root / ".repoguard").changed
    status = git(repo.root, "status", "--porcelain", "--untracked-files=all")
    assert status.split() == ["M", "app.py", "??", ".repoguard/sensitive.toml"]


def test_credentials_in_staged_content(fixture_repo_copy, monorepo_module):
    from repoguard.analyzers import credentials

    root = fixture_repo_copy
    src = next(c["path"] for c in monorepo_module.PLANTED_CREDENTIALS
               if c["in_head"] and c["path"].endswith(".py"))
    (root / "tools/copied.py").write_text((root / src).read_text())
    git(root, "add", "tools/copied.py")
    r = _tag(root)
    entry = read_manifest(root / MANIFEST)["tools/copied.py"]
    cfg = load_config(root / "repoguard.toml")
    repo = GitRepo(root)
    expected = {credentials.secret_id(f) for f in credentials.scan(repo, [src], cfg)}
    assert r.changed and expected and {s for s, a in entry.items() if a == ["credentials"]} >= expected


def test_hook_keeps_the_cache_sections_it_did_not_load(fixture_repo_copy):
    """The hook loads only the analyzer cache sections it needs (none for imports under a light
    hook config); saving must write back what `repoguard analyze` cached for the others."""
    from repoguard.analyzers.analyze import CACHE_FILE
    from repoguard.cli import main

    root = fixture_repo_copy
    assert main(["analyze", "-q", str(root)]) == 0
    cache = root / ".repoguard" / CACHE_FILE
    before = json.loads(cache.read_text())
    assert before["imports"] and before["codenames"]
    hook = root / "hook.toml"  # a faster hook: no import graph
    hook.write_text((root / "repoguard.toml").read_text().replace(
        "[analyzers]\n", '[analyzers]\nenabled = ["declared", "codenames", "credentials"]\n', 1))
    (root / "tools/notes.py").write_text('"""Falcon backtest notes."""\n')
    git(root, "add", "tools/notes.py")
    assert main(["tag", "--config", str(hook), "--repo", str(root)]) == 1
    after = json.loads(cache.read_text())
    assert set(after) == set(before)
    assert after["imports"] == before["imports"]
    # the hook did save: the new blob's codenames are cached next to the analyze run's
    assert set(after["codenames"]) > set(before["codenames"])


def test_only_files_whose_entry_changed_are_counted(fixture_repo_copy, capsys):
    """Issue 28 item 9: with the manifest current, staging a sensitive file that did not change
    sensitivity next to one that did printed "2 file(s) changed sensitivity" and listed both."""
    from repoguard.cli import main

    root = fixture_repo_copy
    assert _tag(root, paths=["."]).changed          # the manifest of the whole index: current now
    git(root, "add", MANIFEST)
    assert not _tag(root, paths=["."]).changed
    with (root / "reports/daily_pnl.py").open("a") as f:   # sensitive (imports), stays so
        f.write("# touched\n")
    (root / "tools/new_tool.py").write_text("from trading.alpha import signals\n")
    git(root, "add", "reports/daily_pnl.py", "tools/new_tool.py")
    capsys.readouterr()
    assert main(["tag", "--repo", str(root)]) == 1
    err = capsys.readouterr().err
    assert "(1 file(s) changed sensitivity)" in err
    assert "tools/new_tool.py: alpha-strategy (imports)" in err
    assert "reports/daily_pnl.py" not in err
    # --all-files through pre-commit passes every tracked file: nothing changed, nothing listed
    r = _tag(root, paths=["."])
    assert not r.changed and r.updated == {} and r.removed == []
    assert "reports/daily_pnl.py" in r.tagged   # `tagged` still holds every examined file's entry


def test_own_files_are_never_tagged(fixture_repo_copy):
    """repoguard.toml names every codename; `analyze` leaves it out, so must the hook."""
    root = fixture_repo_copy
    _tag(root, paths=["."])
    assert "repoguard.toml" not in read_manifest(root / MANIFEST)
    # an old manifest that listed it loses the entry
    entries = read_manifest(root / MANIFEST)
    (root / MANIFEST).write_text(render_manifest({**entries, "repoguard.toml": {"alpha-strategy": ["codenames"]}}))
    r = _tag(root, paths=["repoguard.toml"])
    assert r.changed and r.removed == ["repoguard.toml"] and r.updated == {}
