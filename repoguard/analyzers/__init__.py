"""The analysis. Takes the examples (`source`), the findings (`credentials`) and the secrets of
`repoguard.toml`; writes `OUT/incidence/` (the incidence E: examples × secrets, with evidence);
hands it to `planning` (and to `tagging`, `explain`).

Evidence sources: each analyzer ties files to secrets and says why.

An analyzer is a function `(repo, corpus, config) -> Iterable[Evidence]` in a module of this
package; it may also accept a keyword `cache` (a dict persisted by `repoguard analyze`, keyed by
blob SHA) to skip unchanged files on a re-run. An analyzer that discovers secrets of its own
(credentials) also defines `secrets(evidence, config) -> [Secret]` in its module. Adding an
analyzer is adding a module and a line to `REGISTRY` — nothing else; `incidence.ANALYZERS` lists
the names evidence may carry.
"""
from __future__ import annotations

import importlib
import inspect
from typing import Callable, Iterable

from repoguard.analyzers.incidence import Evidence

# name → "module:function"; run in this order (declared first: the others propagate from it).
REGISTRY: dict[str, str] = {
    "declared": "repoguard.analyzers.declared:analyze",
    "imports": "repoguard.analyzers.imports:analyze",
    "ownership": "repoguard.analyzers.ownership:analyze",
    "cochange": "repoguard.analyzers.cochange:analyze",
    "codenames": "repoguard.analyzers.codenames:analyze",
    "credentials": "repoguard.analyzers.credentials:analyze",
}


def get(name: str) -> Callable[..., Iterable[Evidence]]:
    """The analyzer function registered as `name`. Raises KeyError for an unknown name."""
    module, _, func = REGISTRY[name].partition(":")
    return getattr(importlib.import_module(module), func)


def accepts_cache(fn: Callable) -> bool:
    return "cache" in inspect.signature(fn).parameters
