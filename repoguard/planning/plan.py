"""The training plan: weights w, sampling probabilities ρ, noise multiplier σ and what each
secret is promised (Hush Alg. 2 lines 1–5). Written by `repoguard plan`, read by `repoguard train`.

On disk (`OUT/plan/`, format version 1):
    plan.json   scalars and the per-secret table (below); "digest" (`plan_files_digest`): SHA-256
                over the rest of plan.json and the bytes of plan.npz, checked by `load_plan` (a
                hand-edited σ or ρ is refused, issue 32 I); extra["inputs"]: the digests of the
                corpus and incidence it was built from (and of the config, `provenance.py`)
    plan.npz    example_ids (str), w (float64), rho (float64), test (bool: held-out examples,
                `source/split.py`; absent in older plans = none), aligned with the incidence rows
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import zipfile
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from repoguard.core.artefacts import FORMAT_VERSION, atomic_dir, atomic_write_json, file_sha256, read_json
from repoguard.core.errors import InputError
from repoguard.planning.c_choice import Deferred, bought, pick_without_floor, raise_c


@dataclass(frozen=True)
class SecretPlan:
    """What one secret gets from the plan.

    `achieved_bound`: posterior bound on reconstruction after this run *and* what the ledger says
    was spent before (Hush Lemma 3.2); `binding`: which bound gave it ("kl", "renyi:α" or
    "pld:ε", the Neyman–Pearson bound of `accounting/pld.py`); `kl_spent` (nats) and
    `renyi_spent` ({α: nats}) are this run's divergences, T steps composed; `pair` this run's
    dominating pair for the ledger (`pld.pair_record`; None when no example of the secret can be
    sampled); `n_examples` = |E_j|, `sum_w` = Σ_{i∈E_j} w_i. A secret exposed by an earlier
    run's public phase (`accounting/clear_exposures.py`) has `achieved_bound` 1 and `binding`
    "exposed"; `dp_bound` is then the bound the divergences alone would give (None otherwise)."""

    id: str
    p: float
    r: float
    achieved_bound: float
    binding: str
    kl_spent: float
    renyi_spent: dict[str, float]
    n_examples: int
    sum_w: float
    pair: dict | None = None
    dp_bound: float | None = None


@dataclass
class Plan:
    """σ is the noise multiplier (noise std = σ·C on the clipped-gradient sum); B the expected
    batch size, a public constant the sum is divided by; T steps; C the clip norm (L2)."""

    sigma: float
    batch_size: float
    steps: int
    clip_norm: float
    c: float
    cap: str
    accountant: str
    adjacency: str
    example_ids: list[str]
    w: np.ndarray
    rho: np.ndarray
    secrets: list[SecretPlan] = field(default_factory=list)
    extra: dict = field(default_factory=dict)      # sweep table, paper-KL σ, solver stats…
    test: np.ndarray | None = None                 # bool (n,): held-out examples (ρ = 0), or None
    digest: str | None = None                      # plan files' digest, set by save_plan/load_plan
    value: np.ndarray | None = None                # LP objective per example (planning.value); None: Σw

    @property
    def test_mask(self) -> np.ndarray:
        """bool (n,): True for held-out examples (all False when the plan has no split)."""
        return self.test if self.test is not None else np.zeros(len(self.example_ids), dtype=bool)

    def check(self) -> None:
        """Invariants every consumer relies on; raises InputError when violated."""
        n = len(self.example_ids)
        if self.w.shape != (n,) or self.rho.shape != (n,):
            raise InputError(f"plan: w/ρ shapes {self.w.shape}/{self.rho.shape} do not match {n} examples")
        if np.any(self.rho < 0) or np.any(self.rho > 1):
            raise InputError("plan: every sampling probability ρ must lie in [0, 1]")
        if self.value is not None and self.value.shape != (n,):
            raise InputError(f"plan: {self.value.shape[0]} example values for {n} examples")
        if self.test is not None and (self.test.shape != (n,) or np.any(self.rho[self.test] != 0)):
            raise InputError("plan: held-out examples must have ρ = 0 (and the mask one entry per example)")
        if not (self.sigma > 0 and self.batch_size > 0 and self.steps > 0 and self.clip_norm > 0):
            raise InputError("plan: σ, B, T and C must be positive")


def plan_files_digest(doc: dict, npz_sha256: str) -> str:
    """SHA-256 over plan.json's content without its "digest" (canonical JSON: sorted keys, no
    spaces) and the SHA-256 of plan.npz's bytes. Unkeyed: it catches a hand edit or corruption,
    not a forger who recomputes it."""
    body = json.dumps({k: v for k, v in doc.items() if k != "digest"}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256((body + "\n" + npz_sha256).encode("utf-8")).hexdigest()


def save_plan(plan: Plan, out_dir: str | Path) -> Path:
    """Write `out_dir/plan/` atomically; returns the directory. Records in `extra["inputs"]` the
    digests of `out_dir`'s corpus and incidence (keeping a "config" digest the caller set) and
    in plan.json the files' digest (`plan_files_digest`; also set on `plan.digest`)."""
    from repoguard.core.provenance import artefact_digests

    plan.check()
    target = Path(out_dir) / "plan"
    plan.extra["inputs"] = {**(plan.extra.get("inputs") or {}), **artefact_digests(Path(out_dir))}
    with atomic_dir(target) as tmp:
        np.savez_compressed(tmp / "plan.npz", example_ids=np.asarray(plan.example_ids, dtype=str),
                            w=plan.w.astype(np.float64), rho=plan.rho.astype(np.float64),
                            test=plan.test_mask,
                            **({} if plan.value is None else {"value": plan.value.astype(np.float64)}))
        doc = {
            "format_version": FORMAT_VERSION,
            "sigma": plan.sigma, "batch_size": plan.batch_size, "steps": plan.steps,
            "clip_norm": plan.clip_norm, "c": plan.c, "cap": plan.cap,
            "accountant": plan.accountant, "adjacency": plan.adjacency,
            "n_examples": len(plan.example_ids), "sum_w": float(plan.w.sum()),
            "secrets": [asdict(s) for s in plan.secrets], "extra": plan.extra,
        }
        doc = json.loads(json.dumps(doc))          # the digest is of what a reader parses back
        doc["digest"] = plan.digest = plan_files_digest(doc, file_sha256(tmp / "plan.npz"))
        atomic_write_json(tmp / "plan.json", doc)
    return target


