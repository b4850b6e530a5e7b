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
from repoguard.accounting.divergences import DEFAULT_ALPHAS, Mixture, step_divergences
from repoguard.accounting.kinds import Accountant, Adjacency
from repoguard.accounting.search import narrow
from repoguard.accounting.spending import SpentArrays
from repoguard.accounting.pld import pld_bound
from repoguard.accounting.pld_table import PoissonTable, dominating_lambda, grid_index

METHODS = tuple(a.value for a in Accountant)
PLD_H = (1e-2, 2e-3)     # loss-grid steps of the Neyman–Pearson bound: a cheap screen, then fine
ENVELOPE = 64            # groups per shared Neyman–Pearson certificate
PLD_BUDGET = 2000        # Neyman–Pearson evaluations per calibration; then divergences only
SCREEN = 128             # groups checked one by one before the vectorised pass
PREFETCH = 4096          # groups per vectorised check
SIGMA_MAX = 1e6
SIGMA_MIN = 1e-4          # searches stop here: a secret that passes at SIGMA_MIN gets exactly it
SIGMA_NONE = 1e-3         # reported when no secret has an example with ρ > 0
REL_TOL = 1e-5           # bisection stops when σ_hi/σ_lo − 1 < REL_TOL


class Infeasible(ValueError):
    """No σ meets the targets of `secrets` (indices): what they already spent is too much."""

    def __init__(self, secrets: list[int]) -> None:
        super().__init__(f"{len(secrets)} secret(s) cannot meet their target at any noise level")
        self.secrets = secrets


@dataclass
class SecretEval:
    """Per secret at one σ: `bound` (cumulative, incl. spent), `binding` ("kl" | "renyi:α" |
    "pld:ε" — the Neyman–Pearson bound of `pld.py`, attained at that ε),
    `kl` and `renyi` (n_alpha,) this run's composed divergences (max of both directions, nats)."""

    bound: np.ndarray
    binding: list[str]
    kl: np.ndarray
    renyi: np.ndarray


@dataclass
class Calibration:
    """`sigma` the calibrated noise multiplier; `evals` per-secret results at `sigma`;
    `alphas` the Rényi orders; `stats` work counters (groups, divergence evaluations); `pairs`
    per secret this run's dominating pair (Mixture, a = s/σ, steps), what a later run's
    `SpentArrays.pairs` needs."""

    sigma: float
    evals: SecretEval
    alphas: tuple[float, ...]
    stats: dict = field(default_factory=dict)
    pairs: list = field(default_factory=list)   # per secret: this run's (Mixture, a, steps)


def _hellinger_target(r: np.ndarray, p: np.ndarray, al: np.ndarray) -> np.ndarray:
    """Total D_α at which the Rényi bound equals r: log(r^α p^{1−α} + (1−r)^α (1−p)^{1−α})/(α−1)."""
    A = al[None, :]
    r, p = r[:, None], p[:, None]
    v = np.logaddexp(A * np.log(r) + (1 - A) * np.log(p), A * np.log1p(-r) + (1 - A) * np.log1p(-p))
    return v / (A - 1)


class _Group:
    """Secrets sharing one ρ multiset; caches the last evaluation."""

    def __init__(self, mix: Mixture, members: np.ndarray, lam: float, lam_dom: float = math.inf) -> None:
        self.mix = mix
        self.members = members
        self.lam = lam
        self.lam_dom = lam_dom             # −Σ log(1−ρ): its Poisson law dominates the mixing law
        self.cache: tuple[float, tuple[float, np.ndarray]] | None = None
        self.pld: tuple | None = None      # (σ, bounds, ε per member, fine grid done)
        self.pld_src = ""                  # "table" (Poisson table) or "group" (its own mixture)


