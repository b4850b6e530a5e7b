"""Selectors that tie nothing: a declared secret's `paths` glob matching no file, an `owners`
entry no CODEOWNERS rule names, a codename mentioned nowhere. Such a secret validates and
analyzes silently to "0 examples", which almost always means a typo; `analyze`, `plan` and
`run` warn about each by name (`warn`).

`unmatched(repo, corpus, config, evidence, names)` → {secret id: [problem, …]}, recorded in
`OUT/incidence/summary.json` under "unmatched" so that `plan` can repeat the warning.
"""
from __future__ import annotations

import logging
from typing import Iterable, Sequence

from repoguard.analyzers import _files

log = logging.getLogger("repoguard")


def unmatched(repo, corpus, config, evidence: Iterable, names: Sequence[str]) -> dict[str, list[str]]:
    """For every declared secret, the selectors that match nothing.

    paths: each glob against every file the corpus saw (kept or left out); owners (when the
    ownership analyzer ran and the secret propagates to owners): each owner against the owners
    CODEOWNERS names; codenames (when the codenames analyzer ran): each codename against the
    codenames its evidence rows carry as `selector` (mentions outside the secret's own files, and
    commit messages)."""
    kept = list(corpus.file_examples)
    left_out = [e.path for e in corpus.excluded]
    mentioned = {(e.secret_id, e.selector) for e in evidence if e.analyzer == "codenames"}
    named: set[str] | None = None
    if "ownership" in names and any(s.owners and s.propagate.owners for s in config.secrets):
        from repoguard.analyzers import codeowners

        co = codeowners.load(repo)
        named = set() if co is None else {o.lower() for r in co.rules for o in r.owners}
    out: dict[str, list[str]] = {}
    for s in config.secrets:
        problems = []
        for glob in s.paths:
            spec = _files._spec((glob,))
            if any(spec.match_file(p) for p in kept):
                continue
            if any(spec.match_file(p) for p in left_out):
                problems.append(f"paths {glob!r} matches only files left out of the corpus")
            else:
                problems.append(f"paths {glob!r} matches no file")
        if named is not None and s.propagate.owners:
            for o in s.owners:
                if o.lower() not in named and not ("@" in o and not o.startswith("@") and s.propagate.authors):
                    problems.append(f"owner {o!r} is named by no CODEOWNERS rule")
        if "codenames" in names and s.propagate.codenames:
            for name in s.codenames:
                if (s.id, name) not in mentioned:
                    problems.append(f"codename {name!r} is mentioned in no file outside its paths "
                                    "and no commit message")
        if problems:
            out[s.id] = problems
    return out


def warn(found: dict[str, list[str]]) -> None:
    """One warning line per secret, naming it and each selector that matched nothing."""
    for sid, problems in sorted(found.items()):
        log.warning("warning: secret %r: %s", sid, "; ".join(problems))
