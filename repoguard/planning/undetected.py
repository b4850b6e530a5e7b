"""The undetected-secret floor as a plan target (docs/privacy.md "Undetected-secret floor").

Scanners miss about a third of real credentials, and nobody declares every trade secret. Such a
secret lives in examples tied to nothing, which keep w = 1 and so the largest sampling
probability ρ_u = B/Σw; the only protection it gets is the noise every example gets. The floor
target `config.Undetected` (k, p, r) asks: a secret in k untied examples, sampled at ρ_u for T
steps at noise σ, after whatever the ledger says earlier runs spent on such a secret (and a
noised phase 1 of this run), has posterior bound ≤ r at prior p [Hush Lemma 3.2 and the
Neyman–Pearson bound, through `accounting.calibrate` like every declared secret]. It is the Hush
form of *Just Fine-tune Twice* §3.1's missed-secret protection.

The floor has its own ledger account (`Undetected.account`, e.g. "@undetected:k=1"): each run
records the floor's divergences and dominating pair there, so runs compose like any secret.
A run recorded before the floor had an account (or with the floor off) is counted at its worst
case, ρ = 1 for each of the k examples (`legacy_pairs`): ρ_u ≤ 1 always, so the pair dominates.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from repoguard.core.config import Undetected
from repoguard.core.errors import InputError, PolicyError

PHASE1_SHARE = 0.5     # a noised phase 1 spends half the floor's headroom: r₁ = p + ½(r − p)


@dataclass(frozen=True)
class FloorPlan:
    """The undetected-secret floor as a plan takes it (the one floor type `build_plan` reads):
    the target `target` (k, p, r, on/off), this run's target bound `r_run` (None: target.r; below
    it under a budget fraction, `accounting.targets.run_targets`) and `phase1` the (B₁, T₁) of a
    noised phase 1 to reserve σ₁ for (None: no noised phase 1). What earlier runs spent on the
    floor's account, the legacy runs included, is `build_plan`'s `spent`."""

    target: Undetected
    r_run: float | None = None
    phase1: tuple[float, int] | None = None

    @property
    def run_r(self) -> float:
        """The bound this run must keep the floor within: `r_run`, else the target's r."""
        return self.r_run if self.r_run is not None else self.target.r


def as_floor(floor) -> FloorPlan | None:
    """`floor` as a `FloorPlan`: None stays None, an `Undetected` target is a plan with the
    target's own r and no phase 1. Raises TypeError for anything else."""
    if floor is None or isinstance(floor, FloorPlan):
        return floor
    if isinstance(floor, Undetected):
        return FloorPlan(floor)
    raise TypeError(f"floor: a FloorPlan or a config.Undetected, not {floor!r}")


def untied_rho(matrix, rho: np.ndarray, test=None) -> float:
    """ρ_u: the largest sampling probability of a training example tied to no secret (0 when
    every training example is tied). `matrix` (n_examples × n_secrets), `rho` (n_examples,)."""
    untied = np.asarray(matrix.getnnz(axis=1) == 0)
    if test is not None:
        untied &= ~np.asarray(test, dtype=bool)
    return float(rho[untied].max()) if untied.any() else 0.0


def run_floor_bounds(matrix, rho: np.ndarray, sigma: float, steps: int, p: float, r: float, *,
                     adjacency: str = "zero-out", test=None, ks=(1, 10)) -> dict:
    """The bound this run *alone* gives a secret nobody declared or detected, living in k examples
    tied to nothing (the Hush form of *Just Fine-tune Twice* §3.1's missed-secret protection): its
    examples are sampled with the untied examples' ρ_u (`untied_rho`: the largest, when they
    differ), under the same σ and T; bound by `accounting.bounds.reconstruction_bound` ("best") at
    prior p. Unlike the floor target (`FloorAccount`), no ledger spending is counted.

    `matrix` (n_examples × n_secrets), `rho` (n_examples,), `test` bool (n_examples,) or None,
    `ks` the k to report. Returns {"p", "r", "rho", "bounds": {str(k): bound},
    "meets_r": {str(k): bool}}."""
    from repoguard.accounting.bounds import reconstruction_bound

    rho_u = untied_rho(matrix, rho, test)
    bounds = {str(k): (float(reconstruction_bound(np.full(k, rho_u), sigma, steps, p, "best", adjacency=adjacency))
                       if rho_u > 0 else p) for k in ks}
    return {"p": p, "r": r, "rho": rho_u, "bounds": bounds, "meets_r": {k: b <= r for k, b in bounds.items()}}


