"""Noise calibration: the smallest σ that keeps every secret's reconstruction bound ≤ its target
[Hush Alg. 2 lines 4–5: σ_j = min{σ : bound_j(σ) ≤ r_j}, σ = max_j σ_j].

The bound of secret j (Hush Lemma 3.2, `bounds.py`) is computed from the divergences of its
dominating pair (`divergences.py`), composed over T steps and added to what the ledger says the
secret already spent in earlier runs. Larger σ is post-processing (more Gaussian noise), so every
bound decreases in σ and σ_j can be found by bisection on log σ.

Work is shared three ways: secrets with the same multiset of ρ share one divergence evaluation
per σ; the expensive bisection runs only for secrets that fail at the current maximum (groups
are visited in decreasing order of a cheap proxy, so after the first few the current σ already
passes and one evaluation, reused for the final report, is all a group costs); those single
evaluations run vectorised over thousands of groups at once (`batch.py`); pass/fail is decided on
divergences against per-secret thresholds, never by inverting bounds; and Rényi orders that
cannot certify a target are skipped inside the quadrature.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from repoguard.accounting.bounds import kl_bound, renyi_bound
from repoguard.accounting.batch import batch_mixtures, batch_step_divergences
from repoguard.accounting.divergences import ADJACENCIES, DEFAULT_ALPHAS, Mixture, step_divergences

METHODS = ("best", "kl", "renyi")
SCREEN = 128             # groups checked one by one before the vectorised pass
PREFETCH = 4096          # groups per vectorised check
SIGMA_MAX = 1e6
SIGMA_NONE = 1e-3         # reported when no secret has an example with ρ > 0
REL_TOL = 1e-5           # bisection stops when σ_hi/σ_lo − 1 < REL_TOL


class Infeasible(ValueError):
    """No σ meets the targets of `secrets` (indices): what they already spent is too much."""

    def __init__(self, secrets: list[int]) -> None:
        super().__init__(f"{len(secrets)} secret(s) cannot meet their target at any noise level")
        self.secrets = secrets


@dataclass
class SecretEval:
    """Per secret at one σ: `bound` (cumulative, incl. spent), `binding` ("kl" | "renyi:α"),
    `kl` and `renyi` (n_alpha,) this run's composed divergences (max of both directions, nats)."""

    bound: np.ndarray
    binding: list[str]
    kl: np.ndarray
    renyi: np.ndarray


@dataclass
class Calibration:
    """`sigma` the calibrated noise multiplier; `evals` per-secret results at `sigma`;
    `alphas` the Rényi orders; `stats` work counters (groups, divergence evaluations)."""

    sigma: float
    evals: SecretEval
    alphas: tuple[float, ...]
    stats: dict = field(default_factory=dict)


def _hellinger_target(r: np.ndarray, p: np.ndarray, al: np.ndarray) -> np.ndarray:
    """Total D_α at which the Rényi bound equals r: log(r^α p^{1−α} + (1−r)^α (1−p)^{1−α})/(α−1)."""
    A = al[None, :]
    r, p = r[:, None], p[:, None]
    v = np.logaddexp(A * np.log(r) + (1 - A) * np.log(p), A * np.log1p(-r) + (1 - A) * np.log1p(-p))
    return v / (A - 1)


class _Group:
    """Secrets sharing one ρ multiset; caches the last evaluation."""

    def __init__(self, mix: Mixture, members: np.ndarray, lam: float) -> None:
        self.mix = mix
        self.members = members
        self.lam = lam
        self.cache: tuple[float, tuple[float, np.ndarray]] | None = None


