"""Two-phase fine-tuning [JFT: Shi et al. 2022, "Just Fine-tune Twice", §3; Hush Alg. 2].

Phase 1 trains on the *public* examples only: tied to no secret in `OUT/incidence/`, not in the
held-out split (`plan.test_mask`), with credentials redacted (the texts come through
`training.data.default_redactor` like every training text), uniformly sampled (ρ₁ = B₁/n_public)
for T₁ steps at learning rate lr₁. Phase 2 starts from phase 1's LoRA weights and runs the plan
exactly as a single-phase run would (weighted-Poisson DP-SGD, the plan's ρ, σ, B, T, C).

Why the plan's accounting is unchanged for every declared secret: phase 1 never samples an
example tied to a secret (checked per batch, `PhaseOneLeak`), so its output is the same function
of the public examples in both datasets of any adjacent pair for secret j; phase 2's start is a
fixed point of the adjacency and phase 2 is the plan's mechanism [Hush §4: the dominating pair
depends on ρ, σ, T only]. The ledger entries of the run are the plan's (phase 2 = the plan).

Phase 1 modes:

* `clear` (default) — no clipping and no noise (the --no-dp path). An undetected secret in a
  public example gets no bound (1). The ledger remembers which examples were trained in the clear
  (`clear_example_ids` of each entry: every public example phase 1 could sample, a conservative
  superset of those it did sample; the sampled batches themselves are never recorded).
* `noised` [JFT §3.1] — DP-SGD over the public examples with clip norm C and σ₁. When the plan
  has an undetected-secret floor (the default), `repoguard plan` reserved σ₁ for it
  (`undetected.FloorAccount.reserve_phase1`: phase 1 alone spends half the floor's headroom) and
  calibrated the plan's σ with phase 1 counted as spent, so the floor holds over both phases; a
  plan without that reservation, or made for another ρ₁/T₁, is refused. Without a floor, σ₁ is
  the smallest noise multiplier such that an undetected secret confined to k public examples
  (ρ₁ each, T₁ steps) meets the default (p, r) (`planning.undetected.phase1_sigma`, the same
  calibration the plan's reservation runs). The undetected-secret floor after both phases is
  the composition of the phase-1 and phase-2 pairs of those k examples
  (`accounting.compose.composed_bound`: divergences add, privacy-loss distributions convolve),
  reported in the privacy report and in every ledger entry of the run ("phases").

A clear phase 1 breaks the floor (every public example trained without noise), so with the
floor on it is refused; it runs only with `[defaults] undetected = "off"`.

Files (all under the owner-only `OUT/train/internal/phase1/`): `train_log.jsonl` (phase 1's
per-step batch statistics), `eval.json` (held-out evaluations of phase 1), `checkpoints/`
(resume inside phase 1) and `result/` (phase 1's final LoRA weights and settings, what phase 2
starts from and a resume inside phase 2 relies on; deleted when phase 2 completes). Nothing of
phase 1 is published except what `phases` records: its settings, σ₁, the floor, and (clear
mode) the ledger's list of example ids. Resume: phase 2's checkpoints record `phase = 2`, phase
1's `phase = 1`; `--resume` continues inside phase 1 (then runs phase 2) or inside phase 2.
"""
from __future__ import annotations

import json
import logging
import secrets as _secrets
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from repoguard.core.errors import InputError

log = logging.getLogger("repoguard")

MODES = ("clear", "noised")
PHASE1_SALT = 0x9A5E1        # insecure-reproducible runs: phase 1's sampler seed = seed ^ this
PHASE1_DIR = "phase1"        # under OUT/train/internal/


class PhaseOneLeak(RuntimeError):
    """Phase 1 drew an example that is tied to a secret or held out (ρ₁ = 0 makes it impossible;
    checked anyway, like the trainer's held-out check)."""