class _Calibrator:
    def __init__(self, groups, priors, targets, steps, method, adjacency, alphas, spent_kl, spent_renyi,
                 spent_pairs=None, pld_budget=PLD_BUDGET):
        Accountant.parse(method, "accountant")
        self.groups = groups
        self.p, self.r = priors, targets
        self.steps = steps
        self.method = method
        self.s = Adjacency.parse(adjacency).sensitivity
        self.al = np.asarray(alphas, float)
        self.skl = spent_kl
        self.sre = spent_renyi
        self.evaluations = 0
        # per secret: total divergence at which each bound reaches r, and what is left of it
        from repoguard.accounting.bounds import binary_kl
        self.kl_thr = binary_kl(self.r, self.p)
        self.dthr_total = _hellinger_target(self.r, self.p, self.al)
        self.dthr = self.dthr_total - self.sre
        # the Neyman–Pearson bound composes this run with the earlier runs' pairs; a secret with
        # earlier spending but no recorded pairs uses the divergence bounds alone (pld.py)
        nothing = (self.skl <= 0) & np.all(self.sre <= 0, axis=1)
        self.hist = [() if nothing[j] else (spent_pairs[j] if spent_pairs is not None else None)
                     for j in range(len(self.p))]
        self.fresh = np.array([h is not None for h in self.hist], dtype=bool)
        self.pld_evaluations = 0
        self.pld_budget = pld_budget
        self.pld_refused: set[int] = set()   # groups that needed the bound after the budget was spent
        self.n_max = max([g.mix.n for g in groups] + [1])
        self.eps_max = float(np.log(1.0 / self.p.min())) if len(self.p) else 1.0
        self.table: PoissonTable | None = None
        self.table_evaluations = 0

    def table_bound(self, g: _Group, sigma: float, need: np.ndarray) -> bool:
        """Try to certify g at σ by the Poisson table (`pld_table.py`): coarse loss grid, then
        fine; on success g.pld holds the table's bounds (valid upper bounds) and True is
        returned. Only for groups whose members have no earlier runs."""
        if self.method != "best" or not math.isfinite(g.lam_dom) or g.lam_dom <= 0 \
                or not all(self.hist[j] == () for j in g.members):
            return False
        if self.table is None or self.table.a != self.s / sigma:
            if self.table is not None:
                self.table_evaluations += self.table.evaluations
            self.table = PoissonTable(self.s / sigma, self.steps, self.n_max, self.eps_max)
        k = int(grid_index(g.lam_dom))
        for h in PLD_H:
            b, e = self.table.bound(k, self.p[g.members], h)
            if np.all(b <= need):
                g.pld = (sigma, b, e, False)     # valid, not the tightest: never 'fine'
                g.pld_src = "table"
                return True
        return False

    def pld(self, g: _Group, sigma: float, *, need=None) -> tuple[np.ndarray, np.ndarray]:
        """Neyman–Pearson bounds (and their ε) of g's members at σ, composed with each member's
        earlier runs; +inf for members whose earlier runs are unknown. With `need` (per-member
        targets) a coarse grid is tried first and the fine one only if the coarse one misses a
        target; both are valid upper bounds."""
        fresh = self.fresh[g.members]
        c = g.pld
        if c is not None and c[0] == sigma and (c[3] or (need is not None and np.all(c[1][fresh] <= need[fresh]))):
            return c[1], c[2]
        # a certificate found at a smaller σ still holds: more noise is post-processing, so the
        # bound at σ is at most the one computed at σ' ≤ σ (an upper bound there)
        if c is not None and need is not None and c[0] <= sigma and np.all(c[1][fresh] <= need[fresh]):
            return c[1], c[2]
        if need is not None and self.table_bound(g, sigma, need):
            return g.pld[1], g.pld[2]
        out, at = np.full(g.members.size, np.inf), np.zeros(g.members.size)
        if self.pld_evaluations >= self.pld_budget:
            self.pld_refused.add(id(g))
            return out, at                      # budget spent: no certificate (σ stays valid)
        fine = True
        by_hist: dict[int, list[int]] = {}
        for k in np.nonzero(fresh)[0]:                   # members sharing a history share the work
            by_hist.setdefault(id(self.hist[g.members[k]]), []).append(int(k))
        for ks in by_hist.values():
            ks = np.asarray(ks)
            hist = self.hist[g.members[ks[0]]]
            for h in (PLD_H if need is not None else PLD_H[-1:]):
                b, e = pld_bound(g.mix, self.s / sigma, self.steps, self.p[g.members[ks]], h=h, history=hist)
                self.pld_evaluations += 1
                better = b < out[ks]
                out[ks] = np.where(better, b, out[ks])
                at[ks] = np.where(better, e, at[ks])
                if need is not None and np.all(out[ks] <= need[ks]):
                    fine = fine and h == PLD_H[-1]
                    break
        g.pld = (sigma, out, at, fine)
        g.pld_src = "group"
        return out, at

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

    def fdiv_ok(self, g: _Group, sigma: float) -> np.ndarray:
        """Per member: is the KL or a Rényi bound ≤ r? Decided on divergences: bound ≤ r ⇔ D ≤
        the divergence at which the Bernoulli pair reaches r (both bounds are monotone), with a
        1e-9 margin for the bisection that later turns divergences into bounds."""
        kl_run, ren_run = self.divergences(g, sigma)
        idx = g.members
        ok = np.zeros(idx.size, dtype=bool)
        if self.method in ("best", "kl"):
            ok |= self.skl[idx] + kl_run <= self.kl_thr[idx] * (1 - 1e-9)
        if self.method in ("best", "renyi"):
            ok |= np.any(self.sre[idx] + ren_run[None, :] <= self.dthr_total[idx] * (1 - 1e-9), axis=1)
        return ok

    def passes(self, g: _Group, sigma: float) -> bool:
        """Every member's bound ≤ r: by divergences, else (method "best") by the Neyman–Pearson
        bound where every failing member's earlier runs are known."""
        ok = self.fdiv_ok(g, sigma)
        idx = g.members
        if self.method == "best" and not ok.all() and self.fresh[idx[~ok]].all():
            b, _ = self.pld(g, sigma, need=self.r[idx] * (1 - 1e-9))
            ok |= b <= self.r[idx] * (1 - 1e-9)
        return bool(ok.all())

    def certify(self, gs: list[_Group], sigma: float) -> None:
        """Neyman–Pearson certificates for many groups at σ, shared: groups whose divergence
        bounds miss a target and whose members have no earlier runs are taken in batches of
        similar strength, and one bound is computed for the batch's envelope mixture (survival
        function P(M ≥ k) the maximum of the members'); it stochastically dominates each
        member's, so its bound holds for every member [divergences.py docstring]. A batch
        that misses a target is split in two, down to single groups."""
        if self.method != "best":
            return
        todo = []
        for g in gs:
            if g.mix.n == 0 or (g.pld is not None and g.pld[0] == sigma):
                continue
            idx = g.members
            if not all(self.hist[j] == () for j in idx) or self.fdiv_ok(g, sigma).all():
                continue
            need = self.r[idx] * (1 - 1e-9)
            if g.pld is not None and g.pld[0] <= sigma and np.all(g.pld[1] <= need):
                continue                    # certified at a smaller σ: holds at σ (see `pld`)
            if self.table_bound(g, sigma, need):
                continue
            todo.append(g)
        todo.sort(key=lambda g: -g.lam)
        for lo in range(0, len(todo), ENVELOPE):
            self._certify(todo[lo:lo + ENVELOPE], sigma)

    def _certify(self, gs: list[_Group], sigma: float) -> None:
        if self.pld_evaluations >= self.pld_budget:
            self.pld_refused.update(id(g) for g in gs)
            return
        if len(gs) == 1:
            self.pld(gs[0], sigma, need=self.r[gs[0].members] * (1 - 1e-9))
            return
        idx = np.concatenate([g.members for g in gs])
        need = self.r[idx] * (1 - 1e-9)
        env = envelope([g.mix for g in gs])
        for h in PLD_H:
            b, e = pld_bound(env, self.s / sigma, self.steps, self.p[idx], h=h)
            self.pld_evaluations += 1
            if np.all(b <= need):
                k = 0
                for g in gs:
                    n = g.members.size
                    g.pld = (sigma, b[k:k + n], e[k:k + n], h == PLD_H[-1])
                    g.pld_src = "envelope"
                    k += n
                return
        half = len(gs) // 2
        self._certify(gs[:half], sigma)
        self._certify(gs[half:], sigma)

    def sigma_for(self, g: _Group, lo: float) -> float:
        """Smallest σ (to REL_TOL) at which group g passes, knowing it fails at `lo` (or lo=0):
        bisection on the divergence bounds, then, where the Neyman–Pearson bound may certify a
        smaller σ, a root search on it below that."""
        idx = g.members
        np_ok = self.method == "best" and self.fresh[idx].all()
        try:
            hi = self._bisect(g, lo, lambda x: bool(self.fdiv_ok(g, x).all()))
        except Infeasible:
            if not np_ok:
                raise
            # earlier runs spent more divergence than is left, yet their composed PLD may not
            return self._bisect(g, lo, lambda x: self.passes(g, x))
        if not np_ok:
            return hi
        need = self.r[idx] * (1 - 1e-9)

        def excess(x: float) -> float:          # > 0: some member misses its target
            b, _ = self.pld(g, x)
            return float(np.max(np.log(b) - np.log(need)))

        f_hi = excess(hi)
        if f_hi > 0:
            return hi
        lo2 = max(lo, hi / 2, SIGMA_MIN)
        f_lo = excess(lo2)
        while f_lo <= 0 and lo2 > max(lo, SIGMA_MIN):
            hi, f_hi = lo2, f_lo
            lo2 = max(lo, lo2 / 2, SIGMA_MIN)
            f_lo = excess(lo2)
        if f_lo <= 0:
            return lo2      # the bracket's floor (lo, or SIGMA_MIN): not where the halving stopped
        # Illinois regula falsi on log σ: the bound is smooth and monotone in σ
        x0, x1, f0, f1, side = math.log(lo2), math.log(hi), f_lo, f_hi, 0
        while x1 - x0 > REL_TOL:
            x = x1 - f1 * (x1 - x0) / (f1 - f0)
            x = min(max(x, x0 + 0.05 * (x1 - x0)), x1 - 0.05 * (x1 - x0))
            f = excess(math.exp(x))
            if f <= 0:
                x1, f1 = x, f
                if side == 1:
                    f0 /= 2
                side = 1
            else:
                x0, f0 = x, f
                if side == -1:
                    f1 /= 2
                side = -1
        return math.exp(x1)

    def _bisect(self, g: _Group, lo: float, ok) -> float:
        """Smallest σ (to REL_TOL) with ok(σ), knowing not ok(lo) (or lo = 0)."""
        hi = max(lo * 2, 1e-2) if lo > 0 else 1.0
        while not ok(hi):
            lo, hi = hi, hi * 4
            if hi > SIGMA_MAX:
                raise Infeasible([int(i) for i in g.members])
        if lo <= 0:
            lo = max(hi / 4, SIGMA_MIN)
            while ok(lo):
                if lo <= SIGMA_MIN:
                    return SIGMA_MIN
                hi, lo = lo, max(lo / 4, SIGMA_MIN)
        return narrow(ok, lo, hi, rel_tol=REL_TOL)[1]


