"""What analyzers share: the files they look at, their contents, and a secret's own files.

Analyzers tie *files* to secrets. The files they tie are the corpus's kept files; the files they
may *resolve to* (an import target, a CODEOWNERS match) are all tracked files, because a module
the corpus leaves out (empty `__init__.py`, generated code) can still be what a file imports.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Iterable, Iterator, Mapping

import pathspec

from repoguard.core.config import SecretConfig


class FileSet:
    """A stand-in corpus of whole files with known blob SHAs (the staged files of the hook):
    analyzers read these blobs, not the working tree."""

    def __init__(self, blob_shas: Mapping[str, str]) -> None:
        self.blob_shas = dict(blob_shas)
        self.files = sorted(self.blob_shas)
        self.file_examples = {p: [] for p in self.files}
        self.examples: list = []


def corpus_files(corpus) -> dict[str, str]:
    """path → blob SHA of every file the corpus kept ("" when unknown, e.g. a plain directory).
    A `FileSet` (the pre-commit hook's staged files) gives its own SHAs."""
    if isinstance(corpus, FileSet):
        return dict(corpus.blob_shas)
    shas: dict[str, str] = {}
    examples = getattr(corpus, "examples", [])
    for path, idx in getattr(corpus, "file_examples", {}).items():
        sha = ""
        for i in idx:
            ex = examples[i]
            if ex.path == path:
                sha = ex.blob_sha or ""
                break
        shas[path] = sha
    for path in getattr(corpus, "files", ()):
        shas.setdefault(path, "")
    return shas


def tracked_files(repo) -> list:
    """`repo.tracked_files()`, listed once per repo object (one `git ls-files` per run)."""
    cached = getattr(repo, "_rg_tracked_files", None)
    if cached is None:
        cached = repo.tracked_files()
        try:
            repo._rg_tracked_files = cached
        except AttributeError:  # pragma: no cover
            pass
    return cached


def tracked_paths(repo) -> list[str]:
    """All tracked (or, for a plain directory, present) file paths, sorted; cached per repo."""
    cached = getattr(repo, "_rg_tracked_paths", None)
    if cached is None:
        cached = sorted(f.path for f in tracked_files(repo) if not f.is_symlink)
        try:
            repo._rg_tracked_paths = cached
        except AttributeError:  # pragma: no cover - slotted objects
            pass
    return cached


def read_sources(repo, files: Mapping[str, str]) -> Iterator[tuple[str, bytes]]:
    """Yield `(path, bytes)` for `files` (path → blob SHA). Blobs go through one `git cat-file`
    process; files without a SHA (plain directory, untracked) are read from the working tree.
    Unreadable files are skipped."""
    by_sha = [(p, s) for p, s in files.items() if s and getattr(repo, "is_git", False)]
    rest = [p for p, s in files.items() if not (s and getattr(repo, "is_git", False))]
    if by_sha:
        paths_of: dict[str, list[str]] = {}
        for p, s in by_sha:
            paths_of.setdefault(s, []).append(p)
        for sha, data in repo.read_blobs(list(paths_of)):
            for p in paths_of.get(sha, ()):
                if data is None:
                    rest.append(p)
                else:
                    yield p, data
    for p in rest:
        try:
            yield p, repo.read_working_file(p)
        except OSError:
            continue


def read_text(repo, path: str, *, max_bytes: int = 1_000_000) -> str | None:
    """Working-tree text of a small config file (go.mod, tsconfig.json …), None when absent or
    when it is a symlink leading out of the checkout (one inside it is followed)."""
    try:
        data = repo.read_working_file(path, max_bytes=max_bytes, links_inside=True)
    except OSError:
        return None
    return data[:max_bytes].decode("utf-8", errors="replace")


def secret_spec(secret: SecretConfig) -> pathspec.PathSpec | None:
    """The secret's `paths` as gitignore-style (gitwildmatch) patterns, None when it declares no
    paths. A bare folder name matches everything below it, as in .gitignore."""
    if not secret.paths:
        return None
    return _spec(tuple(secret.paths))


@lru_cache(maxsize=256)
def _spec(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def secret_files(secret: SecretConfig, paths: Iterable[str]) -> list[str]:
    """The paths among `paths` that the secret's `paths` patterns match, sorted."""
    spec = secret_spec(secret)
    if spec is None:
        return []
    return sorted(p for p in paths if spec.match_file(p))


def matching_pattern(secret: SecretConfig, path: str) -> str | None:
    """The last of the secret's patterns that matches `path` (what `declared` names)."""
    hit = None
    for pattern in secret.paths:
        if _spec((pattern,)).match_file(path):
            hit = pattern
    return hit


def own_chunks(corpus, path: str) -> list[tuple[int, int]]:
    """Byte ranges [start, end) of the examples cut from `path` itself (not those deduplicated
    from another file, which the incidence ties whatever the span); [] for a `FileSet`."""
    examples = getattr(corpus, "examples", [])
    out = []
    for i in getattr(corpus, "file_examples", {}).get(path, ()):
        ex = examples[i]
        if ex.path == path:
            out.append((ex.start_byte, ex.end_byte))
    return out
