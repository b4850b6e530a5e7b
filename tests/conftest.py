"""Shared fixtures: the fixture monorepo, built once per session by fixtures/build_monorepo.py."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "fixtures"))     # repo_tools, audit_setup: shared with bench/

from repo_tools import builder, git  # noqa: E402,F401  (tests import `git` from conftest)


@pytest.fixture(scope="session")
def monorepo_module():
    """The fixture builder module: its ground-truth constants (PLANTED_CREDENTIALS, …)."""
    return builder()


@pytest.fixture(scope="session")
def fixture_repo(tmp_path_factory, monorepo_module) -> Path:
    """The fixture monorepo, built once per session. Treat it as read-only; use
    `fixture_repo_copy` to modify it."""
    dest = tmp_path_factory.mktemp("fixture") / "monorepo"
    return Path(monorepo_module.build(dest))


@pytest.fixture
def fixture_repo_copy(fixture_repo, tmp_path) -> Path:
    """A private clone of the fixture monorepo (working tree and full history) for tests that
    change it."""
    dest = tmp_path / "monorepo"
    shutil.copytree(fixture_repo, dest, symlinks=True)
    return dest


@pytest.fixture
def make_repo(tmp_path):
    """Factory: `make_repo({"a.py": "...", ...}, message="init")` → a committed git repo."""

    def _make(files: dict[str, str | bytes], message: str = "init", path: Path | None = None) -> Path:
        repo = path or (tmp_path / "repo")
        repo.mkdir(parents=True, exist_ok=True)
        if not (repo / ".git").exists():
            git(repo, "init", "-q", "-b", "main")
        for name, content in files.items():
            f = repo / name
            f.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                f.write_bytes(content)
            else:
                f.write_text(content)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", message)
        return repo

    return _make
