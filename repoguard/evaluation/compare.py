"""`repoguard compare`: what each way of fine-tuning would have taught the model, on one footing.

Every arm starts from the same base model and trains with the same B, T, learning rate, maximum
length and held-out split (the plan's), and is scored on exactly the same held-out examples and
lines (one `metrics.EvalSet`). Every protected arm meets the same declared targets and the same
undetected-secret floor, calibrated against one snapshot of the ledger (`evaluation.protection`,
docs/commands/compare.md "Equal protection"):

- `hush`      the plan re-built at the floor and the ledger snapshot (weighted-Poisson DP-SGD,
              Hush Alg. 2);
- `hush-kl`, `hush-gdp`   the same with each LP cap (`weighting.secret_caps`);
- `uniform`   standard DP-SGD: every training example w = 1, ρ = B/n, σ calibrated by the same
              accountant so every secret and the floor meet their targets (Hush §5.1's baseline);
- `drop-dp`   examples tied to any secret removed, DP-SGD on the rest at σ_floor;
- `two-phase-noised`   [JFT §3.1] phase 1 on the public examples with the σ₁ the plan reserved,
              then the plan (σ ≥ σ_floor with both phases composed); phase 1 adds T₁ steps
              (`phase1_steps`, default T) at B₁ (`[training] phase1_batch_size`, default B).

References (no floor; marked so in the table, JSON and report): `drop` (tied examples removed, no
noise, credentials redacted), `no-dp` (every training example, no noise: the ceiling) and
`two-phase` (clear phase 1, then the hush plan made with the floor off).

Arm models are measurements: never published, nothing recorded in the ledger. Everything under
`OUT/compare/` is owner-only (0700): each arm's logs and held-out metrics in `<arm>/`, and the
adapters of `hush` and `no-dp` (`KEEP_ADAPTERS`, with the embedded base in `base_model/`) so
`audit.risk_compare` can show how DP moves the at-risk examples (`OUT/compare/risk.json`,
`OUT/audit/risk-compare-<arm>.json`). The reported metrics are aggregates over held-out examples;
the `drop` and `no-dp` numbers carry no privacy guarantee (they are for the operator). Each arm's
result is written to `OUT/compare/<arm>.json` as it finishes, so an interrupted compare resumes
at the next arm. Randomness (sampling, noise) is fresh per arm unless a seed is given (tests).
"""
from __future__ import annotations

import copy
import dataclasses
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

from repoguard.core.artefacts import atomic_write_json
from repoguard.core.errors import InputError
from repoguard.evaluation.protection import ARMS

TWO_PHASE = {"two-phase": "clear", "two-phase-noised": "noised"}
OPT_IN_ARMS = ("synth",)     # run only when named in --arms (the synthesis costs generation time)
SWEPT_OPT_IN = ("synth",)    # opt-in arms that meet the floor (by default), so `--floors` sweeps them too


def swept_arms(arms) -> list[str]:
    """The arms of `arms` that `--floors` trains again at each level: those of
    `protection.PROTECTED` and the opt-in arms that meet the floor (`SWEPT_OPT_IN`: synth)."""
    from repoguard.evaluation.protection import PROTECTED

    return [a for a in arms if a in PROTECTED or a in SWEPT_OPT_IN]


def arm_plan(name: str, base_plan, incidence, *, floor=None, snap=None, phase1=None):
    """(plan, private) of arm `name` (`protection.arm_plan`: the same declared targets, floor
    `floor` — a `config.Undetected` or None for the base plan's — and ledger
    snapshot `snap`, None = empty, for every arm). Raises InputError for an unknown arm."""
    from repoguard.evaluation.protection import arm_plan as _arm_plan

    ap = _arm_plan(name, base_plan, incidence, floor=floor, snap=snap, phase1=phase1)
    return ap.plan, ap.private


def _digest(plan) -> str:
    return (plan.extra.get("holdout") or {}).get("digest", "")