def run_pair(k: int, rho: float, sigma: float, steps: int, adjacency: str, alphas) -> tuple:
    """(Mixture, a, steps, kl, renyi (n_alpha,)) of k examples at ρ each, T steps at σ: the pair a
    later run composes with [Hush §4], and its divergences (larger direction, T steps)."""
    from repoguard.accounting.divergences import mixture, pair_shift, step_divergences

    mix = mixture(np.full(int(k), float(rho)))
    a = pair_shift(float(sigma), adjacency)
    al = np.asarray(alphas, float)
    sd = step_divergences(mix, a, al)
    ren = np.array([steps * max(sd.renyi[float(x)]) for x in al])
    return mix, a, int(steps), steps * max(sd.kl), ren


class FloorAccount:
    """What the floor has spent before this run (ledger, plus a noised phase 1 of this run) and
    σ_floor(ρ_u): the smallest σ meeting the floor's run target at ρ_u (`sigma`).

    `target` the configured floor; `r_run` this run's target (a scheduled run's budget fraction,
    `accounting.targets.run_targets`; = target.r otherwise); `spent` (`accounting.spending.Spent`)
    what earlier runs spent on the floor's account, and its `legacy` runs counted at ρ = 1."""

    def __init__(self, target: Undetected, r_run: float, steps: int, *, method: str, adjacency: str, alphas,
                 spent) -> None:
        self.target, self.r_run, self.steps = target, float(r_run), int(steps)
        self.method, self.adjacency, self.alphas = method, adjacency, tuple(alphas)
        prior = spent.arrays([SimpleNamespace(id=target.account)], self.alphas)
        self.skl, self.sre = prior.kl, prior.renyi
        self.history = prior.pairs[0]
        self.legacy = tuple(spent.legacy)
        for sigma, t in self.legacy:                      # runs before the account: worst case ρ = 1
            self.add(1.0, sigma, t)
        self.phase1 = None
        self._sigma: dict[tuple, float] = {}      # (ρ_u, method) → σ_floor: the plan asks again for c*

    def add(self, rho: float, sigma: float, steps: int) -> tuple:
        """Count one earlier mechanism (k examples at ρ, σ, T) as spent; returns its pair."""
        mix, a, t, kl, ren = run_pair(self.target.k, rho, sigma, steps, self.adjacency, self.alphas)
        self._sigma = {}
        self.skl = self.skl + kl
        self.sre = self.sre + ren[None, :]
        if self.history is not None:
            self.history = tuple(self.history) + ((mix, a, t),)
        return mix, a, t

    def spent_arrays(self):
        """What the floor's account has spent so far, as `calibrate`'s `spent` (one secret)."""
        from repoguard.accounting.spending import SpentArrays

        return SpentArrays(self.skl, self.sre, [self.history])

    def sigma(self, rho_u: float, method: str | None = None, *, strict: bool = True) -> float:
        """σ_floor at ρ_u (0 when ρ_u = 0: no untied example is ever sampled), by `method`
        (default the plan's accountant). Raises PolicyError when no σ ≤ 1e6 meets the floor (its
        budget spent by earlier runs), or returns +inf with `strict=False` (comparison figures)."""
        from repoguard.accounting.calibrate import Infeasible, calibrate

        if not rho_u > 0:
            return 0.0
        key = (float(rho_u), method or self.method)
        if key in self._sigma:
            return self._sigma[key]
        try:
            cal = calibrate([np.full(self.target.k, rho_u)], [self.target.p], [self.r_run], self.steps,
                            method=key[1], adjacency=self.adjacency, alphas=self.alphas,
                            spent=self.spent_arrays())
        except Infeasible:
            if not strict:
                return math.inf
            raise PolicyError(infeasible_message(self.target, legacy=len(self.legacy))) from None
        self._sigma[key] = float(cal.sigma)
        return self._sigma[key]

    def reserve_phase1(self, rho1: float, steps1: int) -> dict:
        """A noised phase 1 of this run (k examples at ρ₁ for T₁ steps) gets σ₁ meeting
        r₁ = b₀ + PHASE1_SHARE·(r_run − b₀) on top of the ledger (b₀ = p here: the split is of
        this run's headroom); phase 1 is then counted as spent, so the plan's σ meets the floor
        over both phases. Returns the phase-1 record {"rho", "steps", "sigma", "r"}.
        Raises InputError when no σ₁ ≤ 1e6 works."""
        p = self.target.p
        r1 = p + PHASE1_SHARE * (self.r_run - p)
        s1 = phase1_sigma(rho1, steps1, k=self.target.k, p=p, r=r1, accountant=self.method, adjacency=self.adjacency,
                          alphas=self.alphas, spent=self.spent_arrays(), name="r₁")
        self.add(rho1, s1, steps1)
        self.phase1 = {"rho": float(rho1), "steps": int(steps1), "sigma": s1, "r": r1}
        return self.phase1


