"""Example weights by the linear program of Hush eq. 1, and the sweep over its scale c.

    maximise  Σ_i w_i   subject to   Σ_{i∈E_j} w_i ≤ c·cap_j  for every secret j,   0 ≤ w_i ≤ 1.

`cap_j` is μ_j = kl(r_j‖p_j), the binary KL divergence the paper uses [Hush §4], or
η_j = Φ⁻¹(1−p_j) − Φ⁻¹(1−r_j), the Gaussian-DP budget that is linear in group size
[SecPE eq. 6]. Examples tied to no secret keep w = 1 and are not LP variables (the paper dropped
them only for its experiment). The LP only *chooses* weights: privacy comes from the accountant,
which is run on the weights actually used, so an approximate LP solution costs utility, never
privacy. Small instances go to GLOP (simplex, exact vertex), large ones to PDLP (first-order,
fed the sparse matrix directly); both are OR-Tools.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.stats import norm

from repoguard.accounting.bounds import binary_kl
from repoguard.accounting.kinds import Cap

GLOP_MAX_NONZEROS = 200_000        # above this the LP goes to PDLP
CAPS = (Cap.KL.value, Cap.GDP.value)     # the caps the LP can use


def secret_caps(p: np.ndarray, r: np.ndarray, kind: str = "kl") -> np.ndarray:
    """Per-secret budget: `kl` → μ_j = kl(r_j‖p_j) [Hush eq. 1]; `gdp` → η_j = Φ⁻¹(1−p_j) −
    Φ⁻¹(1−r_j) [SecPE eq. 6]. Shapes (n_secrets,). Raises ValueError for an unknown kind."""
    p = np.asarray(p, dtype=float)
    r = np.asarray(r, dtype=float)
    if kind == Cap.KL:
        return binary_kl(r, p)
    if kind == Cap.GDP:
        return norm.isf(p) - norm.isf(r)
    raise ValueError(f"unknown cap {kind!r} (known: {', '.join(CAPS)})")


@dataclass
class LPResult:
    """`w` (n_examples,) in [0, 1]; `solver` "GLOP" | "PDLP" | "none"; `iterations`; `gap` the
    relative primal–dual objective gap (0 for a simplex optimum); `objective` = Σ w over LP
    variables; `seconds` wall time; `n_vars`/`n_constraints`/`nonzeros` the LP size."""

    w: np.ndarray
    solver: str
    iterations: int
    gap: float
    objective: float
    seconds: float
    n_vars: int
    n_constraints: int
    nonzeros: int
    status: str = "optimal"
    extra: dict = field(default_factory=dict)

    def stats(self) -> dict:
        """The solve's figures without the weights: solver, iterations, gap, objective, seconds,
        LP size (variables, constraints, nonzeros), status."""
        return {k: getattr(self, k) for k in ("solver", "iterations", "gap", "objective", "seconds",
                                             "n_vars", "n_constraints", "nonzeros", "status")}


def solve_weights(matrix: sp.spmatrix, caps: np.ndarray, c: float, *, solver: str = "auto",
                  tolerance: float = 1e-4, time_limit_s: float = 600.0,
                  value: np.ndarray | None = None) -> LPResult:
    """Solve Hush eq. 1 for the boolean incidence `matrix` (n_examples × n_secrets) and `caps`
    (n_secrets,), budgets c·cap_j. `solver`: "auto" (GLOP up to GLOP_MAX_NONZEROS, else PDLP),
    "glop" or "pdlp". `tolerance`: PDLP's absolute and relative optimality tolerance (1e-4 costs
    ~1e-5 of Σw on the paper's setting and is 5× faster than 1e-6; the accountant runs on the
    weights used, so this trades utility, never privacy). A PDLP answer is projected onto the
    feasible set (clipped to [0, 1], then each example scaled by its tightest secret's ratio) so
    every constraint holds exactly.
    `value` (n_examples,), when given, replaces the objective Σ w by Σ value·w (`planning.value`:
    what an example teaches); the constraints are unchanged, so privacy is too.
    Raises ValueError for bad shapes, c ≤ 0 or a negative cap; RuntimeError if the solver fails."""
    t0 = time.perf_counter()
    m = sp.csr_matrix(matrix, dtype=np.float64)
    n, k = m.shape
    caps = np.asarray(caps, dtype=float)
    if caps.shape != (k,):
        raise ValueError(f"caps has shape {caps.shape}, expected ({k},)")
    if not (c > 0 and math.isfinite(c)) or np.any(~np.isfinite(caps)) or np.any(caps < 0):
        raise ValueError("c must be > 0 and caps finite and ≥ 0")
    m.data[:] = 1.0
    tied = np.asarray(m.getnnz(axis=1) > 0)
    used = np.asarray(m.getnnz(axis=0) > 0)
    w = np.ones(n)
    a = m[tied][:, used].T.tocsr()           # constraints × LP variables
    b = c * caps[used]
    nv, nc = a.shape[1], a.shape[0]
    if nv == 0:
        return LPResult(w, "none", 0, 0.0, 0.0, time.perf_counter() - t0, 0, 0, 0)
    if value is not None and np.asarray(value).shape != (n,):
        raise ValueError(f"value has shape {np.asarray(value).shape}, expected ({n},)")
    obj = np.ones(nv) if value is None else np.asarray(value, dtype=float)[tied]
    if solver == "auto":
        solver = "glop" if a.nnz <= GLOP_MAX_NONZEROS else "pdlp"
    if solver == "glop":
        x, its, gap, status = _glop(a, b, time_limit_s, obj)
    elif solver == "pdlp":
        x, its, gap, status = _pdlp(a, b, tolerance, time_limit_s, obj)
    else:
        raise ValueError(f"unknown solver {solver!r}")
    x = _project(a, b, x)
    w[tied] = x
    return LPResult(w, solver.upper(), its, gap, float(x.sum()), time.perf_counter() - t0,
                    nv, nc, int(a.nnz), status)


def _project(a: sp.csr_matrix, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Clip to [0, 1] and scale each variable by its tightest constraint's ratio (≤ 1): one pass
    suffices because scaling down never raises a row sum."""
    x = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
    s = a @ x
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(s > b, b / s, 1.0)
    col = a.tocsc()
    # per variable: min ratio over the constraints it appears in (rows of column)
    worst = np.ones(a.shape[1])
    rows = col.indices
    starts = col.indptr
    nz = np.diff(starts) > 0
    if rows.size:
        mins = np.minimum.reduceat(ratio[rows], starts[:-1][nz])
        worst[nz] = mins
    return x * worst


def _glop(a: sp.csr_matrix, b: np.ndarray, time_limit_s: float, value: np.ndarray):
    from ortools.linear_solver import pywraplp

    s = pywraplp.Solver.CreateSolver("GLOP")
    s.SetTimeLimit(int(time_limit_s * 1000))
    xs = [s.NumVar(0.0, 1.0, "") for _ in range(a.shape[1])]
    for j in range(a.shape[0]):
        lo, hi = a.indptr[j], a.indptr[j + 1]
        ct = s.Constraint(-s.infinity(), float(b[j]))
        for i in a.indices[lo:hi]:
            ct.SetCoefficient(xs[i], 1.0)
    obj = s.Objective()
    for v, coef in zip(xs, value):
        obj.SetCoefficient(v, float(coef))
    obj.SetMaximization()
    status = s.Solve()
    if status != pywraplp.Solver.OPTIMAL:
        raise RuntimeError(f"GLOP did not reach an optimum (status {status})")
    x = np.array([v.solution_value() for v in xs])
    return x, int(s.iterations()), 0.0, "optimal"


def _pdlp(a: sp.csr_matrix, b: np.ndarray, tol: float, time_limit_s: float, value: np.ndarray):
    from ortools.pdlp import solve_log_pb2, solvers_pb2
    from ortools.pdlp.python import pdlp

    nc, nv = a.shape
    qp = pdlp.QuadraticProgram()
    qp.objective_vector = -np.asarray(value, dtype=float)    # PDLP minimises
    qp.constraint_matrix = a.tocsc()
    qp.constraint_lower_bounds = np.full(nc, -np.inf)
    qp.constraint_upper_bounds = b.astype(float)
    qp.variable_lower_bounds = np.zeros(nv)
    qp.variable_upper_bounds = np.ones(nv)
    params = solvers_pb2.PrimalDualHybridGradientParams()
    opt = params.termination_criteria.simple_optimality_criteria
    opt.eps_optimal_absolute = tol
    opt.eps_optimal_relative = tol
    params.termination_criteria.time_sec_limit = time_limit_s
    params.num_threads = 2
    res = pdlp.primal_dual_hybrid_gradient(qp, params)
    log = res.solve_log
    reason = solve_log_pb2.TerminationReason.Name(log.termination_reason)
    if log.termination_reason not in (solve_log_pb2.TERMINATION_REASON_OPTIMAL,
                                      solve_log_pb2.TERMINATION_REASON_TIME_LIMIT,
                                      solve_log_pb2.TERMINATION_REASON_ITERATION_LIMIT):
        raise RuntimeError(f"PDLP failed: {reason}")
    gap = float("nan")
    for ci in log.solution_stats.convergence_information:
        po, do = -ci.primal_objective, -ci.dual_objective
        gap = abs(po - do) / max(1.0, abs(po) + abs(do))
        break
    status = "optimal" if log.termination_reason == solve_log_pb2.TERMINATION_REASON_OPTIMAL else reason.lower()
    return np.asarray(res.primal_solution), int(log.iteration_count), gap, status


# -- the c sweep ----------------------------------------------------------------------------------
SWEEP = tuple(2.0 ** k for k in range(-6, 5))


@dataclass
class SweepRow:
    """One c of the sweep [Hush Fig. 1a/1c]: `frac_positive` of examples with w > 0, `sum_w`,
    `sigma` the calibrated noise multiplier, `score` = Σw/σ (the rule below), `lp` solver stats."""

    c: float
    frac_positive: float
    sum_w: float
    sigma: float
    score: float
    lp: dict
    # σ the declared secrets alone need (sigma includes the floor); None where the floor set sigma
    # and this c cannot be the one the rule picks without the floor (not calibrated, issue 45)
    sigma_secrets: float | None = None


def pick_c(rows: list[SweepRow]) -> SweepRow:
    """The rule: maximise Σw/σ. The averaged clipped gradient is (Σ_i∈batch g_i + N(0, σ²C²))/B
    with E|batch| = B and batches drawn ∝ w, so at fixed B the expected signal is fixed while the
    corpus covered grows with Σw and the noise grows with σ; Σw/σ is the signal-to-noise of the
    data actually seen per unit noise. Ties go to the smaller c (less weight near the caps).
    Rows with an infinite σ (no noise meets the targets) never win. Raises ValueError if none is
    finite."""
    ok = [r for r in rows if math.isfinite(r.sigma) and r.sigma > 0]
    if not ok:
        raise ValueError("no c in the sweep gives a finite noise multiplier")
    best = max(r.score for r in ok)
    return min((r for r in ok if r.score >= best * (1 - 1e-12)), key=lambda r: r.c)