class _Calibrator:
    def __init__(self, groups, priors, targets, steps, method, adjacency, alphas, spent_kl, spent_renyi):
        if method not in METHODS:
            raise ValueError(f"unknown accountant {method!r} (known: {', '.join(METHODS)})")
        if adjacency not in ADJACENCIES:
            raise ValueError(f"unknown adjacency {adjacency!r}")
        self.groups = groups
        self.p, self.r = priors, targets
        self.steps = steps
        self.method = method
        self.s = ADJACENCIES[adjacency]
        self.al = np.asarray(alphas, float)
        self.skl = spent_kl
        self.sre = spent_renyi
        self.evaluations = 0
        # per secret: total divergence at which each bound reaches r, and what is left of it
        from repoguard.weighting import binary_kl
        self.kl_thr = binary_kl(self.r, self.p)
        self.dthr_total = _hellinger_target(self.r, self.p, self.al)
        self.dthr = self.dthr_total - self.sre

    def divergences(self, g: _Group, sigma: float) -> tuple[float, np.ndarray]:
        """This run's composed (KL, Rényi per α) for group g at σ, maximum of both directions."""
        if g.cache is not None and g.cache[0] == sigma:
            return g.cache[1]
        want_renyi = self.method in ("best", "renyi")
        thr = np.max(self.dthr[g.members], axis=0) / self.steps if want_renyi else math.inf
        sd = step_divergences(g.mix, self.s / sigma, self.al if want_renyi else (),
                              kl=self.method in ("best", "kl"),
                              max_divergence=np.maximum(thr, 0.0) * (1 + 1e-9) if want_renyi else math.inf)
        self.evaluations += 1
        kl_run = self.steps * max(sd.kl)
        ren_run = self.steps * np.array([max(sd.renyi[float(a)]) for a in self.al]) if want_renyi \
            else np.full(self.al.size, np.inf)
        g.cache = (sigma, (kl_run, ren_run))
        return kl_run, ren_run

    def prefetch(self, gs: list[_Group], sigma: float) -> None:
        """Evaluate many groups at σ in one vectorised pass (batch.py), filling their caches."""
        gs = [g for g in gs if g.mix.n > 0 and not (g.cache is not None and g.cache[0] == sigma)]
        if not gs:
            return
        want_renyi = self.method in ("best", "renyi")
        al = self.al if want_renyi else np.zeros(0)
        thr = np.stack([np.max(self.dthr[g.members], axis=0) for g in gs]) / self.steps if want_renyi \
            else np.zeros((len(gs), 0))
        kl, ren = batch_step_divergences([g.mix for g in gs], self.s / sigma, al,
                                         np.maximum(thr, 0.0) * (1 + 1e-9), kl=self.method in ("best", "kl"))
        self.evaluations += len(gs)
        kl_run = self.steps * kl.max(axis=1)
        ren_run = self.steps * ren.max(axis=2) if want_renyi else np.full((len(gs), self.al.size), np.inf)
        for i, g in enumerate(gs):
            g.cache = (sigma, (float(kl_run[i]), ren_run[i]))

    def passes(self, g: _Group, sigma: float) -> bool:
        """Every member's bound ≤ r, decided on divergences: bound ≤ r ⇔ D ≤ the divergence at
        which the Bernoulli pair reaches r (both bounds are monotone), with a 1e-9 margin for the
        bisection that later turns divergences into bounds."""
        kl_run, ren_run = self.divergences(g, sigma)
        idx = g.members
        ok = np.zeros(idx.size, dtype=bool)
        if self.method in ("best", "kl"):
            ok |= self.skl[idx] + kl_run <= self.kl_thr[idx] * (1 - 1e-9)
        if self.method in ("best", "renyi"):
            ok |= np.any(self.sre[idx] + ren_run[None, :] <= self.dthr_total[idx] * (1 - 1e-9), axis=1)
        return bool(ok.all())

    def sigma_for(self, g: _Group, lo: float) -> float:
        """Smallest σ (to REL_TOL) at which group g passes, knowing it fails at `lo` (or lo=0)."""
        hi = max(lo * 2, 1e-2) if lo > 0 else 1.0
        while not self.passes(g, hi):
            lo, hi = hi, hi * 4
            if hi > SIGMA_MAX:
                raise Infeasible([int(i) for i in g.members])
        if lo <= 0:
            lo = hi / 4
            while self.passes(g, lo):
                hi, lo = lo, lo / 4
                if lo < 1e-4:
                    return hi
        while hi / lo - 1 > REL_TOL:
            mid = math.sqrt(lo * hi)
            if self.passes(g, mid):
                hi = mid
            else:
                lo = mid
        return hi