def phase1_sigma(rho1: float, steps1: int, *, k: int, p: float, r: float, accountant: str = "best",
                 adjacency: str = "zero-out", alphas=None, spent=None, name: str = "r") -> float:
    """σ₁ of a noised phase 1 [JFT §3.1 in Hush's terms]: the smallest noise multiplier such that a
    secret carried by k examples, each sampled with probability ρ₁, meets (p, r) after `steps1`
    steps on top of `spent` (`accounting.spending.SpentArrays` of that one secret; None = nothing)
    — Hush Alg. 2 lines 4–5 for that one secret (`accounting.calibrate.calibrate`). The one place
    σ₁ is calibrated: `FloorAccount.reserve_phase1` (the plan's reservation under the floor) and
    `training.phases.prepare` (a plan without a floor) both call it. `name` names r in the error.
    Raises InputError when no σ ≤ 1e6 meets it."""
    from repoguard.accounting.calibrate import Infeasible, calibrate
    from repoguard.accounting.divergences import DEFAULT_ALPHAS

    try:
        return float(calibrate([np.full(int(k), float(rho1))], [p], [r], int(steps1), method=accountant,
                               adjacency=adjacency, alphas=DEFAULT_ALPHAS if alphas is None else alphas,
                               spent=spent).sigma)
    except Infeasible:
        target = f"r = {r:g}" if name == "r" else f"{name} = {r:.3g}"
        raise InputError(f"--phase1 noised: no σ₁ ≤ 1e6 keeps an undetected secret in {k} example(s) "
                         f"within {target}") from None


def infeasible_message(target: Undetected, legacy: int = 0) -> str:
    """The one-line refusal when the ledger leaves the floor no budget (`legacy`: earlier runs
    counted at ρ = 1 because they recorded no floor account)."""
    why = (f"; {legacy} earlier run(s) recorded no floor account and count at their worst case, ρ = 1"
           if legacy else "")
    return (f"undetected floor: no noise level (σ ≤ 1e6) keeps a secret in k = {target.k} untied "
            f"example(s) within r = {target.r:g} at p = {target.p:g}; the ledger's earlier runs spent its "
            f"budget{why} (lower the floor with [defaults] undetected = {{ r = … }}, or \"off\" to opt out)")


def legacy_runs(ledger_path, target: Undetected) -> list[tuple[float, int]]:
    """(σ, steps completed) of every run in the ledger whose last entry records no spending on
    `target.account` (recorded before the floor had an account, or for another k): what
    `FloorAccount` counts at ρ = 1 (`accounting.ledger.runs_without`). An empty or missing
    ledger gives []."""
    from repoguard.accounting.ledger import runs_without

    return runs_without(ledger_path, target.account)