@dataclass(frozen=True)
class PhaseOne:
    """Phase-1 settings: `mode` ("clear" | "noised"), `steps` T₁ (0 = the plan's T), `lr`
    (0 = phase 2's), `batch_size` B₁ (0 = the plan's B), `k` (noised: examples an undetected
    secret is confined to) and the floor target (p, r) (the config's defaults)."""

    mode: str = "clear"
    steps: int = 0
    lr: float = 0.0
    batch_size: float = 0.0
    k: int = 1
    p: float = 1e-10
    r: float = 1e-3

    @classmethod
    def from_config(cls, cfg, *, floor: tuple[float, float]) -> "PhaseOne":
        """From `[training]` (`config.TrainingConfig`) and the default (p, r)."""
        return cls(mode=cfg.phase1, steps=cfg.phase1_steps, lr=cfg.phase1_lr, batch_size=cfg.phase1_batch_size,
                   k=cfg.phase1_k, p=floor[0], r=floor[1])


@dataclass
class PhaseSetup:
    """Everything phase 1 needs, derived from the plan: `plan1` its plan (uniform ρ₁ on the
    public examples, σ₁, B₁, T₁, C; held-out split of the plan), `public` bool (n,) in plan order,
    `lr` phase 1's learning rate, `record` the JSON record of phase 1 and the undetected floor
    (privacy report and ledger "phases"), `clear_ids` the example ids trained in the clear
    (empty for a noised phase)."""

    plan1: object
    public: np.ndarray
    lr: float
    record: dict
    clear_ids: tuple[str, ...]


def public_mask(plan, incidence) -> np.ndarray:
    """bool (n,) in plan order: True for examples tied to no secret in `incidence` and not held
    out. An example the incidence does not list counts as tied (never public)."""
    tied_rows = set(np.flatnonzero(incidence.matrix.getnnz(axis=1) > 0).tolist())
    known = {eid: i in tied_rows for i, eid in enumerate(incidence.example_ids)}
    untied = np.array([known.get(eid) is False for eid in plan.example_ids], dtype=bool)
    return untied & ~plan.test_mask


def phase_one_plan(plan, public: np.ndarray, *, steps: int, batch_size: float, sigma: float):
    """Phase 1's plan: w = 1 on `public`, 0 elsewhere; ρ₁ = B₁/n_public [uniform Poisson
    sampling]; σ₁ = `sigma` (a clear phase passes 1.0, unused); C, accountant and adjacency of
    `plan`; no secrets. Its `test` mask is every non-public example (tied or held out), so the
    trainer's per-batch held-out check (`trainer.train`) refuses any of them at every step.
    Raises InputError when B₁ exceeds n_public."""
    from repoguard.planning.plan import Plan

    n = int(public.sum())
    if n == 0:
        raise InputError("two-phase: no public example (every training example is tied to a secret or held out)")
    if batch_size > n:
        raise InputError(f"two-phase: phase 1's batch size {batch_size:g} exceeds the {n} public examples "
                         "([training] phase1_batch_size)")
    w = public.astype(float)
    return Plan(sigma=float(sigma), batch_size=float(batch_size), steps=int(steps), clip_norm=plan.clip_norm,
                c=plan.c, cap="none", accountant=plan.accountant, adjacency=plan.adjacency,
                example_ids=list(plan.example_ids), w=w, rho=batch_size * w / n, secrets=[],
                extra={"phase": 1}, test=~public)


def reserved_sigma1(floor: dict, rho1: float, steps1: int) -> float:
    """σ₁ the plan reserved for a noised phase 1 (`undetected.FloorAccount.reserve_phase1`): the
    plan's σ meets the floor only over both phases with phase 1 at exactly this (ρ₁, T₁, σ₁).
    Raises InputError when the plan reserved none, or for another ρ₁ or T₁."""
    res = floor.get("phase1")
    if not res:
        raise InputError("two-phase noised: the plan reserved no share of the undetected floor for phase 1; re-run "
                         "`repoguard plan` with [training] phases = 2 and phase1 = \"noised\" in repoguard.toml")
    if abs(float(res["rho"]) - rho1) > 1e-9 * max(1.0, rho1) or int(res["steps"]) != int(steps1):
        raise InputError(f"two-phase noised: the plan reserved phase 1 at ρ₁ = {res['rho']:.4g}, T₁ = {res['steps']}, "
                         f"not ρ₁ = {rho1:.4g}, T₁ = {steps1}; re-run `repoguard plan` with the same [training] "
                         "phase1_batch_size and phase1_steps")
    return float(res["sigma"])


