"""Weighted Poisson sampler (Hush Alg. 2 line 7)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from repoguard.core.errors import PolicyError
from repoguard.training.sampler import PoissonSampler, micro_batches, shard

RHO = np.concatenate([np.full(10, 0.01), np.linspace(0.05, 0.9, 30), np.full(5, 1.0), np.zeros(5)])


def _counts(sampler: PoissonSampler, steps: int) -> tuple[np.ndarray, list[int]]:
    counts = np.zeros(len(sampler.rho), dtype=np.int64)
    sizes = []
    for _ in range(steps):
        idx = sampler.sample()
        counts[idx] += 1
        sizes.append(len(idx))
    return counts, sizes


def _chi2_pvalue(counts: np.ndarray, rho: np.ndarray, steps: int) -> float:
    """Each count ~ Binomial(T, ρ_i) independently; Σ (c−Tρ)²/(Tρ(1−ρ)) ~ χ²(k) over 0<ρ<1."""
    m = (rho > 0) & (rho < 1)
    z2 = (counts[m] - steps * rho[m]) ** 2 / (steps * rho[m] * (1 - rho[m]))
    return float(stats.chi2.sf(z2.sum(), m.sum()))


def test_inclusion_frequencies_match_rho():
    steps = 3000
    counts, sizes = _counts(PoissonSampler(RHO, seed=11), steps)
    assert _chi2_pvalue(counts, RHO, steps) > 1e-3
    assert np.all(counts[RHO == 1.0] == steps) and np.all(counts[RHO == 0.0] == 0)
    # Realised batch sizes are random with mean B = Σρ (not fixed at B).
    assert abs(np.mean(sizes) - RHO.sum()) < 4 * np.sqrt((RHO * (1 - RHO)).sum() / steps)
    assert len(set(sizes)) > 3


def test_chi2_detects_a_wrong_rate():
    """The statistic above is not vacuous: frequencies drawn at ρ·1.1 are rejected."""
    steps = 3000
    counts, _ = _counts(PoissonSampler(np.minimum(RHO * 1.1, 1.0), seed=11), steps)
    assert _chi2_pvalue(counts, RHO, steps) < 1e-6


def test_seeded_and_state_round_trips_through_json():
    a = PoissonSampler(RHO, seed=5)
    for _ in range(7):
        a.sample()
    state = json.loads(json.dumps(a.state_dict()))
    b = PoissonSampler(RHO, seed=999)
    b.load_state_dict(state)
    assert b.step == 7
    for _ in range(20):
        assert np.array_equal(a.sample(), b.sample())
    c, d = PoissonSampler(RHO, seed=5), PoissonSampler(RHO, seed=6)
    assert any(not np.array_equal(c.sample(), d.sample()) for _ in range(5))


def test_empty_batches_happen_and_are_empty_arrays():
    s = PoissonSampler(np.full(20, 0.01), seed=0)
    batches = [s.sample() for _ in range(50)]
    empties = [b for b in batches if len(b) == 0]
    assert empties and all(b.dtype == np.int64 for b in empties)
    assert micro_batches(empties[0], 4) == []
    assert len(shard(empties[0], 1, 2)) == 0


@pytest.mark.parametrize("bad", [np.array([0.5, 1.2]), np.array([-0.1, 0.5]), np.array([np.nan])])
def test_rho_outside_unit_interval_is_refused(bad):
    with pytest.raises(PolicyError, match="outside"):
        PoissonSampler(bad, seed=0)


def test_shards_partition_the_batch_and_micro_batches_bound_size():
    idx = np.arange(0, 23) * 3
    parts = [shard(idx, r, 3) for r in range(3)]
    assert sorted(np.concatenate(parts).tolist()) == idx.tolist()
    lengths = np.random.default_rng(0).integers(1, 50, size=100)
    mbs = micro_batches(idx, 5, lengths)
    assert all(len(m) <= 5 for m in mbs)
    assert sorted(np.concatenate(mbs).tolist()) == idx.tolist()
