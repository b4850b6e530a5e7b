"""`repoguard compare`: what each way of fine-tuning would have taught the model, on one footing.

Every arm starts from the same base model and trains with the same B, T, learning rate, maximum
length and held-out split (the plan's), and is scored on exactly the same held-out examples and
lines (one `metrics.EvalSet`):

- `hush`      the plan as configured (weighted-Poisson DP-SGD, Hush Alg. 2);
- `hush-kl`, `hush-gdp`   the same with each LP cap (`weighting.secret_caps`);
- `uniform`   standard DP-SGD: every training example w = 1, ρ = B/n, σ calibrated by the same
              accountant so every secret meets its target (the Hush paper's baseline, §5.1);
- `drop`      examples tied to any secret removed, no noise, credentials redacted (excluding the
              secret directories by hand);
- `no-dp`     every training example, no noise (the ceiling; no protection);
- `two-phase`, `two-phase-noised`   [JFT §3] phase 1 on the public examples (clear, or DP-SGD with
              σ₁ for the undetected-secret floor), then the `hush` plan from phase 1's weights
              (`training.phases`); phase 1 adds T₁ steps (`phase1_steps`, default T) at the same
              B and lr.

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
import json
import time
from pathlib import Path

import numpy as np

from repoguard.artefacts import atomic_write_json
from repoguard.errors import InputError

ARMS = ("hush", "hush-kl", "hush-gdp", "uniform", "drop", "no-dp", "two-phase", "two-phase-noised")
TWO_PHASE = {"two-phase": "clear", "two-phase-noised": "noised"}


def arm_plan(name: str, base_plan, incidence, *, floor=None, ledger_spent=None, ledger_pairs=None):
    """(plan, private) for arm `name`, derived from `base_plan` (B, T, C, c, accountant, split);
    the LP-cap arms are calibrated against the same ledger spending as `base_plan`.

    Raises InputError for an unknown arm."""
    from repoguard.plan import Plan, build_plan

    test = base_plan.test_mask
    train = ~test
    n_ex = len(base_plan.example_ids)
    common = dict(batch_size=base_plan.batch_size, steps=base_plan.steps, clip_norm=base_plan.clip_norm)
    if name == "hush" or name in TWO_PHASE:     # two-phase: phase 2 is the plan (phase 1: `_two_phase`)
        return base_plan, True
    if name in ("hush-kl", "hush-gdp"):
        from repoguard.evaluation.split import Split
        split = Split(test=test, files=(), fraction=0.0, min_files=0, salt="", digest=_digest(base_plan))
        p = build_plan(incidence, c=base_plan.c, cap=name.split("-")[1], accountant=base_plan.accountant,
                       adjacency=base_plan.adjacency, holdout=split, floor=floor,
                       ledger_spent=ledger_spent, ledger_pairs=ledger_pairs, **common)
        return p, True
    if name in ("uniform", "no-dp", "drop"):
        keep = train & (incidence.matrix.getnnz(axis=1) == 0) if name == "drop" else train
        n = int(keep.sum())
        if n < base_plan.batch_size:
            raise InputError(f"compare: arm {name} has {n} training examples, fewer than B = {base_plan.batch_size:g}")
        w = keep.astype(float)
        rho = base_plan.batch_size * w / n
        sigma = base_plan.extra.get("sigma_uniform") if name == "uniform" else 1.0
        if name == "uniform" and not sigma:
            raise InputError("compare: the plan has no σ_uniform (re-run `repoguard plan`)")
        p = Plan(sigma=float(sigma), c=base_plan.c, cap="none", accountant=base_plan.accountant,
                 adjacency=base_plan.adjacency, example_ids=list(base_plan.example_ids), w=w, rho=rho,
                 test=test, extra={}, **common)
        return p, name == "uniform"
    raise InputError(f"--arms: unknown arm {name!r} (known: {', '.join(ARMS)})")


def _digest(plan) -> str:
    return (plan.extra.get("holdout") or {}).get("digest", "")


KEEP_ADAPTERS = ("hush", "no-dp")     # arms whose adapter compare keeps (owner-only) for `audit risk`


def run_compare(*, root: Path, out: Path, cfg, arms=ARMS, steps: int | None = None, seed: int | None = None,
                resume: bool = True, show_progress: bool = True, floor=None, risk: bool = True,
                risk_sample: int | None = 500, phase1_steps: int | None = None) -> dict:
    """Train and evaluate every arm in `arms`; returns {"arms": {name: result}, "base": metrics,
    "split": digest, "eval_set": sizes, "risk": summary or None}. Results are saved per arm in
    OUT/compare/ and reused when `resume` and the saved result has the same plan, split, steps
    and scored rows.

    The evaluation set is built once and the base model scored once; every arm is scored on that
    same `EvalSet` (checked: a run whose arms' rows differ raises RuntimeError). Arm directories
    `OUT/compare/<arm>/` are owner-only (0700): the logs and held-out metrics of secret text, and
    for `KEEP_ADAPTERS` the LoRA adapter (+ `OUT/compare/base_model/` for the embedded base) —
    never published, never in the ledger. With `risk` and both `hush` and `no-dp` adapters at
    hand, `audit.risk_compare.compare_risk` ranks their at-risk examples (`risk_sample` untied
    examples scored, None = all).

    `seed` None: fresh sampler and noise randomness per arm (compare means); an int makes every
    arm reproducible (tests only: a private model's noise must not be predictable).
    `phase1_steps`: T₁ of the two-phase arms (default `[training] phase1_steps`; 0 = T)."""
    import secrets as _secrets
    import shutil

    import torch

    from repoguard.accounting.ledger import spending
    from repoguard.corpus import load_corpus
    from repoguard.evaluation.metrics import Evaluator, plan_evaluator
    from repoguard.evaluation.periodic import PeriodicEval
    from repoguard.incidence import load_incidence
    from repoguard.plan import load_plan
    from repoguard.training.data import default_redactor, example_texts, tokenize
    from repoguard.training.base_model import embedded_base
    from repoguard.training.model import TINY_LORA_TARGETS, apply_lora, limit_cpu_threads, load_model
    from repoguard.training.randomness import secure_dir
    from repoguard.training.trainer import TrainSettings, plan_fingerprint, train

    base_plan = load_plan(out)
    if not base_plan.test_mask.any():
        raise InputError(f"{out / 'plan'}: the plan holds no examples out ([plan] holdout_fraction = 0)")
    incidence = load_incidence(out)
    corpus = load_corpus(out, root)
    texts = example_texts(corpus, base_plan.example_ids, redactor=default_redactor(out, root))
    device = torch.device("cpu")
    limit_cpu_threads(device)
    if cfg.model:
        base, tok = load_model(cfg.model, device=device)
    else:
        base, tok = embedded_base(max_length=cfg.max_length, show_progress=show_progress)
    seqs = tokenize(texts, tok, max_length=cfg.max_length)
    total = steps or base_plan.steps
    if not 1 <= total <= base_plan.steps:
        # σ of every private arm is calibrated for the plan's T: more steps would spend more than
        # the bounds the table reports.
        raise InputError(f"--steps: must be in 1..{base_plan.steps} (the plan's T); "
                         "re-plan with `repoguard plan --steps N` for longer arms")
    spent, pairs = spending(out / "ledger.jsonl")
    cdir = secure_dir(out / "compare")
    key = {"plan": plan_fingerprint(base_plan), "split": _digest(base_plan), "steps": total,
           "lr": cfg.learning_rate, "max_length": cfg.max_length}
    # One evaluation set and one score of the base for every arm.
    t1 = int(phase1_steps or cfg.phase1_steps or total)
    ev0 = plan_evaluator(base, tok, plan=base_plan, incidence=incidence, texts=texts, seqs=seqs,
                         max_length=cfg.max_length, max_examples=cfg.eval_max_examples,
                         max_lines=cfg.eval_max_lines, micro_batch_size=cfg.micro_batch_size or 8)
    es = ev0.es
    rows0 = _rows(es)
    doc = {"key": key, "split": key["split"], "eval_set": ev0.info(), "base": ev0(), "arms": {},
           "adapters": {}, "risk": None}
    base_saved = bool(cfg.model)
    for name in arms:
        path = cdir / f"{name}.json"
        akey = {**key, "phase1_steps": t1, "phase1_lr": cfg.phase1_lr} if name in TWO_PHASE else key
        arm_dir = cdir / name
        keep = name in KEEP_ADAPTERS
        if resume and path.is_file():
            old = json.loads(path.read_text(encoding="utf-8"))
            if (old.get("key") == akey and old["result"].get("eval_rows") == rows0
                    and (not keep or (arm_dir / "adapter" / "adapter_config.json").is_file())):
                doc["arms"][name] = old["result"]
                continue
        t0 = time.perf_counter()
        plan, private = arm_plan(name, base_plan, incidence, floor=floor, ledger_spent=spent,
                                 ledger_pairs=pairs)
        model = apply_lora(copy.deepcopy(base), r=cfg.lora_r, alpha=cfg.lora_alpha, dropout=cfg.lora_dropout,
                           targets=cfg.lora_targets or (() if cfg.model else TINY_LORA_TARGETS), seed=cfg.seed)
        if keep and not base_saved:
            from repoguard.artefacts import atomic_dir
            from repoguard.training.model import save_base_model

            with atomic_dir(cdir / "base_model") as tmp:
                save_base_model(base, tok, tmp)
            base_saved = True
        if keep and not cfg.model:       # lets `audit risk --run OUT/compare/<arm>` find the base
            model.peft_config["default"].base_model_name_or_path = str((cdir / "base_model").resolve())
        ev = Evaluator(model, es, tokenizer=tok, pad_id=tok.pad_token_id, micro_batch_size=cfg.micro_batch_size or 8)
        arm_seed = seed if seed is not None else _secrets.randbits(32)
        # A fixed seed (tests) fixes a private arm's batches and noise only through the explicit
        # insecure flag (training.randomness); without one, private arms draw from the OS.
        settings = TrainSettings(lr=cfg.learning_rate, micro_batch_size=cfg.micro_batch_size,
                                 checkpoint_every=total, steps=total, private=private, seed=arm_seed,
                                 insecure_reproducible=private and seed is not None)
        # Phase 2 of a two-phase arm starts from phase 1's model, not the base: score its step 0.
        pe = PeriodicEval(ev, every=cfg.eval_every, base=None if name in TWO_PHASE else doc["base"])
        shutil.rmtree(arm_dir, ignore_errors=True)
        secure_dir(arm_dir)
        phases = None
        if name in TWO_PHASE:
            phases, pe1 = _two_phase(TWO_PHASE[name], model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan,
                                     incidence=incidence, cfg=cfg, settings=settings, train_dir=arm_dir,
                                     evaluator=pe, floor=floor, steps1=t1, show_progress=show_progress,
                                     base_metrics=doc["base"])
            report = None
        else:
            report = train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=arm_dir,
                           settings=settings, ledger=None, publish=False, show_progress=show_progress,
                           evaluator=pe)
        shutil.rmtree(arm_dir / "checkpoints", ignore_errors=True)
        if keep:                          # owner-only: inside the 0700 arm directory
            from repoguard.artefacts import atomic_dir

            with atomic_dir(arm_dir / "adapter") as tmp:
                model.save_pretrained(tmp, save_embedding_layers=False)
            atomic_write_json(arm_dir / "privacy_report.json", {**report, "compare_arm": name})
        bounds = [s.achieved_bound / s.r for s in plan.secrets] if private and plan.secrets else []
        if name == "uniform" and floor is not None:
            from repoguard.plan import undetected_floor
            plan.extra["undetected_floor"] = undetected_floor(incidence.matrix, plan.rho, plan.sigma, total,
                                                              *floor, adjacency=plan.adjacency, test=plan.test_mask)
        n_train = int((~plan.test_mask).sum())
        result = {"sigma": plan.sigma if private else 0.0, "private": private,
                  "sum_w_over_n": float(plan.w.sum()) / n_train if n_train else None,
                  "slices": pe.history[-1]["slices"],
                  "curve": [{"step": h["step"], "loss": _pub(h["slices"]), "slices": _compact(h["slices"])}
                            for h in pe.history],
                  "bound_ratio_min": min(bounds) if bounds else None,
                  "bound_ratio_max": max(bounds) if bounds else None,
                  "undetected_floor": (plan.extra.get("undetected_floor") or {}).get("bounds") if private else None,
                  "seconds": time.perf_counter() - t0, "steps": total,
                  "eval_rows": _rows(ev.es)}
        if phases is not None:
            result["undetected_floor"] = phases["undetected_floor"]["both"]
            result["phase1"] = {k: phases["phase1"][k] for k in ("mode", "steps", "sigma", "n_examples")}
            result["curve"] = [{"step": h["step"] - t1, "loss": _pub(h["slices"]), "slices": _compact(h["slices"])}
                               for h in pe1.history] + \
                [{"step": h["step"], "loss": _pub(h["slices"]), "slices": _compact(h["slices"])}
                 for h in pe.history[1:]]
        atomic_write_json(path, {"key": akey, "result": result})
        doc["arms"][name] = result
    for name, r in doc["arms"].items():
        if r["eval_rows"] != rows0:       # every arm is scored on exactly the same test examples
            raise RuntimeError(f"compare: arm {name} was scored on other held-out rows than the base")
        if name in KEEP_ADAPTERS and (cdir / name / "adapter" / "adapter_config.json").is_file():
            doc["adapters"][name] = str(cdir / name)
    if risk and all(a in doc["adapters"] for a in KEEP_ADAPTERS):
        from repoguard.audit.risk_compare import compare_risk

        doc["risk"] = compare_risk(out=out, root=root, cfg=cfg, runs=doc["adapters"], incidence=incidence,
                                   plans={a: arm_plan(a, base_plan, incidence)[0] for a in KEEP_ADAPTERS},
                                   sample=risk_sample)
    atomic_write_json(cdir / "compare.json", doc)
    return doc


def _rows(es) -> dict[str, list[int]]:
    return {k: [int(x) for x in v] for k, v in es.slices.items()}


def _compact(slices: dict) -> dict:
    """slice → {loss, accuracy, exact_match}: what the report's curves need from one evaluation."""
    return {k: {m: v.get(m) for m in ("loss", "accuracy", "exact_match")} for k, v in slices.items()}


def _two_phase(mode: str, *, model, seqs, pad_id, plan, incidence, cfg, settings, train_dir, evaluator, floor,
               steps1: int, show_progress: bool, base_metrics=None):
    """Phase 1 (`mode`, T₁ = `steps1`, B and lr of the arm) then `plan`, unpublished; returns
    (phase record, phase 1's PeriodicEval). Phase 1's curve steps run −T₁…0 in the result."""
    from repoguard.evaluation.periodic import PeriodicEval
    from repoguard.training.phases import PhaseOne, prepare, run_two_phase

    p, r = floor if floor is not None else (1e-10, 1e-3)
    setup = prepare(plan, incidence, PhaseOne(mode=mode, steps=steps1, lr=cfg.phase1_lr, k=cfg.phase1_k, p=p, r=r),
                    lr=settings.lr)
    pe1 = PeriodicEval(evaluator.evaluator, every=evaluator.every, base=base_metrics)
    run_two_phase(model=model, seqs=seqs, pad_id=pad_id, plan=plan, setup=setup, train_dir=train_dir,
                  settings=settings, ledger_path=None, publish=False, show_progress=show_progress,
                  evaluator=evaluator, evaluator1=pe1)
    return setup.record, pe1


def _pub(slices: dict) -> float | None:
    from repoguard.evaluation.metrics import headline

    return headline(slices)


def format_table(doc: dict) -> str:
    """The text table: one row per arm, columns σ, Σw/n, each slice's loss/accuracy/exact match
    (public and secret-tied), achieved/target bound range, the undetected-secret floor (k = 1),
    wall time."""
    base = doc["base"]
    head = ("arm", "σ", "Σw/n", "public loss", "acc", "EM", "tied loss", "acc", "EM", "bound/r", "floor k=1", "s")
    rows = [("base", "—", "—", *_cells(base.get("public")), *_cells(base.get("secret-tied")), "—", "—", "—")]
    for name, r in doc["arms"].items():
        fl = (r.get("undetected_floor") or {}).get("1")
        br = ("≤ 1 (calibrated)" if name == "uniform" else "—" if r["bound_ratio_max"] is None else f"{r['bound_ratio_min']:.2g}…{r['bound_ratio_max']:.2g}")
        label = f"{name} (+{r['phase1']['steps']} public)" if r.get("phase1") else name
        rows.append((label, f"{r['sigma']:.4g}", f"{r['sum_w_over_n']:.3f}", *_cells(r["slices"].get("public")),
                     *_cells(r["slices"].get("secret-tied")), br, f"{fl:.2g}" if fl is not None else "none",
                     f"{r['seconds']:.0f}"))
    widths = [max(len(str(x[i])) for x in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(str(c).rjust(w) for c, w in zip(x, widths)) for x in [head, *rows]]
    return "\n".join(lines)


def _cells(m: dict | None) -> tuple[str, str, str]:
    if not m or m.get("loss") is None:
        return "—", "—", "—"
    em = m.get("exact_match")
    return f"{m['loss']:.3f}", f"{m['accuracy']:.3f}", "—" if em is None else f"{em:.2f}"