def two_phase_floor_bounds(*, k_values, rho1: float, sigma1: float, steps1: int, rho2: float, sigma2: float,
                           steps2: int, p: float, r: float, accountant: str, adjacency: str) -> dict:
    """The bound a secret nobody declared or detected, living in k public examples, gets from
    phase 1 alone, phase 2 alone, and both composed (`compose.composed_bound`; σ₁ = 0 is a
    clear phase: bound 1). Returns {"p", "r", "rho_phase1", "rho_phase2", "phase1", "phase2",
    "both", "meets_r"} with the per-phase entries keyed by str(k)."""
    from repoguard.accounting.calibrate import METHODS
    from repoguard.accounting.compose import composed_bound

    method = accountant if accountant in METHODS else "best"
    out = {"p": p, "r": r, "rho_phase1": rho1, "rho_phase2": rho2, "phase1": {}, "phase2": {}, "both": {},
           "meets_r": {}}
    for k in k_values:
        one = (np.full(k, rho1), sigma1, steps1)
        two = (np.full(k, rho2), sigma2, steps2)
        key = str(k)
        out["phase1"][key] = composed_bound([one], p, adjacency=adjacency, method=method)
        out["phase2"][key] = composed_bound([two], p, adjacency=adjacency, method=method)
        out["both"][key] = composed_bound([one, two], p, adjacency=adjacency, method=method)
        out["meets_r"][key] = out["both"][key] <= r
    return out


def prepare(plan, incidence, opts: PhaseOne, *, lr: float, private: bool = True) -> PhaseSetup:
    """Phase 1's plan and record for `plan` (phase 2) and `incidence`. `lr`: phase 2's learning
    rate (phase 1's default); `private`: False for a --no-dp run (phase 1 is then clear, no σ₁,
    no floor). Raises InputError for an unknown mode, no public example or B₁ > n_public."""
    if opts.mode not in MODES:
        raise InputError(f"--phase1: must be one of {', '.join(MODES)}, not {opts.mode!r}")
    if list(incidence.example_ids) != list(plan.example_ids):
        log.debug("two-phase: plan and incidence list examples in different orders; matched by id")
    public = public_mask(plan, incidence)
    steps1 = int(opts.steps) or plan.steps
    b1 = float(opts.batch_size) or plan.batch_size
    lr1 = float(opts.lr) or float(lr)
    n_pub = int(public.sum())
    rho1 = b1 / n_pub if n_pub else 0.0
    noised = opts.mode == "noised" and private
    floor = plan.extra.get("undetected_floor") or {}
    if private and floor.get("enabled") and not noised and n_pub:
        raise InputError("two-phase: a clear phase 1 trains every public example without noise, which breaks the "
                         "plan's undetected-secret floor; set [training] phase1 = \"noised\" (σ₁ reserved by "
                         "`repoguard plan`) or opt out with [defaults] undetected = \"off\"")
    if noised and n_pub and floor.get("enabled"):
        sigma1 = reserved_sigma1(floor, rho1, steps1)
    else:
        from repoguard.planning.undetected import phase1_sigma

        # no floor, so no reservation in the plan: planning's σ₁ for k examples at (p, r)
        sigma1 = phase1_sigma(rho1, steps1, k=opts.k, p=opts.p, r=opts.r, accountant=plan.accountant,
                              adjacency=plan.adjacency) if noised and n_pub else 0.0
    plan1 = phase_one_plan(plan, public, steps=steps1, batch_size=b1, sigma=sigma1 if noised else 1.0)
    phase1 = {"mode": "noised" if noised else "clear", "steps": steps1, "batch_size": b1, "learning_rate": lr1,
              "n_examples": n_pub, "rho": rho1, "sigma": sigma1,
              "clip_norm": plan.clip_norm if noised else None,
              "examples": "tied to no secret, not held out, credentials redacted; uniform Poisson sampling"}
    record = {"phases": 2, "phase1": phase1}
    if noised:
        from repoguard.accounting.divergences import mixture, pair_shift
        from repoguard.accounting.pld import pair_record

        phase1["target"] = {"k": int(opts.k), "p": opts.p, "r": opts.r}
        phase1["pair"] = pair_record(mixture(np.full(opts.k, rho1)), pair_shift(sigma1, plan.adjacency), steps1)
    if private:
        rho2 = float(plan.rho[public].max()) if n_pub else 0.0
        record["undetected_floor"] = two_phase_floor_bounds(
            k_values=sorted({1, int(opts.k)}), rho1=rho1, sigma1=sigma1, steps1=steps1, rho2=rho2,
            sigma2=plan.sigma, steps2=plan.steps, p=opts.p, r=opts.r, accountant=plan.accountant,
            adjacency=plan.adjacency)
    record["guarantee"] = (
        "declared secrets: the plan's per-secret bounds (phase 1 never samples an example tied to a "
        "secret or held out); " + (
            f"secrets nobody declared or detected in k public examples: the undetected floor after both "
            f"phases (σ₁ = {sigma1:.4g} calibrated for k = {opts.k})" if noised else
            "examples tied to no secret were trained in the clear in phase 1: no bound for a secret "
            "the analyzers missed; their ids are in the ledger (clear_example_ids)"))
    ids = tuple(eid for eid, pub in zip(plan.example_ids, public) if pub) if not noised else ()
    return PhaseSetup(plan1=plan1, public=public, lr=lr1, record=record, clear_ids=ids)