KEEP_ADAPTERS = ("hush", "no-dp")     # arms whose adapter compare keeps (owner-only) for `audit risk`


def parse_floors(text: str, p: float) -> tuple[float, ...]:
    """`--floors r1,r2,…` → the floor levels (each r of the undetected floor, p < r < 1, sorted,
    duplicates dropped). Raises InputError, one line, for an entry that is not a number or lies
    outside (p, 1)."""
    out = []
    for part in (x.strip() for x in str(text).split(",")):
        if not part:
            continue
        try:
            r = float(part)
        except ValueError:
            raise InputError(f"--floors: {part!r} is not a number (write e.g. --floors 1e-3,1e-2,0.1)") from None
        if not (math.isfinite(r) and p < r < 1):
            raise InputError(f"--floors: r = {part} must lie strictly between the floor's p = {p:g} and 1")
        out.append(r)
    if not out:
        raise InputError("--floors: give at least one level, e.g. --floors 1e-3,1e-2,0.1")
    return tuple(sorted(set(out)))


def run_compare(*, root: Path, out: Path, cfg, arms=ARMS, steps: int | None = None, seed: int | None = None,
                resume: bool = True, show_progress: bool = True, floor=None, risk: bool = True,
                risk_sample: int | None = 500, phase1_steps: int | None = None, floors=None,
                repeats: int = 1, synth: dict | None = None, device: str = "cpu") -> dict:
    """Train and evaluate every arm in `arms`; returns {"arms": {name: result}, "base": metrics,
    "split": digest, "eval_set": sizes, "risk": summary or None, "floor": the floor record,
    "ledger": the snapshot's summary, "levels": the floor sweep or None}. Results are saved per
    arm in OUT/compare/ and reused when `resume` and the saved result has the same plan, split,
    steps, floor, ledger head and scored rows.

    Equal protection (`evaluation.protection`): one `LedgerSnapshot` of `OUT/ledger.jsonl` is
    taken before any arm and every arm's plan is calibrated against it, at the declared targets
    and the floor `floor` (`config.Undetected`, a legacy (p, r), or None = the base plan's).
    `floors` (levels r, `parse_floors`): each arm of `protection.PROTECTED` in `arms`, and `synth`
    when named (`swept_arms`), is trained again at every level (floor (k, p, r_level), declared targets unchanged), under
    `OUT/compare/levels/`; the references once. `doc["levels"]`: {"k", "p", "r": levels,
    "arms": {arm: [{"r", "sigma", "public_loss", "floor_bound", "meets_floor", …} per level]},
    "references": {arm: {"public_loss", "floor_bound"}}, "best": [{"r", "arm", "public_loss"}]}.

    The evaluation set is built once and the base model scored once; every arm is scored on that
    same `EvalSet` (checked: a run whose arms' rows differ raises RuntimeError). Arm directories
    `OUT/compare/<arm>/` are owner-only (0700): the logs and held-out metrics of secret text, and
    for `KEEP_ADAPTERS` the LoRA adapter (+ `OUT/compare/base_model/` for the embedded base) —
    never published, never in the ledger. With `risk` and both `hush` and `no-dp` adapters at
    hand, `audit.risk_compare.compare_risk` ranks their at-risk examples (`risk_sample` untied
    examples scored, None = all).

    `seed` None: fresh sampler and noise randomness per arm (compare means); an int makes every
    arm reproducible (tests only: a private model's noise must not be predictable).
    `repeats` N > 1: every arm is trained N times (repeat i: LoRA init seed `[training] seed` + i,
    fresh sampler and noise randomness; `OUT/compare/<arm>.r<i>/`); `doc["arms"]` keeps repeat 0
    and `doc["repeats"]` = {arm: `repeat_summary`} (mean ± sample sd, min, max of the public and
    secret-tied losses).
    `device`: where every arm trains ("cpu", or "auto"/"cuda" for `bench/utility.py --full`;
    the base is loaded fp32 there too).
    `phase1_steps`: T₁ of the two-phase arms (default `[training] phase1_steps`; 0 = T).
    `synth`: the synth arm's SecPE settings {"n", "rounds", "variations", "clusters"} (missing or
    None entries: `synth_arm.SYNTH_ARM`); recorded in its result (`"synthesis"`) and its saved
    result's key, so other settings retrain it.
    Raises InputError (bad steps, no held-out split, unknown arm, a synth setting that is not a
    positive integer) and PolicyError (the ledger's
    spending leaves some target or the floor unreachable)."""
    from repoguard.source.corpus import load_corpus
    from repoguard.evaluation.metrics import plan_evaluator
    from repoguard.evaluation.protection import base_floor, snapshot
    from repoguard.evaluation.synth_arm import synth_settings
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.planning.plan import load_plan
    from repoguard.training.data import default_redactor, example_texts, tokenize
    from repoguard.training.base_model import embedded_base
    from repoguard.training.model import limit_cpu_threads, load_model, pick_device
    from repoguard.training.randomness import secure_dir
    from repoguard.training.trainer import plan_fingerprint
    synth = synth_settings(synth)           # before any work: a bad setting is a one-line InputError
    base_plan = load_plan(out)
    if not base_plan.test_mask.any():
        raise InputError(f"{out / 'plan'}: the plan holds no examples out ([plan] holdout_fraction = 0)")
    incidence = load_incidence(out)
    und = floor if floor is not None else base_floor(base_plan)
    levels = parse_floors(",".join(str(float(x)) for x in floors), und.p) if floors else None
    total = steps or base_plan.steps
    if not 1 <= total <= base_plan.steps:
        # σ of every private arm is calibrated for the plan's T: more steps would spend more than
        # the bounds the table reports.
        raise InputError(f"--steps: must be in 1..{base_plan.steps} (the plan's T); "
                         "re-plan with `repoguard plan --steps N` for longer arms")
    # One ledger state for every arm, read before any arm is planned (issue 26 item 2).
    snap = snapshot(out / "ledger.jsonl", und)
    corpus = load_corpus(out, root)
    texts = example_texts(corpus, base_plan.example_ids, redactor=default_redactor(out, root))
    device = pick_device(device)
    limit_cpu_threads(device)
    if cfg.model:
        base, tok = load_model(cfg.model, device=device, bf16=False)
    else:
        base, tok = embedded_base(max_length=cfg.max_length, device=device, show_progress=show_progress)
    seqs = tokenize(texts, tok, max_length=cfg.max_length)
    cdir = secure_dir(out / "compare")
    key = {"plan": plan_fingerprint(base_plan), "split": _digest(base_plan), "steps": total,
           "lr": cfg.learning_rate, "max_length": cfg.max_length, "floor": und.record(), "ledger": snap.head}
    t1 = int(phase1_steps or cfg.phase1_steps or total)
    b1 = float(getattr(cfg, "phase1_batch_size", 0) or 0) or base_plan.batch_size
    # One evaluation set and one score of the base for every arm; the code slices a company reads
    # it by (`evaluation.slices`) beside the public / secret-tied ones.
    from repoguard.evaluation.slices import code_slices, internal_importers
    from repoguard.source.gitrepo import open_repo

    importers = internal_importers(open_repo(root, allow_plain=True), corpus, incidence, base_plan.test_mask)
    ev0 = plan_evaluator(base, tok, plan=base_plan, incidence=incidence, texts=texts, seqs=seqs,
                         max_length=cfg.max_length, max_examples=cfg.eval_max_examples,
                         max_lines=cfg.eval_max_lines, micro_batch_size=cfg.micro_batch_size or 8,
                         extra_slices=code_slices(incidence, base_plan.test_mask, importers=importers))
    rows0 = ev0.es.slice_rows()
    doc = {"key": key, "split": key["split"], "eval_set": ev0.info(), "base": ev0(), "arms": {},
           "adapters": {}, "risk": None, "floor": {**und.record(), "account": und.account},
           "ledger": snap.record(), "levels": None}
    ctx = _Ctx(base=base, tok=tok, seqs=seqs, es=ev0.es, rows0=rows0, cfg=cfg, total=total, seed=seed,
               incidence=incidence, base_plan=base_plan, snap=snap, phase1=(b1, t1), resume=resume,
               show_progress=show_progress, base_metrics=doc["base"], cdir=cdir, base_saved=bool(cfg.model),
               corpus=corpus, redactor=default_redactor(out, root), synth=synth)
    plans = {}
    if repeats < 1:
        raise InputError(f"--repeats: must be ≥ 1, not {repeats}")
    if repeats > 1:
        doc["repeats"] = {}
    runs: dict[str, list[dict]] = {}
    for name in arms:
        doc["arms"][name], plans[name] = _run_arm(ctx, name, und, arm_dir=cdir / name, key=key,
                                                  keep=name in KEEP_ADAPTERS)
        runs[name] = [doc["arms"][name]]
        if repeats > 1:
            for i in range(1, repeats):
                rctx = dataclasses.replace(ctx, cfg=dataclasses.replace(cfg, seed=cfg.seed + i),
                                           seed=None if ctx.seed is None else ctx.seed + i)
                runs[name].append(_run_arm(rctx, name, und, arm_dir=cdir / f"{name}.r{i}",
                                           key={**key, "repeat": i}, keep=False)[0])
            doc["repeats"][name] = repeat_summary(runs[name])
    from repoguard.evaluation.slices import versus_drop_dp

    doc["versus"] = versus_drop_dp(runs)
    if levels:
        doc["levels"] = _sweep(ctx, swept_arms(arms), und, levels, doc, key)
    for name, r in doc["arms"].items():
        if r["eval_rows"] != rows0:       # every arm is scored on exactly the same test examples
            raise RuntimeError(f"compare: arm {name} was scored on other held-out rows than the base")
        if name in KEEP_ADAPTERS and (cdir / name / "adapter" / "adapter_config.json").is_file():
            doc["adapters"][name] = str(cdir / name)
    if risk and all(a in doc["adapters"] for a in KEEP_ADAPTERS):
        from repoguard.audit.risk_compare import compare_risk
        from repoguard.evaluation.protection import arm_plan as _arm_plan

        doc["risk"] = compare_risk(out=out, root=root, cfg=cfg, runs=doc["adapters"], incidence=incidence,
                                   plans={a: plans.get(a) or _arm_plan(a, base_plan, incidence, floor=und,
                                                                        snap=snap).plan for a in KEEP_ADAPTERS},
                                   sample=risk_sample)
    atomic_write_json(cdir / "compare.json", doc)
    return doc


