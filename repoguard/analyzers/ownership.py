"""ownership — files owned by a secret's owners carry it.

Two sources, each switched per secret:
Files under the secret's own `paths` are left to `declared`.

- `propagate.owners`: CODEOWNERS (GitHub semantics, see codeowners.py). A file whose deciding
  CODEOWNERS line names one of the secret's `owners` (`@org/team`, `@user`, email; compared
  case-insensitively) carries the secret.
- `propagate.authors`: history authorship. The main developer of a file is the author with most
  revisions of it (code-maat "main-dev" counted in revisions), with mailmap-normalised emails.
  The secret's main developers are the main developers of its own files plus any email among its
  `owners`; a file whose main developer is one of them, holding at least
  `analyzers.main_developer_min_share` of its revisions, carries the secret.
"""
from __future__ import annotations

import logging
from typing import Iterator

from repoguard.analyzers import _files, codeowners
from repoguard.analyzers.history import load_history
from repoguard.analyzers.incidence import Evidence
from repoguard.analyzers.protocol import EvidenceAnalyzer

log = logging.getLogger(__name__)
NAME = "ownership"


def analyze(repo, corpus, config) -> Iterator[Evidence]:
    """Evidence for corpus files owned by a secret's owners: CODEOWNERS rows first
    (`propagate.owners`), then main-developer rows (`propagate.authors`), as the module doc says."""
    files = sorted(_files.corpus_files(corpus))
    yield from _by_codeowners(repo, files, config)
    yield from _by_authors(repo, files, config)


def _by_codeowners(repo, files: list[str], config) -> Iterator[Evidence]:
    secrets = [s for s in config.secrets if s.propagate.owners and s.owners]
    if not secrets:
        return
    co = codeowners.load(repo)
    if co is None:
        return
    for line, msg in co.errors:
        log.warning("%s:%d: %s", co.source, line, msg)
    own = {s.id: set(_files.secret_files(s, files)) for s in secrets}
    for path in files:
        rule = co.match(path)
        if rule is None or not rule.owners:
            continue
        have = {o.lower(): o for o in rule.owners}
        for s in secrets:
            hit = [have[o.lower()] for o in s.owners if o.lower() in have]
            if hit and path not in own[s.id]:
                yield Evidence(path, s.id, NAME,
                               f"owned by {', '.join(hit)} per {co.source} line {rule.line} ({rule.pattern})")


def _by_authors(repo, files: list[str], config) -> Iterator[Evidence]:
    secrets = [s for s in config.secrets if s.propagate.authors]
    if not secrets:
        return
    hist = load_history(repo)
    min_share = config.analyzers.main_developer_min_share
    main = {}
    for path in files:
        md = hist.main_developer(path)
        if md and md[1] / md[2] >= min_share:
            main[path] = md
    universe = sorted(set(files) | set(hist.revisions))
    for s in secrets:
        devs = {o.lower() for o in s.owners if "@" in o and not o.startswith("@")}
        for seed in _files.secret_files(s, universe):
            md = hist.main_developer(seed)
            if md:
                devs.add(md[0])
        if not devs:
            continue
        seeds = set(_files.secret_files(s, files))
        for path, (author, n, total) in main.items():
            if author in devs and path not in seeds:
                yield Evidence(path, s.id, NAME,
                               f"main developer {author} ({n} of {total} revisions, fragmentation "
                               f"{hist.fragmentation(path):.2f}) is a main developer of {s.id}")


ANALYZER = EvidenceAnalyzer(NAME, analyze)
