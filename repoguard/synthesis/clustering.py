"""SecretClustering [SecPE Alg. 2]: the only place training examples touch the synthesis.

Per round, each counted example i (tied examples; with the undetected-secret floor on, untied ones
too) is included with probability ρ_i (`noise.py`); its embedding, ℓ2-normalised and clipped to
R = 1, is added to its nearest anchor (data-independent by default, public with the floor off);
the round releases

    ñ_k = n_k + m_k + N(0, σ_n²)          (n_k public count — 0 by default — m_k included count)
    S̃_k = s_k + Σ_{i→k} x_i + N(0, σ_n² I_d)   (s_k public sum of unit embeddings, 0 by default)

with σ_n = `NoisePlan.noise_std`. `NoisyStats` is everything later stages see of private data;
`rounds.run_rounds` takes only (public anchors, these statistics, generator, embedder).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from repoguard.synthesis.anchors import Anchors, clip_rows, nearest, normalise
from repoguard.synthesis.noise import RADIUS


@dataclass(frozen=True)
class NoisyStats:
    """One round's release: `counts` ñ (K,), `sums` S̃ (K, d). Safe to publish."""

    counts: np.ndarray
    sums: np.ndarray

    def centres(self) -> np.ndarray:
        """The moved anchors: S̃_k / ‖S̃_k‖ (post-processing of the release)."""
        return normalise(self.sums)

    def weights(self) -> np.ndarray:
        """Vote weights max(ñ_k, 0) (post-processing)."""
        return np.maximum(self.counts, 0.0)


def assign(anchors: Anchors, private_embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(nearest anchor per private example, its normalised embedding clipped to R) — private."""
    x = clip_rows(normalise(private_embeddings), RADIUS)
    if len(x) == 0:
        return np.zeros(0, dtype=np.int64), x.reshape(0, anchors.centres.shape[1])
    return nearest(x, anchors.centres), x


def release(anchors: Anchors, labels: np.ndarray, x: np.ndarray, rho: np.ndarray, noise_std: float, *,
            rng: np.random.Generator) -> NoisyStats:
    """One round of SecPE Alg. 2: Poisson-include private example i with probability `rho[i]`,
    add it to anchor `labels[i]`, add N(0, noise_std²) to every count and every sum coordinate.
    `rng` must be secret (OS entropy) for a private run: the guarantee assumes nobody can
    reproduce the inclusions or the noise."""
    k, d = anchors.centres.shape
    if not noise_std > 0:
        raise ValueError("noise_std must be > 0")
    rho = np.asarray(rho, dtype=float)
    if rho.size and (rho.min() < 0 or rho.max() > 1):
        raise ValueError("every inclusion probability must lie in [0, 1]")
    take = rng.random(len(rho)) < rho
    m = np.bincount(labels[take], minlength=k).astype(np.float64)
    s = np.zeros((k, d))
    np.add.at(s, labels[take], x[take])
    counts = anchors.counts + m + rng.normal(0.0, noise_std, size=k)
    sums = anchors.sums + s + rng.normal(0.0, noise_std, size=(k, d))
    return NoisyStats(counts, sums)


def release_rounds(anchors: Anchors, private_embeddings: np.ndarray, rho: np.ndarray, noise_std: float,
                   rounds: int, *, rng: np.random.Generator) -> list[NoisyStats]:
    """The T rounds' releases (fresh inclusions and noise each round). The anchors private
    examples are assigned to are the public ones, so every release can be drawn up front."""
    labels, x = assign(anchors, private_embeddings)
    return [release(anchors, labels, x, rho, noise_std, rng=rng) for _ in range(rounds)]