@dataclass
class _Ctx:
    """What every arm of one compare shares: the base model and tokenizer, token sequences, the
    evaluation set and its rows, settings, the base plan, incidence and the ledger snapshot."""

    base: object
    tok: object
    seqs: list
    es: object
    rows0: dict
    cfg: object
    total: int
    seed: int | None
    incidence: object
    base_plan: object
    snap: object
    phase1: tuple
    resume: bool
    show_progress: bool
    base_metrics: dict
    cdir: Path
    base_saved: bool
    corpus: object = None      # the synth arm reads public and private texts through these
    redactor: object = None
    synth: dict | None = None  # the synth arm's SecPE settings (None: `synth_arm.SYNTH_ARM`)


def _run_arm(ctx: _Ctx, name: str, und, *, arm_dir: Path, key: dict, keep: bool):
    """Train, score and save one arm at floor `und` into `arm_dir` (result in `arm_dir`.json);
    returns (result, the arm's plan or None when a saved result was reused)."""
    import secrets as _secrets
    import shutil

    from repoguard.evaluation.metrics import Evaluator
    from repoguard.evaluation.periodic import PeriodicEval
    from repoguard.evaluation.protection import arm_plan as _arm_plan
    from repoguard.training.model import TINY_LORA_TARGETS, apply_lora
    from repoguard.training.randomness import secure_dir
    from repoguard.training.trainer import TrainSettings, train

    cfg, total = ctx.cfg, ctx.total
    path = arm_dir.with_name(arm_dir.name + ".json")
    akey = {**key, "floor": und.record()}
    if name in TWO_PHASE:
        akey.update(phase1_steps=ctx.phase1[1], phase1_batch_size=ctx.phase1[0], phase1_lr=cfg.phase1_lr)
    if name == "synth":         # other SecPE settings are another arm: never reuse across them
        from repoguard.evaluation.synth_arm import synth_settings

        akey["synthesis"] = synth_settings(ctx.synth)
    if ctx.resume and path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        if (old.get("key") == akey and old["result"].get("eval_rows") == ctx.rows0
                and (not keep or (arm_dir / "adapter" / "adapter_config.json").is_file())):
            return old["result"], None
    t0 = time.perf_counter()
    if name == "synth":
        from repoguard.evaluation.synth_arm import run_synth_arm

        result = run_synth_arm(ctx, und, arm_dir=arm_dir, t0=t0)
        atomic_write_json(path, {"key": akey, "result": result})
        return result, None
    ap = _arm_plan(name, ctx.base_plan, ctx.incidence, floor=und, snap=ctx.snap, phase1=ctx.phase1)
    plan, private = ap.plan, ap.private
    model = apply_lora(copy.deepcopy(ctx.base), r=cfg.lora_r, alpha=cfg.lora_alpha, dropout=cfg.lora_dropout,
                       targets=cfg.lora_targets or (() if cfg.model else TINY_LORA_TARGETS), seed=cfg.seed)
    if keep and not ctx.base_saved:
        from repoguard.core.artefacts import atomic_dir
        from repoguard.training.model import save_base_model

        with atomic_dir(ctx.cdir / "base_model") as tmp:
            save_base_model(ctx.base, ctx.tok, tmp)
        ctx.base_saved = True
    if keep and not cfg.model:       # lets `audit risk --run OUT/compare/<arm>` find the base
        model.peft_config["default"].base_model_name_or_path = str((ctx.cdir / "base_model").resolve())
    ev = Evaluator(model, ctx.es, tokenizer=ctx.tok, pad_id=ctx.tok.pad_token_id,
                   micro_batch_size=cfg.micro_batch_size or 8)
    arm_seed = ctx.seed if ctx.seed is not None else _secrets.randbits(32)
    # A fixed seed (tests) fixes a private arm's batches and noise only through the explicit
    # insecure flag (training.randomness); without one, private arms draw from the OS.
    settings = TrainSettings(lr=cfg.learning_rate, micro_batch_size=cfg.micro_batch_size,
                             checkpoint_every=total, steps=total, private=private, seed=arm_seed,
                             insecure_reproducible=private and ctx.seed is not None)
    # Phase 2 of a two-phase arm starts from phase 1's model, not the base: score its step 0.
    pe = PeriodicEval(ev, every=cfg.eval_every, base=None if name in TWO_PHASE else ctx.base_metrics)
    shutil.rmtree(arm_dir, ignore_errors=True)
    secure_dir(arm_dir)
    phases = None
    report = None
    if name in TWO_PHASE:
        phases, pe1 = _two_phase(TWO_PHASE[name], model=model, seqs=ctx.seqs, pad_id=ctx.tok.pad_token_id, plan=plan,
                                 incidence=ctx.incidence, cfg=cfg, settings=settings, train_dir=arm_dir,
                                 evaluator=pe, floor=und, steps1=ctx.phase1[1], batch1=ctx.phase1[0],
                                 show_progress=ctx.show_progress, base_metrics=ctx.base_metrics)
    else:
        report = train(model=model, seqs=ctx.seqs, pad_id=ctx.tok.pad_token_id, plan=plan, train_dir=arm_dir,
                       settings=settings, ledger=None, publish=False, show_progress=ctx.show_progress,
                       evaluator=pe)
    shutil.rmtree(arm_dir / "checkpoints", ignore_errors=True)
    if keep:                          # owner-only: inside the 0700 arm directory
        from repoguard.core.artefacts import atomic_dir

        with atomic_dir(arm_dir / "adapter") as tmp:
            model.save_pretrained(tmp, save_embedding_layers=False)
        atomic_write_json(arm_dir / "privacy_report.json", {**(report or {}), "compare_arm": name})
    bounds = [s.achieved_bound / s.r for s in plan.secrets] if private and plan.secrets else []
    n_train = int((~plan.test_mask).sum())
    result = {"sigma": plan.sigma if private else 0.0, "private": private,
              "sum_w_over_n": float(plan.w.sum()) / n_train if n_train else None,
              "slices": pe.history[-1]["slices"],
              "curve": pe.curve(),
              "bound_ratio_min": min(bounds) if bounds else None,
              "bound_ratio_max": max(bounds) if bounds else None,
              "undetected_floor": _run_floor(plan, ctx, und) if private else None,
              "seconds": time.perf_counter() - t0, "steps": total,
              "eval_rows": ev.es.slice_rows(),
              "protection": "floor" if ap.protected else "reference", "meets_floor": ap.meets_floor,
              "meets_targets": ap.meets_targets, "floor": ap.floor}
    if phases is not None:
        t1 = ctx.phase1[1]
        result["undetected_floor"] = phases["undetected_floor"]["both"] if "undetected_floor" in phases else None
        result["phase1"] = {k: phases["phase1"][k] for k in ("mode", "steps", "sigma", "n_examples")}
        result["curve"] = pe1.curve(shift=-t1) + pe.curve(skip=1)
    atomic_write_json(path, {"key": akey, "result": result})
    return result, plan