def phase_one_settings(settings, setup: PhaseSetup):
    """Phase 1's `trainer.TrainSettings` from phase 2's: lr₁, T₁; private only when noised (and
    phase 2 private); seeds: OS entropy for a private run (a clear phase too: its batches are
    nobody's business), `seed ^ PHASE1_SALT` for --no-dp and insecure-reproducible runs (never
    phase 2's streams)."""
    noised = setup.record["phase1"]["mode"] == "noised"
    fixed = settings.insecure_reproducible or not settings.private
    seed = (int(settings.seed) ^ PHASE1_SALT) if fixed else _secrets.randbits(63)
    return replace(settings, lr=setup.lr, steps=None, private=noised, seed=seed, noise_seed=None,
                   insecure_reproducible=noised and settings.insecure_reproducible,
                   keep_final_checkpoint=False, phase=1)


def run_two_phase(*, model, seqs, pad_id: int, plan, setup: PhaseSetup, train_dir: str | Path, settings,
                  ledger_path: str | Path | None, resume: bool = False, dist=None, show_progress: bool = True,
                  publish: bool = True, evaluator=None, evaluator1=None, on_step=None) -> dict:
    """Phase 1 (`setup.plan1`, owner-only under `train_dir/internal/phase1/`), then phase 2 (the
    plan, `trainer.train` into `train_dir` as a single-phase run would, its ledger entries carrying
    `setup.clear_ids` and `setup.record`). `on_step(phase, step)` is called after each step
    (tests). `evaluator1`: phase 1's held-out evaluation hook (owner-only eval.json).

    Returns phase 2's privacy report with "phases" = `setup.record`.

    Raises InputError (no checkpoint or phase-1 result to resume, a phase-1 result made with other
    settings), PolicyError (the ledger refuses the plan: checked before phase 1 starts) and
    `PhaseOneLeak`."""
    from repoguard.training.ddp import Dist
    from repoguard.training.guard import LedgerGuard
    from repoguard.training.randomness import secure_dir
    from repoguard.training.trainer import INTERNAL, latest_checkpoint, plan_fingerprint, train

    dist = dist or Dist()
    train_dir = Path(train_dir)
    p1dir = train_dir / INTERNAL / PHASE1_DIR
    result = p1dir / "result"
    settings1 = phase_one_settings(settings, setup)
    key = {"plan": plan_fingerprint(setup.plan1), "lr": setup.lr, "mode": setup.record["phase1"]["mode"]}
    guard = None
    if publish and settings.private:
        guard = LedgerGuard(ledger_path, clear_example_ids=setup.clear_ids, phases=setup.record)
    done = _read_result_key(result)
    if not resume:
        if dist.is_main:
            shutil.rmtree(p1dir, ignore_errors=True)
        done = None
        if guard is not None and dist.is_main:
            guard.check(plan)                 # refuse before phase 1 spends any compute
    elif done is not None and done != key:
        raise InputError(f"{result}: phase 1 was run with other settings (steps, batch size, σ₁, lr or mode); "
                         "start afresh without --resume")
    if dist.is_main:
        secure_dir(train_dir / INTERNAL)
        secure_dir(p1dir)
    dist.barrier()
    resume2 = False
    if done is None:
        resume1 = resume and latest_checkpoint(p1dir / "checkpoints") is not None
        if resume and not resume1:
            raise InputError(f"{p1dir}: no phase-1 checkpoint or result to resume from")
        _check_batches(setup)
        train(model=model, seqs=seqs, pad_id=pad_id, plan=setup.plan1, train_dir=p1dir, settings=settings1,
              ledger=None, resume=resume1, dist=dist, show_progress=show_progress, publish=False,
              evaluator=evaluator1, on_step=(lambda s: on_step(1, s)) if on_step else None)
        if dist.is_main:
            _save_result(result, model, key)
        dist.barrier()
    else:
        _load_result(result, model)
        resume2 = resume and latest_checkpoint(train_dir / "checkpoints") is not None
    settings2 = replace(settings, phase=2)
    report = train(model=model, seqs=seqs, pad_id=pad_id, plan=plan, train_dir=train_dir, settings=settings2,
                   ledger=guard, resume=resume2, dist=dist, show_progress=show_progress, publish=publish,
                   evaluator=evaluator, on_step=(lambda s: on_step(2, s)) if on_step else None,
                   report_extra={"phases": setup.record})
    if dist.is_main:
        shutil.rmtree(result, ignore_errors=True)     # the adapter supersedes it
    return report