def envelope(mixes: list[Mixture]) -> Mixture:
    """The mixing law whose survival function P(M ≥ k) is the pointwise maximum of the given
    laws' (a valid law: the maximum of non-increasing functions in [0, 1] is one); it
    stochastically dominates each of them."""
    top = max(int(m.m.max()) for m in mixes)
    surv = np.zeros(top + 2)
    for mx in mixes:
        pmf = np.zeros(top + 2)
        pmf[mx.m] = np.exp(mx.logw)
        surv = np.maximum(surv, np.cumsum(pmf[::-1])[::-1])
    surv[0] = max(surv[0], 1.0)
    pmf = np.clip(surv[:-1] - surv[1:], 0.0, None)
    keep = pmf > 0
    with np.errstate(divide="ignore"):
        return Mixture(np.nonzero(keep)[0].astype(np.int64), np.log(pmf[keep]), max(m.n for m in mixes))


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
              adjacency: str = "zero-out", alphas=DEFAULT_ALPHAS, spent: SpentArrays | None = None,
              progress=None, pld_budget: int = PLD_BUDGET) -> Calibration:
    """Calibrate σ for all secrets; see `calibrate_sigma`. Also returns each secret's achieved
    bound at σ, the binding bound and this run's divergences. `spent` (`spending.SpentArrays`,
    aligned with the secrets; None = nothing spent) holds the earlier runs' divergences from the
    ledger (kl (n_secrets,), renyi (n_secrets, n_alpha), nats) and each secret's earlier pairs
    for the Neyman–Pearson bound (None where unknown: that secret then uses divergences only);
    `pld_budget` caps the Neyman–Pearson evaluations (a count, so results are reproducible):
    past it, secrets are certified by divergences alone and σ can only come out larger.
    `progress(done, total)` is called as groups are checked. Raises `Infeasible` naming the
    secrets for which no σ ≤ SIGMA_MAX works; ValueError on bad arguments."""
    cal, groups = _setup(secret_rhos, priors, targets, steps, method, adjacency, alphas, spent, pld_budget)
    p, r, skl, al, ns = cal.p, cal.r, cal.skl, tuple(float(a) for a in cal.al), len(cal.p)
    # secrets already over budget at σ → ∞ (spent alone breaks the target) are infeasible
    over = _over_budget(cal)
    if over:
        raise Infeasible(over)
    # visit the most demanding groups first: strength λ² over the tightest budget (a proxy only)
    from repoguard.accounting.bounds import binary_kl
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
        cal.certify([groups[i] for i in chunk], sigma)
        settle(chunk)
        if progress is not None:
            progress(min(SCREEN + lo + len(chunk), len(order)), len(order))
    cal.prefetch([groups[i] for i in order], sigma)   # groups last seen at a smaller σ
    cal.certify([groups[i] for i in order], sigma)
    if sigma == 0.0:
        sigma = SIGMA_NONE  # no secret has a sampled example: no σ is needed; keep a token one
    evals = _collect(cal, groups, sigma, ns, len(al))
    pairs: list = [None] * ns
    for g in groups:
        for j in g.members:
            pairs[j] = (g.mix, cal.s / sigma, steps)
    stats = {"secrets": ns, "groups": len(groups), "evaluations": cal.evaluations, "bisections": bisections,
             "pld_evaluations": cal.pld_evaluations, "pld_budget_spent": cal.pld_evaluations >= cal.pld_budget,
             "pld_refused_groups": len(cal.pld_refused),
             "pld_table_evaluations": cal.table_evaluations + (cal.table.evaluations if cal.table else 0),
             "pld_certified_by": {src: sum(1 for g in groups if g.pld_src == src and g.pld is not None
                                           and any(evals.binding[j].startswith("pld") for j in g.members))
                                  for src in ("table", "envelope", "group")}}
    return Calibration(float(sigma), evals, al, stats, pairs)