def repeat_summary(runs: list[dict]) -> dict:
    """Over an arm's repeats: {"n", "public_loss": [...], "tied_loss": [...], and per slice
    "<slice>_mean", "<slice>_sd" (sample standard deviation, 0 for one run), "<slice>_min",
    "<slice>_max"} for slices "public", "tied" (secret-tied) and the code slices
    (`slices.CODE_SLICES`: "public-code", "tied-code", "uses-internal"); None when not scored."""
    import statistics

    from repoguard.evaluation.slices import CODE_SLICES

    out: dict = {"n": len(runs)}
    for key, sl in (("public", "public"), ("tied", "secret-tied"), *((c, c) for c in CODE_SLICES)):
        vals = [((r.get("slices") or {}).get(sl) or {}).get("loss") for r in runs]
        vals = [float(v) for v in vals if v is not None]
        out[f"{key}_loss"] = vals
        out[f"{key}_mean"] = statistics.fmean(vals) if vals else None
        out[f"{key}_sd"] = statistics.stdev(vals) if len(vals) > 1 else (0.0 if vals else None)
        out[f"{key}_min"] = min(vals) if vals else None
        out[f"{key}_max"] = max(vals) if vals else None
    return out


def _run_floor(plan, ctx: _Ctx, und) -> dict:
    """{str(k): bound} this run alone gives a secret in k untied examples (k = 1, 10 and the
    floor's k), at the plan's ρ_u, σ and T: the `undetected_floor` column of earlier compares."""
    from repoguard.planning.undetected import run_floor_bounds

    rec = plan.extra.get("undetected_floor") or {}
    if isinstance(rec.get("bounds"), dict):
        return rec["bounds"]
    return run_floor_bounds(ctx.incidence.matrix, plan.rho, plan.sigma, plan.steps, und.p, und.r,
                            adjacency=plan.adjacency, test=plan.test_mask, ks=sorted({1, 10, und.k}))["bounds"]