def _check_batches(setup: PhaseSetup) -> None:
    """Phase 1's plan may sample only public examples (ρ₁ = 0 elsewhere): checked before any step."""
    rho = setup.plan1.rho
    if np.any(rho[~setup.public] != 0):
        raise PhaseOneLeak("phase 1: an example tied to a secret or held out has ρ₁ > 0")


def _read_result_key(result: Path) -> dict | None:
    f = result / "state.json"
    if not f.is_file():
        return None
    try:
        return json.loads(f.read_text(encoding="utf-8"))["key"]
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"{f}: unreadable phase-1 result ({exc}); start afresh without --resume") from None


def _save_result(result: Path, model, key: dict) -> None:
    """Phase 1's trainable (LoRA) parameters and settings, atomically, owner-only."""
    from safetensors.torch import save_file

    from repoguard.core.artefacts import atomic_dir, atomic_write_json
    from repoguard.training.randomness import secure_tree

    with atomic_dir(result) as tmp:
        save_file({n: p.detach().cpu().contiguous() for n, p in model.named_parameters() if p.requires_grad},
                  str(tmp / "lora.safetensors"))
        atomic_write_json(tmp / "state.json", {"key": key})
        secure_tree(tmp)


def _load_result(result: Path, model) -> None:
    import torch
    from safetensors.torch import load_file

    tensors = load_file(str(result / "lora.safetensors"))
    with torch.no_grad():
        for n, p in model.named_parameters():
            if not p.requires_grad:
                continue
            if n not in tensors:
                raise InputError(f"{result}: phase-1 result lacks parameter {n} (different LoRA settings?)")
            p.copy_(tensors[n].to(p.device, p.dtype))
