"""The c sweep with the undetected floor on (issue 45): a c whose secrets pass at the floor's σ
takes the floor's σ without calibrating them, and the c the rule would pick without the floor
is still the one a full calibration of every row picks."""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from repoguard.accounting.calibrate import calibrate
from repoguard.analyzers.incidence import Incidence, Secret
from repoguard.core.config import Undetected
from repoguard.planning.plan import build_plan
from repoguard.accounting.spending import Spent
from repoguard.planning.undetected import FloorAccount, untied_rho
from repoguard.planning.weighting import SweepRow, pick_c, secret_caps, solve_weights

B, T = 20.0, 10
FLOOR = Undetected(1, 1e-10, 1e-3)
# three c: two the floor sets (one of them calibrated for the c without the floor), one the secrets set
SWEEP = (2.0, 8.0, 32.0)


def _incidence() -> Incidence:
    """400 examples: two path secrets (40 and 12 examples), four single-example credentials at
    different priors (a short password has a larger one), the rest untied."""
    secrets = [Secret("path-a", "declared", 1e-10, 1e-3), Secret("path-b", "declared", 1e-10, 1e-3)]
    rows, cols = list(range(40)), [0] * 40
    rows += list(range(40, 52))
    cols += [1] * 12
    for j, prior in enumerate((1e-10, 1e-8, 2e-7, 1e-10)):
        secrets.append(Secret(f"credential:{j}", "credential", prior, 1e-3))
        rows.append(60 + 7 * j)
        cols.append(len(secrets) - 1)
    m = sp.csr_matrix((np.ones(len(rows), bool), (rows, cols)), shape=(400, len(secrets)))
    return Incidence([f"ex{i}" for i in range(400)], secrets, m)


def _full_rows(inc: Incidence) -> list[SweepRow]:
    """Every swept c calibrated in full: σ_secrets, σ_floor and the row σ = max of both."""
    p = np.array([s.p for s in inc.secrets])
    r = np.array([s.r for s in inc.secrets])
    csc = inc.matrix.tocsc()
    cols = [csc.indices[csc.indptr[j]:csc.indptr[j + 1]] for j in range(len(p))]
    acct = FloorAccount(FLOOR, FLOOR.r, T, method="best", adjacency="zero-out",
                        alphas=__import__("repoguard.accounting.divergences", fromlist=["x"]).DEFAULT_ALPHAS,
                        spent=Spent())
    rows = []
    for c in SWEEP:
        lp = solve_weights(inc.matrix, secret_caps(p, r, "kl"), c)
        sw = float(lp.w.sum())
        rho = np.minimum(B * lp.w / sw, 1.0)
        own = calibrate([rho[ix] for ix in cols], p, r, T).sigma
        sig = max(own, acct.sigma(untied_rho(inc.matrix, rho)))
        rows.append(SweepRow(c, 0.0, sw, sig, sw / sig, {}, sigma_secrets=own))
    return rows


def test_rows_the_floor_sets_skip_the_secrets_calibration_and_keep_the_choice():
    inc = _incidence()
    plan = build_plan(inc, batch_size=B, steps=T, floor=FLOOR, sweep=SWEEP)
    full = _full_rows(inc)
    rows = plan.extra["sweep"]
    assert [r["c"] for r in rows] == list(SWEEP)
    for got, ref in zip(rows, full):
        # the row's σ is the floor's where the secrets pass there (within the search's 1e-5 of
        # a full calibration), else the secrets' own
        assert got["sigma"] <= ref.sigma * (1 + 1e-9)
        assert got["sigma"] >= ref.sigma / (1 + 2e-5)
    floor_rows = [r for r in rows if r["sigma_secrets"] is None]
    assert floor_rows, "some c should take the floor's σ without calibrating its secrets"
    assert any(r["sigma"] == r["sigma_secrets"] for r in rows), "some c should be set by the secrets"
    # the c without the floor: the one the rule picks on every row's full σ_secrets
    want = pick_c([SweepRow(r.c, 0.0, r.sum_w, r.sigma_secrets, r.sum_w / r.sigma_secrets, {}) for r in full]).c
    assert plan.extra["floor_bought"]["c_without_floor"] == want
    # the plan itself: every target met at the plan's σ, the floor included
    assert all(s.achieved_bound <= s.r * (1 + 1e-9) for s in plan.secrets)
    fl = plan.extra["undetected_floor"]
    assert fl["meets_r"] and plan.sigma >= fl["sigma_floor"] * (1 - 1e-9)
    assert math.isfinite(plan.sigma)
