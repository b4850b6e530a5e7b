"""Small real git repositories for the analyzer tests (built in tmp_path, committed with git)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from repoguard.analyzers import imports as imports_analyzer
from repoguard.source.gitrepo import GitRepo

ENV = {
    "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent",
}


def git(root: Path, *args: str, env: dict | None = None) -> str:
    e = {**os.environ, **ENV, **(env or {})}
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True, env=e).stdout


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def make_repo(root: Path, files: dict[str, str]) -> GitRepo:
    """A git repo at `root` holding `files` in one commit."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    write(root, files)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return GitRepo(root)


def commit(root: Path, files: dict[str, str], message: str, *, author: str = "Test <test@example.com>",
           date: str | None = None) -> None:
    write(root, files)
    git(root, "add", "-A")
    name, _, email = author.partition(" <")
    env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email.rstrip(">")}
    if date:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = date
    git(root, "commit", "-q", "-m", message, env=env)


def graph_of(repo: GitRepo):
    """Import graph over every tracked file; returns (ImportGraph, edges as sorted (u, v) pairs)."""
    files = {f.path: f.blob_sha for f in repo.tracked_files()}
    ig = imports_analyzer.build_graph(repo, files)
    return ig, sorted(ig.graph.edges())