def passes_at(secret_rhos, priors, targets, steps: int, sigma: float, *, method: str = "best",
              adjacency: str = "zero-out", alphas=DEFAULT_ALPHAS, spent: SpentArrays | None = None,
              pld_budget: int = PLD_BUDGET) -> bool:
    """Does σ keep every secret's cumulative bound ≤ its target? The check `calibrate` makes at
    each σ it tries (divergences, vectorised; the Neyman–Pearson bound where they miss a target,
    shared by envelope), without searching for the smallest σ: what a caller needs when it only
    compares the secrets' σ against a noise level it already has (the plan's floor, issue 45).
    Arguments as `calibrate`; False for secrets whose earlier spending alone breaks the target.
    Raises ValueError on bad arguments."""
    cal, groups = _setup(secret_rhos, priors, targets, steps, method, adjacency, alphas, spent, pld_budget)
    if _over_budget(cal):
        return False
    gs = [g for g in groups if g.mix.n > 0]
    cal.prefetch(gs, sigma)
    cal.certify(gs, sigma)
    return all(cal.passes(g, sigma) for g in gs)


def _setup(secret_rhos, priors, targets, steps, method, adjacency, alphas, spent: SpentArrays | None,
           pld_budget) -> tuple[_Calibrator, list[_Group]]:
    """Validated arguments as a `_Calibrator` over the secrets' ρ-multiset groups."""
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
    skl = np.zeros(ns) if spent is None else np.asarray(spent.kl, float)
    sre = np.zeros((ns, len(al))) if spent is None else np.asarray(spent.renyi, float)
    sets, members = group_secrets(secret_rhos)
    groups = [_Group(mx, m, float(st.sum()), dominating_lambda(st))
              for mx, m, st in zip(batch_mixtures(sets), members, sets)]
    return _Calibrator(groups, p, r, steps, method, adjacency, np.asarray(al), skl, sre,
                       None if spent is None else spent.pairs, pld_budget), groups