def _sweep(ctx: _Ctx, protected: list[str], und, levels, doc: dict, key: dict) -> dict:
    """Train every arm of `protected` at each floor level r (floor (k, p, r), enforced), reusing
    the main results at the main floor's r; the references of `doc["arms"]` once. Returns the
    `doc["levels"]` record (see `run_compare`)."""
    from repoguard.training.randomness import secure_dir

    ldir = secure_dir(ctx.cdir / "levels")
    arms: dict[str, list] = {}
    for r in levels:
        lvl = dataclasses.replace(und, r=float(r), enabled=True)
        for name in protected:
            if und.enabled and float(r) == und.r:
                res = doc["arms"][name]
            else:
                res, _ = _run_arm(ctx, name, lvl, arm_dir=ldir / f"{name}@r={r:g}", key=key, keep=False)
                if res["eval_rows"] != ctx.rows0:
                    raise RuntimeError(f"compare: arm {name} at r = {r:g} was scored on other held-out rows")
            fl = res.get("floor") or {}
            arms.setdefault(name, []).append(
                {"r": float(r), "sigma": res["sigma"], "public_loss": _pub(res["slices"]),
                 "floor_bound": fl.get("bound"),
                 "meets_floor": False if res.get("meets_targets") is False else res.get("meets_floor"),
                 "sum_w_over_n": res.get("sum_w_over_n"), "seconds": res.get("seconds"),
                 "phase1_sigma": (res.get("phase1") or {}).get("sigma")})
    refs = {name: {"public_loss": _pub(res["slices"]), "floor_bound": (res.get("floor") or {}).get("bound"),
                   "sigma": res["sigma"]}
            for name, res in doc["arms"].items() if res.get("protection") == "reference"}
    best = []
    for i, r in enumerate(levels):
        cands = [(v[i]["public_loss"], name) for name, v in arms.items()
                 if v[i]["public_loss"] is not None and v[i]["meets_floor"]]
        if cands:
            loss, name = min(cands)
            best.append({"r": float(r), "arm": name, "public_loss": loss})
        else:
            best.append({"r": float(r), "arm": None, "public_loss": None})
    return {"k": und.k, "p": und.p, "r": [float(r) for r in levels], "arms": arms, "references": refs,
            "best": best}


