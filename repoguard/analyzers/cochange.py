"""cochange — files that change together with a secret's files carry it (`propagate.cochange`).

Logical coupling as defined by code-maat (Tornhill, "Your Code as a Crime Scene", ch. 8; code-maat
`coupling` analysis): over commits of at most `max_changeset` files (larger ones are bulk edits:
formatting, renames, vendoring), for files a and b with revisions n_a, n_b and n_ab shared
commits, the degree of coupling is n_ab / ((n_a + n_b) / 2). A pair is coupled when the average
revisions (n_a + n_b) / 2 ≥ `min_revs`, n_ab ≥ `min_shared_revs` and the degree ≥
`min_coupling`. Defaults are code-maat's (30, 5, 5, 30 %), from `[analyzers]` in repoguard.toml.

The history is read once (history.py: one streamed `git log`, renames followed, bots dropped).
Only pairs that involve a secret's file are counted, so the cost is linear in history size.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from typing import Iterator

from repoguard.analyzers import _files
from repoguard.analyzers.history import History, load_history
from repoguard.analyzers.incidence import Evidence
from repoguard.analyzers.protocol import EvidenceAnalyzer

NAME = "cochange"


@dataclass(frozen=True)
class Thresholds:
    """code-maat's coupling thresholds (module doc): commits of more than `max_changeset` files are
    skipped; a pair needs average revisions ≥ `min_revs`, shared revisions ≥ `min_shared_revs`
    and degree ≥ `min_coupling` (a fraction, 0–1)."""

    max_changeset: int = 30
    min_revs: int = 5
    min_shared_revs: int = 5
    min_coupling: float = 0.30

    @classmethod
    def from_config(cls, cfg) -> "Thresholds":
        """The thresholds of `[analyzers]` (core.config.AnalyzersConfig, its `cochange_*` keys)."""
        return cls(cfg.cochange_max_changeset, cfg.cochange_min_revs, cfg.cochange_min_shared_revs,
                   cfg.cochange_min_coupling)

    def as_dict(self) -> dict:
        """{"max_changeset", "min_revs", "min_shared_revs", "min_coupling"}."""
        return asdict(self)


@dataclass(frozen=True)
class Coupling:
    """Files `a` and `b`: revisions n_a, n_b, shared revisions and degree (0–1)."""

    a: str
    b: str
    revs_a: int
    revs_b: int
    shared: int

    @property
    def degree(self) -> float:
        """code-maat's degree of coupling, n_ab / ((n_a + n_b) / 2), in 0–1."""
        return self.shared / ((self.revs_a + self.revs_b) / 2)


def couplings(hist: History, targets: set[str], th: Thresholds) -> list[Coupling]:
    """Pairs (a, b), b in `targets`, a ≠ b, that pass the thresholds; sorted by (b, a)."""
    revs: Counter = Counter()
    shared: dict[str, Counter] = defaultdict(Counter)
    for c in hist.commits:
        if len(c.paths) > th.max_changeset:
            continue
        revs.update(c.paths)
        hit = [p for p in c.paths if p in targets]
        for t in hit:
            for p in c.paths:
                if p != t:
                    shared[t][p] += 1
    out = []
    for t in sorted(shared):
        for p, n in sorted(shared[t].items()):
            cp = Coupling(p, t, revs[p], revs[t], n)
            if ((cp.revs_a + cp.revs_b) / 2 >= th.min_revs and n >= th.min_shared_revs
                    and cp.degree >= th.min_coupling):
                out.append(cp)
    return out


def analyze(repo, corpus, config) -> Iterator[Evidence]:
    """Evidence for each corpus file coupled (module doc) with a file of a secret with
    `propagate.cochange` and `paths`, outside those files: one row per (file, secret), citing the
    most coupled of the secret's files (highest degree, then most shared revisions)."""
    secrets = [s for s in config.secrets if s.propagate.cochange and s.paths]
    if not secrets:
        return
    th = Thresholds.from_config(config.analyzers)
    hist = load_history(repo)
    files = set(_files.corpus_files(corpus))
    universe = sorted(files | set(hist.revisions))
    seeds = {s.id: set(_files.secret_files(s, universe)) for s in secrets}
    pairs = couplings(hist, set().union(*seeds.values()), th)
    for s in secrets:
        best: dict[str, Coupling] = {}
        for cp in pairs:
            if cp.b in seeds[s.id] and cp.a in files and cp.a not in seeds[s.id]:
                if cp.a not in best or (cp.degree, cp.shared) > (best[cp.a].degree, best[cp.a].shared):
                    best[cp.a] = cp
        for path in sorted(best):
            cp = best[path]
            yield Evidence(path, s.id, NAME,
                           f"changed together with {cp.b} in {cp.shared} commits (coupling "
                           f"{cp.degree:.0%}; revisions {cp.revs_a} and {cp.revs_b})", (path, cp.b))


ANALYZER = EvidenceAnalyzer(NAME, analyze)