def _check_digest(d: Path, doc: dict) -> str | None:
    """plan.json's "digest" checked against its content and plan.npz (None when absent: an older
    plan, which the trainer refuses). Raises InputError on a mismatch."""
    want = doc.get("digest")
    if want is None:
        return None
    try:
        have = plan_files_digest(doc, file_sha256(d / "plan.npz"))
    except OSError as exc:
        raise InputError(f"{d / 'plan.npz'}: unreadable plan ({exc}); re-run `repoguard plan`") from None
    if have != want:
        raise InputError(f"{d / 'plan.json'}: the plan files do not match their digest (plan.json or plan.npz "
                         "edited or corrupt); re-run `repoguard plan`")
    return str(want)


def load_plan(out_dir: str | Path) -> Plan:
    """Read `out_dir/plan/`. Raises InputError naming the file when missing or corrupt."""
    d = Path(out_dir) / "plan"
    doc = read_json(d / "plan.json", what="plan (run `repoguard plan`)")
    if doc.get("format_version") != FORMAT_VERSION:
        raise InputError(f"{d / 'plan.json'}: format version {doc.get('format_version')} is not {FORMAT_VERSION}")
    npz = d / "plan.npz"
    try:
        with np.load(npz, allow_pickle=False) as z:     # read whole here: a bad member fails here
            arrays = {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise InputError(f"{npz}: no plan arrays here; run `repoguard plan`") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        # numpy reads non-zip bytes as a pickle and suggests allow_pickle: not advice for a user
        why = "not an .npz archive" if "pickle" in str(exc) else f"{type(exc).__name__}: {exc}"
        raise InputError(f"{npz}: corrupt plan arrays ({why}); re-run `repoguard plan`") from None
    # After the arrays load: a corrupt plan.npz is named as such, an edited one fails the digest
    digest = _check_digest(d, doc) if isinstance(doc, dict) else None
    try:
        plan = Plan(
            sigma=float(doc["sigma"]), batch_size=float(doc["batch_size"]), steps=int(doc["steps"]),
            clip_norm=float(doc["clip_norm"]), c=float(doc["c"]), cap=doc["cap"],
            accountant=doc["accountant"], adjacency=doc["adjacency"],
            example_ids=[str(x) for x in arrays["example_ids"]], w=arrays["w"], rho=arrays["rho"],
            secrets=[SecretPlan(**s) for s in doc["secrets"]], extra=doc.get("extra", {}),
            test=arrays["test"].astype(bool) if "test" in arrays else None, digest=digest,
            value=arrays.get("value"),
        )
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{d}: corrupt plan ({exc})") from None
    plan.check()
    return plan


# -- building a plan (Hush Alg. 2 lines 1–5) ------------------------------------------------------
def build_plan(incidence, *, batch_size: float, steps: int, clip_norm: float = 1.0, c: float = 0.0,
               cap: str = "kl", accountant: str = "best", adjacency: str = "zero-out",
               spent=None, sweep=None, progress=None, holdout=None, floor=None,
               value: np.ndarray | None = None, objective: str = "examples") -> Plan:
    """Weights, sampling probabilities and the calibrated σ for `incidence`.

    w from the LP of Hush eq. 1 with scale `c` (c = 0: sweep `sweep`, default 2^-6…2^4, and pick
    by `weighting.pick_c`); ρ = B·w/Σw [Hush Alg. 2]; σ the smallest noise multiplier keeping
    every secret's *cumulative* bound (what earlier runs spent, `spent`: an
    `accounting.spending.Spent` from `ledger.read_spent`, None = nothing; plus this run) ≤ r_j;
    its pairs let the Neyman–Pearson bound compose earlier runs too. Also computes the σ the
    paper's KL accountant would need.

    `Plan.extra` keys: "lp" (solver, iterations, gap, objective, seconds, sizes), "calibration"
    (groups, evaluations, bisections), "alphas" (Rényi orders; `SecretPlan.renyi_spent` keys are
    these formatted with :g, +inf orders left out), "sweep" (rows of `weighting.SweepRow`, empty
    when c was given), "c_rule", "ledger_secrets" (secrets with earlier spending),
    "sigma_paper_kl", "sigma_ratio_kl_over_this", "sigma_uniform" (`_sigma_uniform`),
    "noise_reduction" (σ_uniform/σ), "retention" (`retention.retention`: examples, Σw and Σw/n
    per secret and per top-level directory), "seconds", with `floor` "undetected_floor"
    (`undetected.floor_record`) and "floor_bought" (what the floor's noise bought back), and with `holdout` (an
    `source.split.Split`) "holdout" (its record: digest, files, examples). Held-out examples
    are left out of the LP and get w = ρ = 0, so no arm ever samples them. Non-finite numbers
    are null.

    The undetected-secret floor (`floor`: an `undetected.FloorPlan`, or a `config.Undetected`
    target for this run's whole r and no phase 1): when enabled, σ ≥ σ_floor, the smallest σ
    giving k untied examples (ρ_u = B/Σw each) a cumulative bound ≤ its `run_r` at p after the
    ledger's spending on the floor's account (`spent`, an `accounting.spending.Spent`; its
    `legacy` runs, which recorded none, counted at ρ = 1) and a noised phase 1 (the floor's
    `phase1` = (B₁, T₁): σ₁ is reserved here, `undetected.FloorAccount`); the
    floor joins the certified calibration as one more secret. With c swept, c maximises Σw/σ
    with σ(c) = max(σ_secrets(c), σ_floor(c)), then is raised by bisection to the largest c whose
    σ(c) stays within that σ: the floor's noise is paid anyway, so the secrets' examples get
    the weight it buys (docs/privacy.md "Undetected-secret floor"). Disabled ("off"): reported only.
    `value` (n_examples,): the LP objective's coefficient per example (`planning.value`, named
    `objective`, recorded in extra["objective"]); None maximises Σw as in Hush. The c rule is
    unchanged (Σw/σ).
    Raises InputError when some ρ > 1 (B too large for Σw) and PolicyError naming the secrets
    whose earlier spending makes their target unreachable."""
    import time

    from repoguard.accounting.calibrate import Infeasible, calibrate, passes_at
    from repoguard.accounting.spending import Spent
    from repoguard.accounting.divergences import DEFAULT_ALPHAS
    from repoguard.core.errors import PolicyError
    from repoguard.planning.weighting import SWEEP, SweepRow, pick_c, secret_caps, solve_weights

    t0 = time.perf_counter()
    if not (batch_size > 0 and steps >= 1 and clip_norm > 0 and c >= 0):
        raise InputError("plan: need batch size > 0, steps ≥ 1, clip norm > 0 and c ≥ 0")
    secrets = incidence.secrets
    n_ex, n_sec = incidence.matrix.shape
    if n_ex == 0:
        raise InputError("incidence: no examples to plan for")
    p = np.array([s.p for s in secrets], dtype=float)
    r = np.array([s.r for s in secrets], dtype=float)
    caps = secret_caps(p, r, cap)
    alphas = tuple(DEFAULT_ALPHAS)
    spent = spent if spent is not None else Spent()
    prior = spent.arrays(secrets, alphas)
    skl = prior.kl
    csc = incidence.matrix.tocsc()
    cols = [csc.indices[csc.indptr[j]:csc.indptr[j + 1]] for j in range(n_sec)]
    if adjacency == "replace":
        _refuse_grouped_replace(secrets, cols)
    test = None if holdout is None else np.asarray(holdout.test, dtype=bool)
    if test is not None and test.shape != (n_ex,):
        raise InputError(f"holdout: {test.shape[0]} entries for {n_ex} examples")
    train_rows = np.flatnonzero(~test) if test is not None else None
    from repoguard.planning.undetected import FloorAccount, as_floor, floor_record, untied_rho

    fp = as_floor(floor)
    und = fp.target if fp is not None else None
    enforce = und is not None and und.enabled
    acct = None
    if fp is not None:
        phase1 = fp.phase1
        acct = FloorAccount(und, fp.run_r, steps, method=accountant,
                            adjacency=adjacency, alphas=alphas, spent=spent)
        if phase1 is not None and enforce:
            untied_train = np.asarray(incidence.matrix.getnnz(axis=1) == 0) & (~test if test is not None else True)
            n_pub = int(np.sum(untied_train))
            if n_pub:
                acct.reserve_phase1(min(1.0, float(phase1[0]) / n_pub), int(phase1[1]))

    def solve(cval: float):
        if train_rows is None:
            return solve_weights(incidence.matrix, caps, cval, value=value)
        lp = solve_weights(incidence.matrix.tocsr()[train_rows], caps, cval,
                           value=None if value is None else np.asarray(value)[train_rows])
        w = np.zeros(n_ex)
        w[train_rows] = lp.w
        return dataclasses.replace(lp, w=w)

    def secrets_cal(rho, method: str):
        try:
            return calibrate([rho[ix] for ix in cols], p, r, steps, method=method, adjacency=adjacency,
                             alphas=alphas, spent=prior, progress=progress)
        except Infeasible as exc:
            raise PolicyError(_refusal(exc.secrets, secrets, skl, r)) from None

    def secrets_pass(rho, sigma: float) -> bool:
        return passes_at([rho[ix] for ix in cols], p, r, steps, sigma, method=accountant, adjacency=adjacency,
                         alphas=alphas, spent=prior)

    def run(cval: float, method: str | None, ceiling: float | None = None):
        """(lp, ρ, the secrets' calibration): None when some ρ > 1; a `Deferred` when the floor
        is on and the secrets already pass at its σ (the row's σ is then the floor's, and their
        own σ is computed only if a figure asks for it), or, with `ceiling`, when they fail at it
        (the row's σ exceeds `ceiling`: all the c refinement needs to know)."""
        lp = solve(cval)
        sw = float(lp.w.sum())
        rho = batch_size * lp.w / sw if sw > 0 else np.zeros(n_ex)
        if rho.size and rho.max() > 1 + 1e-12:
            return lp, rho, None
        rho = np.minimum(rho, 1.0)
        if method is None and enforce:
            try:
                sf = floor_sigma(rho)
            except PolicyError:
                # both spent: name the declared secrets first (their refusal says which and by
                # how much), as when their calibration ran before the floor's
                secrets_cal(rho, accountant)
                raise
            if sf > 0 and secrets_pass(rho, sf):
                return lp, rho, Deferred(lambda: secrets_cal(rho, accountant), at=sf)
            if ceiling is not None and not secrets_pass(rho, ceiling):
                return lp, rho, Deferred(lambda: secrets_cal(rho, accountant), above=ceiling)
        return lp, rho, secrets_cal(rho, method or accountant)

    def floor_sigma(rho) -> float:
        return acct.sigma(untied_rho(incidence.matrix, rho, test)) if enforce else 0.0

    def row_sigma(cal, rho) -> float:
        """max(σ_secrets, σ_floor); +inf when ρ > 1 or the secrets need more than a ceiling."""
        if cal is None or (isinstance(cal, Deferred) and cal.above is not None):
            return float("inf")
        return max(cal.at if isinstance(cal, Deferred) else cal.sigma, floor_sigma(rho))

    rows = []
    refine: list[dict] = []
    c_without = None
    if c > 0:
        lp, rho, cal = run(c, accountant)
        chosen = c
    else:
        results = {}
        for cval in (sweep or SWEEP):
            lp, rho, cal = run(cval, None)
            sw = float(lp.w.sum())
            sig = row_sigma(cal, rho)
            own = None if isinstance(cal, Deferred) else cal.sigma if cal is not None else float("inf")
            rows.append(SweepRow(cval, float(np.mean(lp.w > 0)), sw, sig,
                                 sw / sig if math.isfinite(sig) else 0.0, lp.stats(), sigma_secrets=own))
            results[cval] = (lp, rho, cal)
        try:
            chosen = pick_c(rows).c
        except ValueError:
            chosen = None
        if chosen is None:
            raise InputError(_too_big(batch_size, results[min(results)][0].w))
        if enforce:
            c_without = pick_without_floor(rows, results, lambda cval, x: not secrets_pass(results[cval][1], x))
            chosen = raise_c(chosen, rows, results, run, row_sigma, refine)
        lp, rho, cal = results[chosen]
    if cal is None:
        raise InputError(_too_big(batch_size, lp.w))
    rho_u = untied_rho(incidence.matrix, rho, test) if und is not None else 0.0
    cal_secrets = cal
    if enforce and rho_u > 0:
        # the floor joins the certified calibration as one more secret (its bound certified at σ)
        try:
            cal = calibrate([rho[ix] for ix in cols] + [np.full(und.k, rho_u)], np.append(p, und.p),
                            np.append(r, acct.r_run), steps, method=accountant, adjacency=adjacency, alphas=alphas,
                            spent=prior.plus(acct.spent_arrays()), progress=progress)
        except Infeasible as exc:
            if n_sec in exc.secrets:
                from repoguard.planning.undetected import infeasible_message
                raise PolicyError(infeasible_message(und, legacy=len(acct.legacy))) from None
            raise PolicyError(_refusal(exc.secrets, secrets, skl, r)) from None
    from repoguard.accounting.pld import pair_record

    ev = cal.evals
    plans = []
    records: dict[int, dict | None] = {}          # secrets sharing a ρ multiset share a record
    for j, s in enumerate(secrets):
        ren = {f"{a:g}": float(v) for a, v in zip(alphas, ev.renyi[j]) if math.isfinite(v)}
        mix, a_run, t_run = cal.pairs[j]
        if id(mix) not in records:
            records[id(mix)] = pair_record(mix, a_run, t_run) if mix.n > 0 else None
        plans.append(SecretPlan(id=s.id, p=s.p, r=s.r, achieved_bound=float(ev.bound[j]),
                                binding=ev.binding[j], kl_spent=float(ev.kl[j]), renyi_spent=ren,
                                n_examples=int(cols[j].size), sum_w=float(lp.w[cols[j]].sum()),
                                pair=records[id(mix)]))
    extra = {"lp": lp.stats(), "calibration": cal.stats, "alphas": list(alphas),
             "sweep": [dict(vars(row)) for row in rows], "c_rule": "maximise sum_w / sigma" if rows else "given",
             "ledger_secrets": sorted(k for k in spent.divergences if k in {s.id for s in secrets}),
             "objective": objective if value is not None else "examples"}
    if holdout is not None:
        extra["holdout"] = holdout.record()
    from repoguard.planning.retention import retention
    extra["retention"] = retention(incidence, lp.w, test)
    if accountant != "kl":
        try:
            kl_sigma = calibrate([rho[ix] for ix in cols], p, r, steps, method="kl", adjacency=adjacency,
                                 alphas=alphas, spent=prior).sigma
        except Infeasible:
            kl_sigma = float("inf")
        if enforce and math.isfinite(kl_sigma):
            kl_sigma = max(kl_sigma, acct.sigma(rho_u, method="kl", strict=False))
        extra["sigma_paper_kl"] = kl_sigma
        extra["sigma_ratio_kl_over_this"] = kl_sigma / cal.sigma if math.isfinite(kl_sigma) else None
    else:
        extra["sigma_paper_kl"], extra["sigma_ratio_kl_over_this"] = cal.sigma, 1.0
    extra["sigma_uniform"] = _sigma_uniform(cols, p, r, steps, n_ex=n_ex, test=test, batch_size=batch_size,
                                            method=accountant, adjacency=adjacency, alphas=alphas, prior=prior,
                                            floor=acct if enforce else None)
    extra["noise_reduction"] = extra["sigma_uniform"] / cal.sigma if math.isfinite(extra["sigma_uniform"]) else None
    if und is not None:
        sf = acct.sigma(rho_u) if enforce else 0.0
        extra["undetected_floor"] = floor_record(und, rho_u=rho_u, sigma=cal.sigma, sigma_floor=sf, steps=steps,
                                                 account=acct, cal=cal if enforce and rho_u > 0 else None,
                                                 index=n_sec, r_run=acct.r_run, adjacency=adjacency)
        own = cal_secrets.at if isinstance(cal_secrets, Deferred) else cal_secrets.sigma    # they pass at σ_floor
        extra["undetected_floor"]["binds"] = bool(enforce and sf >= own * (1 - 1e-9))
        if enforce and rows:
            extra["floor_bought"] = bought(incidence, test, results, chosen, c_without, refine)
    extra["seconds"] = time.perf_counter() - t0
    extra = _json_safe(extra)
    return Plan(sigma=cal.sigma, batch_size=float(batch_size), steps=int(steps), clip_norm=float(clip_norm),
                c=float(chosen), cap=cap, accountant=accountant, adjacency=adjacency,
                example_ids=list(incidence.example_ids), w=lp.w, rho=rho, secrets=plans, extra=extra,
                test=test, value=None if value is None else np.asarray(value, dtype=float))


def _sigma_uniform(cols, p, r, steps, *, n_ex, test, batch_size, method, adjacency, alphas, prior,
                   floor=None) -> float:
    """σ of standard DP-SGD for the same targets, B and T: every training example w = 1,
    ρ = B/n_train (the Hush paper's baseline, Hush §5.1), calibrated by the same accountant
    against the same earlier spending `prior` (`spending.SpentArrays`);
    with `floor` (an `undetected.FloorAccount`) at least σ_floor at ρ = B/n_train.
    +inf when B > n_train or no σ ≤ 1e6 meets the targets."""
    from repoguard.accounting.calibrate import Infeasible, calibrate

    train = np.ones(n_ex, dtype=bool) if test is None else ~test
    n_train = int(train.sum())
    if n_train == 0 or batch_size > n_train:
        return float("inf")
    rho = np.where(train, batch_size / n_train, 0.0)
    try:
        sig = float(calibrate([rho[ix] for ix in cols], p, r, steps, method=method, adjacency=adjacency,
                              alphas=alphas, spent=prior).sigma)
    except Infeasible:
        return float("inf")
    return max(sig, floor.sigma(batch_size / n_train, strict=False)) if floor is not None else sig


def _json_safe(obj):
    """Non-finite floats → None so plan.json stays standard JSON."""
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def _refuse_grouped_replace(secrets, cols) -> None:
    """Refuse "replace" adjacency for a secret carried by more than one example.

    The accountant's replace pair is (Σ_m π_m N(2m, σ²), N(0, σ²)) — the add/remove pair of
    Hush §4 [Charles et al. 2024 Thm 1] with sensitivity 2 per example. For one example it
    dominates the replace pair ((1−ρ)N(0) + ρN(1), (1−ρ)N(0) + ρN(−1)) (shift by the replaced
    gradient). For a group it does not dominate the true pair (Σ_m π_m N(m), Σ_m π_m N(−m)):
    with 10 examples, ρ = 0.3, σ = 3, T = 1, p = 0.2 it reports 0.8023 while the true pair's
    Neyman–Pearson bound is 0.8307 (issue 19; tests/test_randomness.py checks it against
    dp_accounting). Until a dominating group pair is proven, such plans are refused.

    Raises InputError naming such secrets (the first 5, then a count) and their numbers of examples."""
    grouped = [f"secret {s.id!r} is carried by {ix.size} examples" for s, ix in zip(secrets, cols) if ix.size > 1]
    if grouped:
        more = f" and {len(grouped) - 5} more" if len(grouped) > 5 else ""
        raise InputError(f"--adjacency replace: {', '.join(grouped[:5])}{more}; the replace accountant is "
                         "sound only for single-example secrets (use --adjacency zero-out)")


def _too_big(batch_size: float, w: np.ndarray) -> str:
    sw = float(w.sum())
    most = sw / float(w.max()) if w.size and w.max() > 0 else 0.0
    return (f"--batch-size {batch_size:g}: some sampling probability ρ = B·w/Σw would exceed 1 "
            f"(Σw = {sw:.4g}); use a batch size ≤ {math.floor(most)}")


def _refusal(idx: list[int], secrets, skl: np.ndarray, r: np.ndarray) -> str:
    shown = ", ".join(f"{secrets[j].id} (spent KL {skl[j]:.4g} nats, target r = {r[j]:.3g})" for j in idx[:10])
    more = f" and {len(idx) - 10} more" if len(idx) > 10 else ""
    return (f"ledger: no noise level (σ ≤ 1e6) keeps the cumulative bound within target for "
            f"{shown}{more}; their budget is spent by earlier runs")
