"""Weighted Poisson sampling of logical batches [Hush Alg. 2, line 7].

At every step each example i joins the logical batch independently with probability ρ_i (the
plan's sampling probability, ρ_i = B·w_i / Σw). The realised batch size is random with mean
B = Σρ_i; it may be zero, and the DP step still runs (it releases pure noise). The privacy
analysis (the Poisson-binomial dominating pair, Hush §4) relies on exactly this independence,
which is why Opacus's uniform-rate sampler is not used.

The sampler is a seeded NumPy PCG64 stream; its state (a small JSON-able dict) is checkpointed so
a resumed run draws the same batches as an uninterrupted one. Under DDP every rank runs the same
sampler with the same seed, so all ranks agree on each logical batch without communicating, and
`shard` gives each rank its slice.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from repoguard.core.errors import PolicyError


class PoissonSampler:
    """Draws one logical batch per step: indices i with U_i < ρ_i, U_i ~ U[0, 1) i.i.d.

    Args:
        rho: sampling probabilities, shape (n_examples,), each in [0, 1].
        seed: seed of the PCG64 stream.

    Raises:
        PolicyError: some ρ_i is outside [0, 1] or not finite (the privacy analysis would not hold).
    """

    def __init__(self, rho: np.ndarray, *, seed: int) -> None:
        rho = np.asarray(rho, dtype=np.float64)
        if rho.ndim != 1:
            raise PolicyError(f"sampler: ρ must be a vector, got shape {rho.shape}")
        if not np.all(np.isfinite(rho)) or np.any(rho < 0) or np.any(rho > 1):
            bad = int(np.sum(~np.isfinite(rho) | (rho < 0) | (rho > 1)))
            raise PolicyError(f"sampler: {bad} sampling probabilities ρ lie outside [0, 1]; "
                              "the privacy bound would not hold")
        self.rho = rho
        self.step = 0
        self._rng = np.random.Generator(np.random.PCG64(seed))

    @property
    def expected_batch_size(self) -> float:
        """E[|batch|] = Σ ρ_i (equals the plan's B up to rounding)."""
        return float(self.rho.sum())

    def sample(self) -> np.ndarray:
        """The next logical batch: sorted example indices (int64), possibly empty."""
        u = self._rng.random(self.rho.shape[0])
        self.step += 1
        return np.flatnonzero(u < self.rho)

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state: the step counter and the PCG64 state."""
        return {"step": self.step, "bit_generator": self._rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()` output: the next `sample()` continues the saved stream."""
        self.step = int(state["step"])
        bg = dict(state["bit_generator"])
        # JSON turns the 128-bit ints into Python ints already; nothing else to convert.
        self._rng.bit_generator.state = bg


def shard(indices: np.ndarray, rank: int, world_size: int) -> np.ndarray:
    """This rank's part of a logical batch (round-robin); empty when the batch is smaller."""
    return indices[rank::world_size]


def micro_batches(indices: np.ndarray, size: int, lengths: np.ndarray | None = None) -> list[np.ndarray]:
    """Split a (rank's) logical batch into physical micro-batches of at most `size` examples.

    With `lengths` (tokens per example), examples are grouped by length first so padding is small;
    grouping changes nothing in the result since per-example gradients are summed. `indices`
    int (B,), `lengths` int (n_examples,) indexed by them. Raises ValueError when `size` < 1.
    """
    if size < 1:
        raise ValueError("micro-batch size must be ≥ 1")
    if lengths is not None and len(indices):
        indices = indices[np.argsort(lengths[indices], kind="stable")]
    return [indices[k:k + size] for k in range(0, len(indices), size)]