def _two_phase(mode: str, *, model, seqs, pad_id, plan, incidence, cfg, settings, train_dir, evaluator, floor,
               steps1: int, batch1: float = 0.0, show_progress: bool, base_metrics=None):
    """Phase 1 (`mode`, T₁ = `steps1`, B₁ = `batch1` (0 = B), lr of the arm) then `plan`,
    unpublished; returns (phase record, phase 1's PeriodicEval). Phase 1's curve steps run −T₁…0
    in the result. `floor` (a `config.Undetected`; None: k = 1 at the default (p, r)) sets phase 1's (k, p, r); a
    noised phase 1 uses the σ₁ the plan reserved (`phases.reserved_sigma1`)."""
    from repoguard.evaluation.periodic import PeriodicEval
    from repoguard.training.phases import PhaseOne, prepare, run_two_phase
    from repoguard.core.config import Undetected

    und = floor if floor is not None else Undetected()     # k = 1 at the default (p, r)
    setup = prepare(plan, incidence, PhaseOne(mode=mode, steps=steps1, lr=cfg.phase1_lr, batch_size=batch1,
                                              k=und.k, p=und.p, r=und.r), lr=settings.lr)
    pe1 = PeriodicEval(evaluator.evaluator, every=evaluator.every, base=base_metrics)
    run_two_phase(model=model, seqs=seqs, pad_id=pad_id, plan=plan, setup=setup, train_dir=train_dir,
                  settings=settings, ledger_path=None, publish=False, show_progress=show_progress,
                  evaluator=evaluator, evaluator1=pe1)
    return setup.record, pe1


def _pub(slices: dict) -> float | None:
    from repoguard.evaluation.metrics import headline

    return headline(slices)
