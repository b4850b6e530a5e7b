"""Shared fixtures: the fixture monorepo, built once per session by fixtures/build_monorepo.py, and
the embedded base model's cache (built at most once, shared by every xdist worker and by the CLI
subprocesses tests start)."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "fixtures"))     # repo_tools, audit_setup: shared with bench/

from repo_tools import builder, git  # noqa: E402,F401  (tests import `git` from conftest)

def pytest_configure(config):
    """Every test (and every `repoguard` subprocess) finds the embedded base model in one cache
    outside the user's home: `$REPOGUARD_CACHE_DIR` when set (CI may keep it between runs), else a
    per-user directory in the temp dir. Its entries are keyed by corpus/config digest and built
    under a file lock, so parallel workers build the base once and never see a half-written one."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    os.environ.setdefault("REPOGUARD_CACHE_DIR", str(Path(tempfile.gettempdir()) / f"repoguard-test-cache-{uid}"))
    # One OpenMP/BLAS thread per process (xdist workers and the CLI subprocesses inherit it), as
    # training already runs (`training.model.limit_cpu_threads`): the tests' own torch calls
    # otherwise start one thread per core, and on 2 cores shared by two workers the spinning
    # threads doubled their CPU (two gradient tests: 16.5 s → 8.9 s CPU at load 10) for the
    # same results.
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def embedded_base_dir() -> Path:
    """The cached embedded base model (`training.base_model.ensure_base`, default config), built
    first if this machine has none (~1.5 min on one core, once)."""
    from repoguard.training.base_model import ensure_base

    return ensure_base(show_progress=False)


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


SMALL_PLAN = ["--batch-size", "8", "--steps", "3", "--c", "1"]


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """`repoguard ARGV` in this process: (exit code, stdout, stderr), earlier captured output dropped."""
    from repoguard.cli import main

    capsys.readouterr()
    rc = main(list(argv))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


@pytest.fixture(scope="session")
def planned_fixture_repo(fixture_repo, tmp_path_factory) -> Path:
    """The fixture monorepo, analysed and planned with `SMALL_PLAN` (B = 8, T = 3, c = 1), once
    per session. Read-only; use `planned_repo_copy` to change it."""
    from repoguard.cli import main
    repo = tmp_path_factory.mktemp("planned") / "monorepo"
    shutil.copytree(fixture_repo, repo, symlinks=True)
    assert main(["analyze", "-q", str(repo)]) == 0
    assert main(["plan", "-q", *SMALL_PLAN, str(repo)]) == 0
    return repo


@pytest.fixture
def planned_repo_copy(planned_fixture_repo, tmp_path) -> Path:
    """A private copy of `planned_fixture_repo` for tests that change it."""
    dest = tmp_path / "monorepo"
    shutil.copytree(planned_fixture_repo, dest, symlinks=True)
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