def group_secrets(secret_rhos) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Group secrets by their multiset of positive ρ (exact equality). Returns (multisets,
    member index arrays)."""
    keys: dict[bytes, int] = {}
    sets: list[np.ndarray] = []
    members: list[list[int]] = []
    for j, rh in enumerate(secret_rhos):
        r = np.sort(np.asarray(rh, dtype=float))
        r = r[r > 0]
        k = r.tobytes()
        g = keys.get(k)
        if g is None:
            keys[k] = g = len(sets)
            sets.append(r)
            members.append([])
        members[g].append(j)
    return sets, [np.asarray(m, dtype=np.int64) for m in members]


def calibrate(secret_rhos, priors, targets, steps: int, *, method: str = "best",
              adjacency: str = "zero-out", alphas=DEFAULT_ALPHAS, spent_kl=None, spent_renyi=None,
              progress=None) -> Calibration:
    """Calibrate σ for all secrets; see `calibrate_sigma`. Also returns each secret's achieved
    bound at σ, the binding bound and this run's divergences. `spent_kl` (n_secrets,) and
    `spent_renyi` (n_secrets, n_alpha) are earlier runs' divergences from the ledger (nats).
    `progress(done, total)` is called as groups are checked. Raises `Infeasible` naming the
    secrets for which no σ ≤ SIGMA_MAX works; ValueError on bad arguments."""
    p = np.asarray(priors, float)
    r = np.asarray(targets, float)
    ns = len(p)
    if r.shape != (ns,) or len(secret_rhos) != ns:
        raise ValueError("secret_rhos, priors and targets must have one entry per secret")
    if ns and (np.any(~(p > 0)) or np.any(~(r < 1)) or np.any(r <= p)):
        raise ValueError("need 0 < p < r < 1 for every secret")
    if steps < 1:
        raise ValueError("steps must be ≥ 1")
    al = tuple(float(a) for a in alphas)
    skl = np.zeros(ns) if spent_kl is None else np.asarray(spent_kl, float)
    sre = np.zeros((ns, len(al))) if spent_renyi is None else np.asarray(spent_renyi, float)
    sets, members = group_secrets(secret_rhos)
    groups = [_Group(mx, m, float(st.sum())) for mx, m, st in zip(batch_mixtures(sets), members, sets)]
    cal = _Calibrator(groups, p, r, steps, method, adjacency, np.asarray(al), skl, sre)
    # secrets already over budget at σ → ∞ (spent alone breaks the target) are infeasible
    over = _over_budget(cal)
    if over:
        raise Infeasible(over)
    # visit the most demanding groups first: strength λ² over the tightest budget (a proxy only)
    from repoguard.weighting import binary_kl
    budget = np.array([np.min(binary_kl(r[g.members], p[g.members]) - skl[g.members]) for g in groups])
    order = [int(i) for i in np.argsort([-(g.lam ** 2 + 1e-300) / max(b, 1e-300) for g, b in zip(groups, budget)],
                                        kind="stable") if groups[i].mix.n > 0]
    sigma = 0.0
    bisections = 0

    def settle(gis: list[int]) -> None:
        nonlocal sigma, bisections
        for gi in gis:
            g = groups[gi]
            if sigma == 0.0 or not cal.passes(g, sigma):
                sigma = cal.sigma_for(g, sigma)
                bisections += 1

    settle(order[:SCREEN])                       # the likely-binding groups, one by one
    rest = order[SCREEN:]
    for lo in range(0, len(rest), PREFETCH):     # everyone else: one vectorised check each
        chunk = rest[lo:lo + PREFETCH]
        cal.prefetch([groups[i] for i in chunk], sigma)
        settle(chunk)
        if progress is not None:
            progress(min(SCREEN + lo + len(chunk), len(order)), len(order))
    cal.prefetch([groups[i] for i in order], sigma)   # groups last seen at a smaller σ
    if sigma == 0.0:
        sigma = SIGMA_NONE  # no secret has a sampled example: no σ is needed; keep a token one
    evals = _collect(cal, groups, sigma, ns, len(al))
    stats = {"secrets": ns, "groups": len(groups), "evaluations": cal.evaluations, "bisections": bisections}
    return Calibration(float(sigma), evals, al, stats)


def _over_budget(cal: _Calibrator) -> list[int]:
    """Secrets whose earlier spending alone (this run adding nothing) already exceeds r."""
    kb = kl_bound(cal.skl, cal.p)
    rb = renyi_bound(cal.sre, cal.al[None, :], cal.p[:, None]).min(axis=1) if cal.al.size else np.ones_like(kb)
    b = {"best": np.minimum(kb, rb), "kl": kb, "renyi": rb}[cal.method]
    return [int(i) for i in np.nonzero(b > cal.r)[0]]


def _collect(cal: _Calibrator, groups, sigma: float, ns: int, na: int) -> SecretEval:
    """Each secret's cumulative bound at σ, computed for all secrets at once."""
    kl = np.zeros(ns)
    ren = np.zeros((ns, na))
    for g in groups:
        if g.mix.n == 0:
            continue                      # never sampled: this run adds nothing
        kl_run, ren_run = cal.divergences(g, sigma)
        kl[g.members] = kl_run
        ren[g.members] = ren_run
    kb = kl_bound(cal.skl + kl, cal.p) if cal.method in ("best", "kl") else np.ones(ns)
    rb = np.ones(ns)
    j = np.zeros(ns, dtype=int)
    if cal.method in ("best", "renyi") and na:
        tot = cal.sre + ren
        rb_all = np.ones((ns, na))
        # an order whose divergence exceeds the one at which its bound reaches r gives a bound
        # > r: it can never be the reported minimum of a secret that meets its target
        fin = np.isfinite(tot) & (tot <= cal.dthr_total * (1 + 1e-6))
        rows, cols = np.nonzero(fin)
        # coarse bounds for every order pick the order; only that one is refined (both valid)
        rb_all[rows, cols] = renyi_bound(tot[rows, cols], cal.al[cols], cal.p[rows], iters=24)
        j = np.argmin(rb_all, axis=1)
        rb = rb_all[np.arange(ns), j]
        fine = rb < 1.0
        rb[fine] = renyi_bound(tot[fine, j[fine]], cal.al[j[fine]], cal.p[fine])
    use_kl = kb <= rb if cal.method == "best" else np.full(ns, cal.method == "kl")
    bound = np.where(use_kl, kb, rb)
    binding = ["kl" if u else f"renyi:{cal.al[k]:g}" for u, k in zip(use_kl, j)]
    return SecretEval(bound, binding, kl, ren)


def calibrate_sigma(secret_rhos, priors, targets, steps: int, method: str = "best", *,
                    adjacency: str = "zero-out", alphas=DEFAULT_ALPHAS) -> float:
    """The smallest noise multiplier σ (to relative precision 1e-5, rounded up) such that every
    secret j's reconstruction bound after `steps` steps is ≤ targets[j] [Hush Alg. 2 lines 4–5].

    `secret_rhos`: one sequence of sampling probabilities ρ_i (i ∈ E_j) per secret; `priors` p_j
    and `targets` r_j, 0 < p_j < r_j < 1; `method`: "best" (minimum of all bounds), "kl" (the
    paper's) or "renyi" (Hush Lemma 3.2). Raises `Infeasible` or ValueError."""
    return calibrate(secret_rhos, priors, targets, steps, method=method, adjacency=adjacency,
                     alphas=alphas).sigma
