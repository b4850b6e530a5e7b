"""Anchors [SecPE Alg. 2, lines 1–3]: K-means on ℓ2-normalised embeddings.

Two sources. By default (undetected-secret floor on) `generated_anchors`: the embeddings of the
generator's own initial random samples, which never saw the repository, so the anchors are
data-independent and *every* training example (untied ones too) reaches the output only through
`clustering.NoisyStats`. With the floor off, the paper's `public_anchors`: the public examples
(tied to no secret, not held out, credentials redacted) in the clear, with their counts and sums
as the base of the release; untied code then gets no guarantee (no floor; `synthesize.py` says so
in every output).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def normalise(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit ℓ2 norm (a zero row stays zero). Shape (n, d) → (n, d), float64."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"embeddings must be 2-d, got shape {x.shape}")
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, n, out=np.zeros_like(x), where=n > 0)


def clip_rows(x: np.ndarray, radius: float = 1.0) -> np.ndarray:
    """Rows whose ℓ2 norm exceeds `radius` scaled onto the ball of that radius [SecPE Alg. 2, R]."""
    x = np.asarray(x, dtype=np.float64)
    n = np.linalg.norm(x, axis=1, keepdims=True)
    scale = np.minimum(1.0, radius / np.maximum(n, 1e-300))
    return x * scale


def nearest(points: np.ndarray, centres: np.ndarray, *, block: int = 4096) -> np.ndarray:
    """Index of the nearest centre (largest inner product: both sides unit-norm, so this is the
    smallest Euclidean distance) for every row of `points`. O(n·K·d), in blocks of `block` rows."""
    out = np.empty(len(points), dtype=np.int64)
    for lo in range(0, len(points), block):
        out[lo:lo + block] = np.argmax(points[lo:lo + block] @ centres.T, axis=1)
    return out


def kmeans(x: np.ndarray, k: int, *, rng: np.random.Generator, iters: int = 50, tol: float = 1e-7
           ) -> np.ndarray:
    """Spherical K-means (k-means++ seeding, Lloyd iterations, centres re-normalised): `k` unit
    centres (k, d) for unit rows `x` (n, d). `k` is capped at the number of distinct rows. An
    emptied cluster is re-seeded at the row farthest from its centre."""
    n = len(x)
    if n == 0:
        raise ValueError("k-means needs at least one point")
    k = int(min(k, len(np.unique(np.round(x, 12), axis=0))))
    # k-means++ on squared distance 2 − 2⟨x, c⟩
    centres = [x[rng.integers(n)]]
    d2 = np.maximum(2 - 2 * x @ centres[0], 0)
    for _ in range(1, k):
        tot = d2.sum()
        i = int(rng.choice(n, p=d2 / tot)) if tot > 0 else int(rng.integers(n))
        centres.append(x[i])
        d2 = np.minimum(d2, np.maximum(2 - 2 * x @ x[i], 0))
    c = np.array(centres)
    for _ in range(iters):
        lab = nearest(x, c)
        new = np.zeros_like(c)
        np.add.at(new, lab, x)
        empty = np.bincount(lab, minlength=k) == 0
        if empty.any():
            far = np.argsort(np.einsum("ij,ij->i", x, c[lab]))[: int(empty.sum())]
            new[empty] = x[far]
        new = normalise(new)
        shift = float(np.max(np.linalg.norm(new - c, axis=1)))
        c = new
        if shift < tol:
            break
    return c


@dataclass(frozen=True)
class Anchors:
    """The public anchors: `centres` (K, d) unit vectors; `counts` n_k (K,) public examples per
    anchor; `sums` (K, d) the sum of those examples' unit embeddings. All built from public data."""

    centres: np.ndarray
    counts: np.ndarray
    sums: np.ndarray

    @property
    def k(self) -> int:
        """K, the number of anchors."""
        return len(self.centres)


def public_anchors(public_embeddings: np.ndarray, k: int, *, rng: np.random.Generator) -> Anchors:
    """[SecPE Alg. 2 lines 1–3] K-means anchors of the ℓ2-normalised public embeddings, with the
    public counts n_k and sums. Raises ValueError when there is no public example."""
    x = normalise(public_embeddings)
    if len(x) == 0:
        raise ValueError("no public example: anchors need examples tied to no secret")
    c = kmeans(x, k, rng=rng)
    lab = nearest(x, c)
    counts = np.bincount(lab, minlength=len(c)).astype(np.float64)
    sums = np.zeros_like(c)
    np.add.at(sums, lab, x)
    return Anchors(c, counts, sums)


def generated_anchors(sample_embeddings: np.ndarray, k: int, *, rng: np.random.Generator) -> Anchors:
    """K-means anchors of the generator's own samples (data-independent), with zero counts and
    sums: the release then carries the training examples' contributions and the noise only.
    Raises ValueError when there is no sample."""
    x = normalise(sample_embeddings)
    if len(x) == 0:
        raise ValueError("no generated sample to build the anchors from")
    c = kmeans(x, k, rng=rng)
    return Anchors(c, np.zeros(len(c)), np.zeros_like(c))
