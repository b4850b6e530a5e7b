"""How DP moves the at-risk examples: the at-risk ranking of two `repoguard compare` arms side by side.

[Stock et al. 2022 §3.2 lazy sampling; issue 17 item 2.] `compare` keeps the LoRA adapters of its
`hush` (the plan's weighted-Poisson DP-SGD) and `no-dp` (every example, no noise) arms, trained
from the same base with the same B, T, learning rate and split. This module runs
`audit.risk.run_risk_audit` on both — same examples (the same seeded sample of untied ones), the
same tokenizer, hence the same windows, in the same order (checked) — and lines them up: for the
windows the `no-dp` model puts most at risk, where `hush` ranks them; per secret, the worst and
median risk score under each arm.

Outputs: `OUT/audit/risk-compare-<arm>.json` (+ `.npz`), the usual risk documents (the report's
at-risk section draws one scatter plot per arm), and `OUT/compare/risk.json` (owner-only, like
everything under `OUT/compare/`): the side-by-side document below. Text is a prefix of the
*redacted* example (`audit.risk.PREFIX_CHARS` characters); a credential window names only its rule.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

ARMS = ("no-dp", "hush")      # reference (no guarantee) first, then the DP arm


def compare_risk(*, out: Path, root: Path, cfg, runs: dict[str, str], incidence, plans: dict,
                 sample: int | None = 500, top: int = 10, seed: int = 0) -> dict:
    """Rank the at-risk windows of the `no-dp` and `hush` runs (`runs`: arm → run directory with
    `adapter/` and `privacy_report.json`; `plans`: arm → its `Plan`, for ρ) and compare them.

    Args:
        sample: untied examples scored (None = all; tied and credential examples always are).
        top: windows of the side-by-side table (the `no-dp` run's most at risk).
    Returns {"arms", "n_windows", "top": rows, "secrets": rows, "overlap_top": n, "median_tied"}
    and writes it to `OUT/compare/risk.json`. Raises RuntimeError when the two audits scored
    different windows (they cannot: same rows, same tokenizer), InputError as `run_risk_audit`."""
    from repoguard.core.artefacts import atomic_write_json
    from repoguard.audit.risk import run_risk_audit

    out = Path(out)
    docs, cols = {}, {}
    for arm in ARMS:
        dest = out / "audit" / f"risk-compare-{arm}.json"
        docs[arm] = run_risk_audit(out=out, root=root, cfg=cfg, run_dir=Path(runs[arm]), model_dir=cfg.model or None,
                                   sample=sample, per_secret=top, seed=seed, device="cpu", dest=dest, plan=plans[arm])
        with np.load(dest.with_suffix(".npz"), allow_pickle=False) as z:
            cols[arm] = {k: z[k] for k in ("plan_row", "credential", "log_prob", "loss", "loss_calibration",
                                           "score", "rank")}
    ref, dp = cols["no-dp"], cols["hush"]
    if not (np.array_equal(ref["plan_row"], dp["plan_row"]) and np.array_equal(ref["credential"], dp["credential"])):
        raise RuntimeError("risk compare: the two arms were scored on different windows")

    def where(c: dict, q: int) -> dict:
        best = float(np.max(c["log_prob"][q]))
        return {"rank": int(c["rank"][q]), "score": _num(float(c["score"][q])),
                "log10_prob_best": _num(best / math.log(10)),
                "calibrated_loss": float(c["loss"][q] - c["loss_calibration"][q])}

    rows = []
    for r in docs["no-dp"]["top"][:top]:
        q = int(r["window_index"])
        rows.append({k: r[k] for k in ("example", "path", "start_line", "window", "rule", "secrets", "prefix")}
                    | {"no-dp": where(ref, q), "hush": where(dp, q)})
    by = {arm: {t["secret"]: t for t in docs[arm]["secrets"]} for arm in ARMS}
    secrets = [{"secret": sid, "kind": t["kind"], "n_windows": t["n_windows"],
                **{arm: {"worst_score": by[arm].get(sid, {}).get("worst_score"),
                         "median_score": by[arm].get(sid, {}).get("median_score")} for arm in ARMS}}
               for sid, t in by["no-dp"].items()]
    top_ref = set(np.argsort(ref["rank"])[:top].tolist())
    top_dp = set(np.argsort(dp["rank"])[:top].tolist())
    tied = np.asarray(incidence.matrix.getnnz(axis=1) > 0)[ref["plan_row"]] | ref["credential"]
    doc = {"format_version": 1, "arms": {arm: {"run": runs[arm], "private": docs[arm]["private"],
                                               "sigma": docs[arm]["sigma"],
                                               "risk": str(out / "audit" / f"risk-compare-{arm}.json")}
                                         for arm in ARMS},
           "n_windows": int(ref["rank"].size), "k": docs["no-dp"]["k"], "m": docs["no-dp"]["m"],
           "sample": docs["no-dp"]["sample"], "top": rows, "secrets": secrets,
           "overlap_top": len(top_ref & top_dp),
           "median_tied": {arm: _median(cols[arm]["score"][tied]) for arm in ARMS}}
    atomic_write_json(out / "compare" / "risk.json", doc)
    return doc


def _median(x: np.ndarray) -> float | None:
    x = x[np.isfinite(x)]
    return float(np.median(x)) if x.size else None


def _num(x: float):
    return float(x) if math.isfinite(x) else None


def table_lines(doc: dict) -> list[str]:
    """The side-by-side table as text: rank and score under each arm, redacted prefix."""
    lines = [f"at-risk windows: {doc['n_windows']} scored; the no-dp run's top {len(doc['top'])} "
             f"(overlap with hush's top {len(doc['top'])}: {doc['overlap_top']})",
             f"{'no-dp rank':>10} {'score':>7}  {'hush rank':>9} {'score':>7}  example (redacted prefix)"]
    for r in doc["top"]:
        what = f"<REDACTED:{r['rule']}> in " if r["window"] == "credential" else ""
        a, b = r["no-dp"], r["hush"]
        lines.append(f"{a['rank']:>10} {_f(a['score'])}  {b['rank']:>9} {_f(b['score'])}  "
                     f"{what}{r['path']}:{r['start_line']}  {r['prefix']}")
    med = doc["median_tied"]
    lines.append(f"median score of tied windows: no-dp {_f(med['no-dp'])}, hush {_f(med['hush'])}")
    return lines


def _f(x) -> str:
    return f"{x:7.3f}" if x is not None else "   -inf"
