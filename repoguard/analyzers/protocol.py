"""What an analyzer is: an object with a `name` and a `run(repo, corpus, config, *, cache)` that
returns the evidence it found and the secrets it discovered itself (pre-commit's
`class Language(Protocol)` shape). The objects are listed in `registry.py`.

Most analyzers only tie files to the secrets of repoguard.toml; `EvidenceAnalyzer` wraps the
function of such a module. An analyzer that discovers secrets (credentials) returns them with its
evidence from the same call, so no state waits in a module between two calls.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, MutableMapping, NamedTuple, Protocol, runtime_checkable

from repoguard.analyzers.incidence import Evidence, Secret


class Found(NamedTuple):
    """What one analyzer run found: `evidence` (file → secret rows, in the analyzer's order) and
    `secrets` (the secrets it discovered itself, e.g. one per distinct credential, in first-seen
    order; empty for an analyzer that only ties the secrets of repoguard.toml)."""

    evidence: list[Evidence]
    secrets: list[Secret]


@runtime_checkable
class Analyzer(Protocol):
    """One evidence source of `repoguard analyze`.

    `name` is the name `[analyzers] enabled` and `--only` use, and the `analyzer` of every
    Evidence row it yields. `cached` says whether `run` reads and fills `cache`: a dict that
    `repoguard analyze` persists in `OUT/cache/analyzers.json` (section `name`), keyed by blob
    SHA, so a re-run skips unchanged files; an analyzer with `cached = False` is always given None.
    """

    name: str
    cached: bool

    def run(self, repo, corpus, config, *, cache: MutableMapping | None = None) -> Found:
        """Evidence for the corpus files of `repo` (source.corpus.Corpus `corpus`) under `config`
        (core.config.Config), and the secrets this analyzer discovered."""
        ...


@dataclass(frozen=True)
class EvidenceAnalyzer:
    """An `Analyzer` that discovers no secrets: `find(repo, corpus, config[, cache=…])` yields
    the Evidence tying corpus files to the secrets of repoguard.toml (`cache` is passed only
    when `cached`)."""

    name: str
    find: Callable[..., Iterable[Evidence]]
    cached: bool = False

    def run(self, repo, corpus, config, *, cache: MutableMapping | None = None) -> Found:
        """`find`'s evidence as a list, and no secrets."""
        kw = {"cache": cache} if self.cached else {}
        return Found(list(self.find(repo, corpus, config, **kw)), [])
