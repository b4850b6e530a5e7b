"""Equal protection for `repoguard compare`: every arm's plan at the same declared targets, the
same undetected-secret floor and the same ledger state (docs/commands/compare.md "Equal protection").

Protected arms (`PROTECTED`) meet every declared secret's (p_j, r_j) *and* the floor
`config.Undetected` (k, p, r): a secret nobody declared, living in k untied examples sampled at
the arm's ρ_u, has cumulative posterior bound ≤ r after the ledger's earlier spending on the
floor's account and everything this arm trains [Hush Lemma 3.2 and the Neyman–Pearson bound,
certified by `accounting.calibrate` with the floor as one more secret, as `plan.build_plan` does]:

- `hush`, `hush-kl`, `hush-gdp`: `plan.build_plan` with the floor (the plan's cap, then each LP
  cap), c as the plan chose it (given, or swept again: the floor moves the c the rule picks);
- `uniform`: w = 1 on every training example, ρ = B/n_train [Hush §5.1's DP-SGD baseline], σ
  from one certified calibration of every secret and the floor at ρ_u = B/n_train;
- `drop-dp`: examples tied to any secret removed (w = 0), w = 1 elsewhere, ρ = B/n_untied, σ =
  σ_floor at that ρ (what a careful team does without Hush); declared secrets are never sampled,
  so their bound is their prior p;
- `two-phase-noised` [JFT §3.1]: σ₁ reserved for a noised phase 1 on the public examples
  (`undetected.FloorAccount.reserve_phase1`, as `build_plan` does for a `FloorPlan` with a
  phase 1) and counted spent; phase 2 keeps the hush plan's weights with σ re-certified, so
  σ ≥ σ_floor over both phases.

References (`REFERENCES`) meet the declared targets or nothing, never the floor: `drop`
(tied examples removed, no noise), `no-dp` (no noise) and `two-phase` (clear phase 1, then the
hush plan built with the floor off — the only plan `training.phases.prepare` lets a clear phase 1
run before). Their floor bound is 1: an untied example is trained without noise.

Every arm is calibrated against one `LedgerSnapshot`, read once under the ledger's shared lock
when compare starts: what each secret spent, their earlier pairs, and the runs recorded before the
floor had an account (`undetected.legacy_runs`, counted at ρ = 1).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from repoguard.core.errors import InputError, PolicyError

# Every arm `compare` knows, in the order its table prints them.
ARMS = ("hush", "hush-kl", "hush-gdp", "uniform", "drop-dp", "drop", "no-dp", "two-phase", "two-phase-noised")

PROTECTED = ("hush", "hush-kl", "hush-gdp", "uniform", "drop-dp", "two-phase-noised")
REFERENCES = ("drop", "no-dp", "two-phase")
TWO_PHASE_ARMS = ("two-phase", "two-phase-noised")


@dataclass(frozen=True)
class LedgerSnapshot:
    """The ledger as every arm of one compare sees it. `spent` {secret id or floor account:
    (kl nats, {α: Rényi nats})} and `pairs` (their earlier runs' pair records) from
    `accounting.ledger.spending`; `legacy` (σ, steps) of runs without a spending record on the
    floor's account (`undetected.legacy_runs`); `head` the last entry's hash ("0"×64 when empty);
    `runs` the number of run ids recorded."""

    spent: dict = field(default_factory=dict)
    pairs: dict = field(default_factory=dict)
    legacy: tuple = ()
    head: str = "0" * 64
    runs: int = 0

    def as_spent(self, legacy: bool = True):
        """The snapshot as `build_plan`'s `spent` (`accounting.spending.Spent`); `legacy` False
        leaves out the floor's legacy runs."""
        from repoguard.accounting.spending import Spent

        return Spent(self.spent, self.pairs, tuple(self.legacy) if legacy else ())

    def record(self) -> dict:
        """JSON summary: {"head", "runs", "secrets_spent" (how many secrets have spent something),
        "floor_accounts" (the floor accounts with spending, e.g. "@undetected:k=1"),
        "floor_legacy_runs" (runs counted at ρ = 1 for the floor)}."""
        return {"head": self.head, "runs": self.runs,
                "secrets_spent": sum(1 for k in self.spent if not k.startswith("@")),
                "floor_accounts": sorted(k for k in self.spent if k.startswith("@")),
                "floor_legacy_runs": len(self.legacy)}


def snapshot(ledger_path: str | Path, target) -> LedgerSnapshot:
    """Read `ledger_path` once, under its shared lock, for floor `target` (`config.Undetected`):
    an append cannot land between the spending and the legacy runs. A missing ledger is empty.
    Raises PolicyError when the ledger fails verification."""
    from repoguard.accounting.ledger import read_entries, shared_lock, spending, verify
    from repoguard.planning.undetected import legacy_runs

    path = Path(ledger_path)
    if not path.exists():
        return LedgerSnapshot()
    with shared_lock(path):
        spent, pairs = spending(path)
        legacy = tuple(legacy_runs(path, target)) if target is not None else ()
        head = verify(path).get("last_hash") or "0" * 64
        runs = len({e.get("run_id") for e in read_entries(path)})
    return LedgerSnapshot(spent=spent, pairs=pairs, legacy=legacy, head=head, runs=runs)


@dataclass
class ArmPlan:
    """One arm's plan: `plan` (a `plan.Plan`: w, ρ, σ, B, T, C, the held-out split of the base
    plan), `private` (DP-SGD or clear), `protected` (meant to meet the floor: in `PROTECTED`),
    `floor` the arm's floor record (`floor_entry`), `phase1` (B₁, T₁) of a two-phase arm."""

    name: str
    plan: object
    private: bool
    protected: bool
    floor: dict
    phase1: tuple | None = None

    @property
    def meets_targets(self) -> bool | None:
        """True when every declared secret's certified bound is ≤ its r (and the floor is met
        when enabled), False when one is not; None for a reference arm (nothing to meet)."""
        if not self.protected:
            return None
        ok = all(s.achieved_bound <= s.r * (1 + 1e-9) for s in self.plan.secrets)
        return ok and self.meets_floor is not False

    @property
    def meets_floor(self) -> bool | None:
        """True when the floor is enabled and this arm's cumulative floor bound is ≤ r; None
        when the floor is off (nothing to meet)."""
        if not self.floor.get("enabled"):
            return None
        return bool(self.floor.get("bound") is not None and self.floor["bound"] <= self.floor["r"] * (1 + 1e-9))


def floor_entry(target, *, rho_u: float, sigma: float, sigma_floor: float | None, bound: float,
                source: str) -> dict:
    """An arm's floor record: the target (k, p, r, enabled), ρ_u (largest ρ of an untied training
    example), the arm's σ (0 = clear), σ_floor (None when not computed), `bound` the cumulative
    posterior bound of a secret in k untied examples (ledger + both phases + this arm; 1 = no
    bound) and `source` ("certified": `accounting.calibrate` with the floor as a secret;
    "this run": this arm alone, floor off; "clear": trained without noise)."""
    return {**target.record(), "rho_u": float(rho_u), "sigma": float(sigma),
            "sigma_floor": None if sigma_floor is None else float(sigma_floor), "bound": float(bound),
            "source": source}


def _split(base_plan):
    from repoguard.source.split import Split

    h = base_plan.extra.get("holdout") or {}
    return Split(test=base_plan.test_mask, files=(), fraction=float(h.get("fraction") or 0.0),
                 min_files=int(h.get("min_files") or 0), salt=str(h.get("salt") or ""),
                 digest=str(h.get("digest") or ""))


def base_floor(base_plan, defaults=None):
    """The floor the base plan was made with (`plan.extra["undetected_floor"]` as an
    `Undetected`), else k = 1 at `defaults` (p, r) or `config.DEFAULT_PROTECTION`'s, enforced."""
    from repoguard.core.config import DEFAULT_PROTECTION, Undetected

    rec = base_plan.extra.get("undetected_floor") or {}
    if "k" in rec and "p" in rec and "r" in rec:
        return Undetected(int(rec["k"]), float(rec["p"]), float(rec["r"]), bool(rec.get("enabled", True)))
    p, r = defaults if defaults is not None else (DEFAULT_PROTECTION.p, DEFAULT_PROTECTION.r)
    return Undetected(1, float(p), float(r))


def arm_plan(name: str, base_plan, incidence, *, floor=None, snap: LedgerSnapshot | None = None,
             phase1: tuple[float, int] | None = None) -> ArmPlan:
    """`_arm_plan` (below), then every secret this arm never samples re-certified from the ledger
    alone by the run's accountant (`recertify_unsampled`)."""
    ap = _arm_plan(name, base_plan, incidence, floor=floor, snap=snap, phase1=phase1)
    if ap.private:
        recertify_unsampled(ap.plan, incidence, snap or LedgerSnapshot())
    return ap


def recertify_unsampled(plan, incidence, snap: LedgerSnapshot) -> None:
    """A secret none of whose examples the arm samples (ρ = 0: drop-dp, or w = 0 in a hush arm)
    stands where the ledger left it; the calibration reports its divergence bounds only, which
    for a secret the earlier run certified by the Neyman–Pearson bound are above its target.
    Replace each such bound above r by `spent_bounds.spent_bound` (the same accountant as the run,
    `plan.accountant` "best"), in place (issue 41 item 12)."""
    from repoguard.accounting.spent_bounds import spent_bound

    if plan.accountant != "best" or not plan.secrets:
        return
    csc = incidence.matrix.tocsc()
    col = {s.id: j for j, s in enumerate(incidence.secrets)}
    cache: dict = {}
    for i, s in enumerate(plan.secrets):
        j = col.get(s.id)
        if j is None or s.achieved_bound <= s.r or s.binding == "exposed":
            continue
        if np.any(plan.rho[csc.indices[csc.indptr[j]:csc.indptr[j + 1]]] > 0):
            continue
        kl0, ren0 = snap.spent.get(s.id, (0.0, {}))
        b, how = spent_bound(kl0, ren0, s.p, snap.pairs.get(s.id), cache=cache)
        if b < s.achieved_bound:
            plan.secrets[i] = dataclasses.replace(s, achieved_bound=b, binding=f"{how} (ledger)")


def _arm_plan(name: str, base_plan, incidence, *, floor=None, snap: LedgerSnapshot | None = None,
              phase1: tuple[float, int] | None = None) -> ArmPlan:
    """The plan of arm `name` at floor `floor` (a `config.Undetected`; None: the base plan's,
    `base_floor`) against ledger snapshot `snap` (None: an empty ledger), with the base plan's B,
    T, C, cap, c rule, accountant, adjacency and held-out split. `phase1` = (B₁, T₁) of the
    two-phase arms (default (B, T)).

    Raises InputError for an unknown arm or too few training examples for B, PolicyError when
    the ledger's spending leaves no σ ≤ 1e6 meeting the targets or the floor."""
    from repoguard.planning.baselines import clear_plan
    from repoguard.planning.plan import build_plan
    from repoguard.planning.undetected import FloorPlan, untied_rho

    und = floor if floor is not None else base_floor(base_plan)
    snap = snap or LedgerSnapshot()
    test = base_plan.test_mask
    train = ~test
    common = dict(batch_size=base_plan.batch_size, steps=base_plan.steps, clip_norm=base_plan.clip_norm)
    c = base_plan.c if (base_plan.extra.get("c_rule") or "given") == "given" else 0.0
    ledger = dict(spent=snap.as_spent())
    tied = np.asarray(incidence.matrix.getnnz(axis=1) > 0)
    p1 = None
    if name in ("hush", "hush-kl", "hush-gdp", "two-phase", "two-phase-noised"):
        cap = base_plan.cap if name in ("hush", "two-phase", "two-phase-noised") else name.split("-")[1]
        arm_floor = dataclasses.replace(und, enabled=False) if name == "two-phase" else und
        if name in TWO_PHASE_ARMS:
            p1 = (float(phase1[0]), int(phase1[1])) if phase1 else (base_plan.batch_size, base_plan.steps)
        plan = build_plan(incidence, c=c, cap=cap, accountant=base_plan.accountant, adjacency=base_plan.adjacency,
                          holdout=_split(base_plan), floor=FloorPlan(arm_floor),
                          value=base_plan.value,
                          objective=base_plan.extra.get("objective", "examples"), **ledger, **common)
        rec = plan.extra.get("undetected_floor") or {}
        if name == "two-phase":            # a clear phase 1 cannot meet the floor: phase 2 plans without it
            fl = floor_entry(und, rho_u=rec.get("rho", 0.0), sigma=0.0, sigma_floor=None,
                             bound=1.0 if rec.get("rho", 0.0) > 0 else und.p, source="clear")
            return ArmPlan(name, plan, True, False, fl, p1)
        if name == "two-phase-noised" and und.enabled:
            # phase 2 = the hush plan's weights, σ re-certified with phase 1 reserved and spent
            plan, fl = _calibrated(name, base_plan, incidence, plan.w, plan.rho,
                                   untied_rho(incidence.matrix, plan.rho, test), und, True, snap, common,
                                   phase1=p1, like=plan)
            return ArmPlan(name, plan, True, True, fl, p1)
        fl = floor_entry(und, rho_u=rec.get("rho", 0.0), sigma=plan.sigma, sigma_floor=rec.get("sigma_floor"),
                         bound=rec.get("achieved_bound", 1.0), source="certified" if und.enabled else "this run")
        return ArmPlan(name, plan, True, True, fl, p1)
    if name in ("uniform", "drop-dp", "no-dp", "drop"):
        keep = train & ~tied if name in ("drop", "drop-dp") else train
        if name in ("no-dp", "drop"):
            plan = clear_plan(base_plan, keep, name=name)
            rho_u = untied_rho(incidence.matrix, plan.rho, test)
            fl = floor_entry(und, rho_u=rho_u, sigma=0.0, sigma_floor=None, bound=1.0 if rho_u > 0 else und.p,
                             source="clear")
            return ArmPlan(name, plan, False, False, fl)
        n = int(keep.sum())
        if n < base_plan.batch_size:
            raise InputError(f"compare: arm {name} has {n} training examples, fewer than B = {base_plan.batch_size:g}")
        w = keep.astype(float)
        rho = base_plan.batch_size * w / n
        rho_u = untied_rho(incidence.matrix, rho, test)
        # drop-dp is σ_floor by definition: with the floor off it still uses the floor's (k, p, r)
        enforce = und.enabled or name == "drop-dp"
        plan, fl = _calibrated(name, base_plan, incidence, w, rho, rho_u, und, enforce, snap, common)
        return ArmPlan(name, plan, True, True, fl)
    raise InputError(f"--arms: unknown arm {name!r} (known: {', '.join(ARMS)})")


def _calibrated(name, base_plan, incidence, w, rho, rho_u, und, enforce, snap, common, *, phase1=None, like=None):
    """Plan of a fixed-weight arm (uniform, drop-dp; the phase 2 of two-phase-noised) with σ from
    one certified calibration of every declared secret and, when `enforce`, the floor at `rho_u`
    [Hush Alg. 2 lines 4–5; the floor as one more secret, as `plan.build_plan` does].

    `phase1` (B₁, T₁): a noised phase 1 on the public examples gets σ₁ from
    `undetected.FloorAccount.reserve_phase1` (half the floor's headroom, ρ₁ = B₁/n_public), counted
    as spent before σ is calibrated, so the floor holds over both phases; the record goes to
    `extra["undetected_floor"]["phase1"]`, where `training.phases.prepare` takes σ₁ from.
    (Unlike `build_plan` with a `FloorPlan` phase 1, c is not re-optimised for phase 1's share:
    phase 2 keeps the hush weights, so the two arms differ only by phase 1.) `like`: the plan whose c, cap and
    extra (LP, retention…) the arm inherits."""
    from repoguard.accounting.bounds import reconstruction_bound
    from repoguard.accounting.calibrate import Infeasible, calibrate
    from repoguard.accounting.divergences import DEFAULT_ALPHAS
    from repoguard.planning.plan import Plan, SecretPlan
    from repoguard.planning.undetected import FloorAccount

    secrets = incidence.secrets
    alphas = tuple(DEFAULT_ALPHAS)
    csc = incidence.matrix.tocsc()
    cols = [csc.indices[csc.indptr[j]:csc.indptr[j + 1]] for j in range(len(secrets))]
    p = np.array([s.p for s in secrets], float)
    r = np.array([s.r for s in secrets], float)
    prior = snap.as_spent().arrays(secrets, alphas)
    rhos = [rho[ix] for ix in cols]
    steps, method, adjacency = base_plan.steps, base_plan.accountant, base_plan.adjacency
    floor_in = enforce and rho_u > 0
    reserved = None
    if floor_in:
        acct = FloorAccount(dataclasses.replace(und, enabled=True), und.r, steps, method=method, adjacency=adjacency,
                            alphas=alphas, spent=snap.as_spent())
        if phase1 is not None:
            test = base_plan.test_mask
            n_pub = int(np.sum(np.asarray(incidence.matrix.getnnz(axis=1) == 0) & ~test))
            if n_pub:
                reserved = acct.reserve_phase1(min(1.0, float(phase1[0]) / n_pub), int(phase1[1]))
        rhos.append(np.full(und.k, rho_u))
        p, r = np.append(p, und.p), np.append(r, und.r)
        prior = prior.plus(acct.spent_arrays())
    try:
        cal = calibrate(rhos, p, r, steps, method=method, adjacency=adjacency, alphas=alphas, spent=prior)
    except Infeasible as exc:
        who = ["the undetected floor" if j == len(secrets) else secrets[j].id for j in exc.secrets[:5]]
        raise PolicyError(f"compare: arm {name}: no noise level (σ ≤ 1e6) meets the targets of "
                          f"{', '.join(who)} after the ledger's earlier runs") from None
    ev = cal.evals
    plans = [SecretPlan(id=s.id, p=s.p, r=s.r, achieved_bound=float(ev.bound[j]), binding=ev.binding[j],
                        kl_spent=float(ev.kl[j]),
                        renyi_spent={f"{a:g}": float(v) for a, v in zip(alphas, ev.renyi[j]) if math.isfinite(v)},
                        n_examples=int(cols[j].size), sum_w=float(w[cols[j]].sum()))
             for j, s in enumerate(secrets)]
    if floor_in:
        j = len(secrets)
        sigma_floor = acct.sigma(rho_u)
        fl = floor_entry(und, rho_u=rho_u, sigma=cal.sigma, sigma_floor=sigma_floor, bound=float(ev.bound[j]),
                         source="certified")
        if reserved is not None:
            fl["phase1"] = reserved
    else:
        b = (float(reconstruction_bound(np.full(und.k, rho_u), cal.sigma, steps, und.p, "best", adjacency=adjacency))
             if rho_u > 0 else und.p)
        fl = floor_entry(und, rho_u=rho_u, sigma=cal.sigma, sigma_floor=None, bound=b, source="this run")
    extra = {"arm": name, "undetected_floor": {**fl, "rho": fl["rho_u"], "achieved_bound": fl["bound"]}}
    if like is not None:
        extra = {**like.extra, **extra, "sigma_like": like.sigma}
    plan = Plan(sigma=float(cal.sigma), c=like.c if like is not None else base_plan.c,
                cap=like.cap if like is not None else "none", accountant=method, adjacency=adjacency,
                example_ids=list(base_plan.example_ids), w=w, rho=rho, test=base_plan.test_mask, secrets=plans,
                extra=extra, **common)
    return plan, fl