def _over_budget(cal: _Calibrator) -> list[int]:
    """Secrets whose earlier spending alone (this run adding nothing) already exceeds r."""
    kb = kl_bound(cal.skl, cal.p)
    rb = renyi_bound(cal.sre, cal.al[None, :], cal.p[:, None]).min(axis=1) if cal.al.size else np.ones_like(kb)
    b = {"best": np.minimum(kb, rb), "kl": kb, "renyi": rb}[cal.method]
    over = np.nonzero(b > cal.r)[0]
    if cal.method == "best":        # the earlier runs' pairs alone, by the Neyman–Pearson bound
        nothing = Mixture(np.zeros(1, dtype=np.int64), np.zeros(1), 0)
        keep = [j for j in over if not (cal.fresh[j] and float(pld_bound(
            nothing, 0.0, 0, cal.p[j], history=cal.hist[j])[0][0]) <= cal.r[j])]
        over = np.asarray(keep, dtype=np.int64)
    return [int(i) for i in over]


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
    if cal.method == "best":
        # the Neyman–Pearson bound where the divergence bounds alone miss a target (the only
        # secrets whose certificate needs it), or where it is at hand already
        for g in groups:
            idx = g.members
            if g.mix.n == 0 or not cal.fresh[idx].any():
                continue
            if np.all(bound[idx] <= cal.r[idx]) and not (g.pld is not None and g.pld[0] == sigma and g.pld[3]):
                continue
            b, at = cal.pld(g, sigma, need=cal.r[idx] * (1 - 1e-9))
            for k, i in enumerate(idx):
                if b[k] < bound[i]:
                    bound[i] = b[k]
                    binding[i] = f"pld:{at[k]:.3g}"
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