def floor_record(target: Undetected, *, rho_u: float, sigma: float, sigma_floor: float, steps: int,
                 account: FloorAccount | None, cal=None, index: int | None = None, r_run: float | None = None,
                 adjacency: str = "zero-out", ks=(1, 10)) -> dict:
    """plan.json's "undetected_floor": the target (k, p, r, enabled), this run's target `r_run`,
    ρ_u, σ_floor, the achieved cumulative bound and its binding (from the certified calibration
    `cal` at `index` when enforced), this run's bounds for a few k (this run alone), the ledger
    account's spending of this run ("account": kl, renyi, pair) and `meets_r`."""
    from repoguard.accounting.bounds import reconstruction_bound
    from repoguard.accounting.pld import pair_record

    rec = {**target.record(), "r_run": r_run if r_run is not None else target.r, "rho": rho_u,
           "sigma_floor": sigma_floor, "sigma": sigma, "steps": steps,
           "bounds": {str(k): (float(reconstruction_bound(np.full(k, rho_u), sigma, steps, target.p, "best",
                                                           adjacency=adjacency)) if rho_u > 0 else target.p)
                      for k in sorted({*ks, target.k})}}
    if cal is not None and index is not None:
        ev = cal.evals
        mix, a, t = cal.pairs[index]
        rec["achieved_bound"] = float(ev.bound[index])
        rec["binding"] = ev.binding[index]
        rec["account"] = {"id": target.account, "kl": float(ev.kl[index]),
                          "renyi": {f"{x:g}": float(v) for x, v in zip(cal.alphas, ev.renyi[index]) if math.isfinite(v)},
                          "pair": pair_record(mix, a, t) if mix.n > 0 else None}
    else:
        # Not enforced (opt-out) or nothing untied: this run's bound, still recorded on the account
        rec["achieved_bound"] = rec["bounds"][str(target.k)]
        rec["binding"] = "off" if not target.enabled else "none sampled"
        if rho_u > 0 and sigma > 0:
            mix, a, t, kl, ren = run_pair(target.k, rho_u, sigma, steps, adjacency, _alphas())
            rec["account"] = {"id": target.account, "kl": float(kl),
                              "renyi": {f"{x:g}": float(v) for x, v in zip(_alphas(), ren) if math.isfinite(v)},
                              "pair": pair_record(mix, a, t)}
    if account is not None and account.phase1 is not None:
        rec["phase1"] = account.phase1
    rec["meets_r"] = bool(rec["achieved_bound"] <= rec["r"] * (1 + 1e-9))
    return rec


def _alphas():
    from repoguard.accounting.divergences import DEFAULT_ALPHAS
    return tuple(DEFAULT_ALPHAS)


def describe(rec: dict | None) -> str:
    """One line for the plan/run/report: the floor's target and achieved bound, or the opt-out."""
    if not rec:
        return "undetected floor: not computed (plan made before the floor was a target)"
    if not rec.get("enabled", True):
        return (f"UNDETECTED FLOOR OFF (opt-out): a secret nobody declared or detected, in k = {rec.get('k', 1)} "
                f"example(s), gets bound {rec.get('achieved_bound', 1.0):.3g} (no target)")
    ach = rec.get("achieved_bound")
    if rec.get("insecure_runs"):
        return (f"undetected floor: INSECURE — insecure-reproducible run(s) {', '.join(rec['insecure_runs'][:3])} "
                f"trained the untied examples: the floor's bound {ach:.3g} does not hold against whoever knows the seed")
    return (f"undetected floor: a secret nobody declared or detected in k = {rec['k']} untied example(s) "
            f"gets bound {ach:.3g} ≤ r = {rec['r']:g} at p = {rec['p']:g} "
            f"(σ_floor = {rec.get('sigma_floor') or 0:.4g}, ρ_u = {rec.get('rho', 0):.3g})")


def resolve(config, override: str | None = None) -> Undetected:
    """The floor for this run: `--undetected` (`override`) when given, else `[defaults]`'s.
    Raises InputError for a malformed override."""
    from repoguard.core.config import parse_undetected

    return parse_undetected(override, config.defaults) if override is not None else config.undetected


def spent_for(ledger_path, target: Undetected | None):
    """What earlier runs spent (`accounting.ledger.read_spent`: an `accounting.spending.Spent`),
    with the legacy runs of `target`'s floor account (none without a target). Raises PolicyError
    when the ledger fails verification."""
    from repoguard.accounting.ledger import read_spent

    return read_spent(ledger_path, floor_account=target.account if target is not None else None)


def floor_plan(target: Undetected, *, training=None, batch_size: float, steps: int,
               r_run: float | None = None) -> FloorPlan:
    """The `FloorPlan` of a run: `target`, this run's target r (`r_run`) and, for `[training]
    phases = 2` with phase1 = "noised" (`training`, a `config.TrainingConfig`), phase 1's (B₁, T₁)
    to reserve σ₁ for (B₁ = phase1_batch_size or `batch_size`, T₁ = phase1_steps or `steps`). The
    ledger's runs without a floor account travel in `build_plan`'s `spent` (`spent_for`)."""
    phase1 = None
    if training is not None and int(getattr(training, "phases", 1)) == 2 and training.phase1 == "noised":
        phase1 = (float(training.phase1_batch_size) or float(batch_size), int(training.phase1_steps) or int(steps))
    return FloorPlan(target, r_run, phase1)
