"""The rounds of SecPE [Alg. 3]: generate, embed, vote by nearest noisy anchor, keep the best,
vary them.

`run_rounds` takes only public inputs — the released statistics (`clustering.NoisyStats`, one per
round), a generator, an embedder, public seeds and (default mode) the generator's own initial
samples — so the
synthetic corpus is post-processing of the release: private text reaches it through ñ_k and the
noisy sums and nowhere else (tests/test_synth.py changes a private example and checks exactly this).

Voting. Each noisy anchor k (direction S̃_k/‖S̃_k‖) casts max(ñ_k, 0) votes for its nearest
candidate (PE's nearest-neighbour histogram with the K anchors standing in for the M private
points: O(K·N) similarities instead of O(M·N)); candidates are ranked by votes, ties (most
candidates get none when N > K) broken by affinity = max(ñ_k, 0)·cos(candidate, its nearest
anchor). The top N survive; each gets L variations for the next round.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from repoguard.synthesis.anchors import normalise
from repoguard.synthesis.clustering import NoisyStats


@dataclass
class Candidate:
    """A synthetic text, the round it was generated in (0 = a random sample), and its last
    round's votes and affinity."""

    text: str
    round: int
    score: float = 0.0
    affinity: float = 0.0


@dataclass
class RoundsResult:
    """`kept` the final N candidates, best first; `timings` per round (seconds of generate, embed,
    vote); `population` candidates scored per round."""

    kept: list[Candidate]
    timings: list[dict] = field(default_factory=list)
    population: list[int] = field(default_factory=list)


def vote(stats: NoisyStats, candidate_embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(votes, affinity) per candidate (see the module docstring). O(K·N·d)."""
    a = stats.centres()
    wts = stats.weights()
    c = normalise(candidate_embeddings)
    n = len(c)
    if n == 0:
        return np.zeros(0), np.zeros(0)
    sim = c @ a.T                                   # (N, K)
    votes = np.bincount(np.argmax(sim, axis=0), weights=wts, minlength=n)
    near = np.argmax(sim, axis=1)
    affinity = wts[near] * sim[np.arange(n), near]
    return votes, affinity


def select(stats: NoisyStats, candidates: Sequence[Candidate], embeddings: np.ndarray, keep: int) -> list[Candidate]:
    """The `keep` best candidates by (votes, affinity), their scores set."""
    votes, aff = vote(stats, embeddings)
    for c, v, f in zip(candidates, votes, aff):
        c.score, c.affinity = float(v), float(f)
    order = np.lexsort((-aff, -votes))             # votes first, then affinity
    return [candidates[i] for i in order[:keep]]


def initial_samples(generator, *, n: int, variations: int, seed: int) -> list[str]:
    """Round 0's n·(L+1) random samples, exactly as `run_rounds` draws them for `seed` (public:
    the generator never sees the repository). The default synthesis builds its anchors from
    their embeddings before any release, then hands them back to `run_rounds` as `initial`."""
    rng = np.random.default_rng(seed)
    return list(generator.sample(n * (variations + 1), seed=int(rng.integers(1 << 62))))


def run_rounds(stats: Sequence[NoisyStats], generator, embedder, *, n: int, variations: int, seed: int,
               progress=None, initial: Sequence[str] | None = None, initial_embeddings=None) -> RoundsResult:
    """[SecPE Alg. 3] T = len(stats) rounds. Round 0 scores n·(L+1) random samples (`initial`
    when given: `initial_samples` for the same seed, with their `initial_embeddings` if already
    computed — both public); every round keeps the top `n` by its release's votes; between
    rounds each survivor gets `variations` (L) variations. `seed` drives the generator only
    (public). Returns the last round's survivors."""
    if n < 1 or variations < 0 or not stats:
        raise ValueError("need n ≥ 1, variations ≥ 0 and at least one round")
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    first = int(rng.integers(1 << 62))
    texts = list(initial) if initial is not None else generator.sample(n * (variations + 1), seed=first)
    pop = [Candidate(t, 0) for t in texts]
    gen_s = time.perf_counter() - t0
    out = RoundsResult([])
    kept: list[Candidate] = []
    for t, st in enumerate(stats):
        t1 = time.perf_counter()
        if t == 0 and initial is not None and initial_embeddings is not None:
            emb = np.asarray(initial_embeddings)
        else:
            emb = embedder.embed([c.text for c in pop])
        t2 = time.perf_counter()
        kept = select(st, pop, emb, n)
        t3 = time.perf_counter()
        out.population.append(len(pop))
        vary_s = 0.0
        if t + 1 < len(stats) and variations > 0:
            vs = generator.vary([c.text for c in kept], variations, seed=int(rng.integers(1 << 62)))
            pop = kept + [Candidate(v, t + 1) for group in vs for v in group]
            vary_s = time.perf_counter() - t3
        out.timings.append({"round": t, "generate_s": gen_s + vary_s, "embed_s": t2 - t1, "vote_s": t3 - t2,
                            "total_s": gen_s + vary_s + (t3 - t1)})
        gen_s = 0.0
        if progress is not None:
            progress(t + 1, len(stats))
    out.kept = kept
    return out


def voting_cost(k: int, m: int, n: int, d: int, *, rng: np.random.Generator, repeat: int = 3) -> dict:
    """Seconds of one round's nearest-neighbour voting with K anchors against voting with all M
    examples (PE without anchors), for N candidates in d dimensions. Data-independent: both are
    timed on random unit vectors (the all-M vote is never computed on private data)."""
    cand = normalise(rng.normal(size=(n, d)))

    def timed(rows: int) -> float:
        pts = normalise(rng.normal(size=(rows, d)))
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            for lo in range(0, rows, 4096):
                np.argmax(pts[lo:lo + 4096] @ cand.T, axis=1)
            best = min(best, time.perf_counter() - t0)
        return best

    return {"k": int(k), "m": int(m), "n": int(n), "dim": int(d), "seconds_k_anchors": timed(k),
            "seconds_all_m": timed(m)}
