"""declared — files under a secret's `paths` (gitignore-style patterns) carry it.

These files are also the *seeds* the other analyzers propagate from (importers of a secret's
files, files changed together with them, files of the same main developers).
"""
from __future__ import annotations

from typing import Iterator

from repoguard.analyzers import _files
from repoguard.analyzers.incidence import Evidence
from repoguard.analyzers.protocol import EvidenceAnalyzer

NAME = "declared"


def analyze(repo, corpus, config) -> Iterator[Evidence]:
    """One Evidence per (corpus file, secret) whose `paths` match the file."""
    files = sorted(_files.corpus_files(corpus))
    for secret in config.secrets:
        for path in _files.secret_files(secret, files):
            pattern = _files.matching_pattern(secret, path)
            yield Evidence(path, secret.id, NAME, f"matches paths pattern {pattern!r} of secret {secret.id}")


ANALYZER = EvidenceAnalyzer(NAME, analyze)
