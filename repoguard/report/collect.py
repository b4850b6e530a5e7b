"""Every stage's artefact in OUT → one report document (the content of report.json).

Each part is optional (a stage not run yet is reported as absent): scan findings
(`scan/findings.json`, redacted only), the plan (`plan/`), the incidence (`incidence/`), the ledger
(`ledger.jsonl`), training logs (`train/`, `audit/*/{dp,no-dp}/train_log.jsonl`) and the audits
(`audit/canaries.json`, `audit/extraction.json`). Per-secret rows are capped at `MAX_ROWS`
(worst achieved/target first); the complete table stays in `plan/plan.json`.
"""
from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from repoguard.core.errors import InputError


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _read_log(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return [{"step": r.get("step"), "loss": r.get("loss"), "batch_size": r.get("batch_size"),
             "heldout": _public_loss(r.get("eval")), "heldout_base": _public_loss(r.get("eval_base"))} for r in rows]


def _public_loss(ev) -> float | None:
    """The held-out loss on the public slice (what a DP run's published log keeps), else None."""
    loss = ev.get("public", {}).get("loss") if isinstance(ev, dict) and isinstance(ev.get("public"), dict) else None
    return loss if isinstance(loss, (int, float)) and math.isfinite(loss) else None


def _heldout(log: list[dict]) -> list[list[float]]:
    """[step, public held-out loss] points of a log (the base model's at step 0), never downsampled."""
    pts = [[0, x["heldout_base"]] for x in log[:1] if x.get("heldout_base") is not None]
    return pts + [[x["step"], x["heldout"]] for x in log if x.get("heldout") is not None]


def _downsample(rows: list[dict], n: int = 400) -> list[dict]:
    """At most n points (evenly spaced) so a long run's curve stays small."""
    if len(rows) <= n:
        return rows
    idx = np.linspace(0, len(rows) - 1, n).round().astype(int)
    return [rows[i] for i in idx]


def _masked(redacted) -> str:
    """The finding's redacted form when it holds no value character (`****(N chars)`), else
    `****` (a findings.json written before issue 32 kept the first 4 characters)."""
    text = str(redacted or "")
    return text if re.fullmatch(r"\*{4}\(\d+ chars\)", text) else "****"


MAX_FILES_PER_VALUE = 20      # files listed under one grouped value (the count covers all)


def _findings(out: Path) -> dict | None:
    """The scan's findings, one row per distinct value: findings of one rule whose keyed hash
    (`secret_hmac`) is equal are the same credential copied (a test-fixture token in 56 files
    was 56 rows, issue 28 item 8), so a row carries a count and the files. Rows are sorted by
    severity (critical first), then by count. "summary" is the scan's triage line (counts by
    location and severity; "all in tests, fixtures, docs or examples" when none is elsewhere)."""
    from types import SimpleNamespace

    from repoguard.credentials.triage import SEVERITIES, summary
    from repoguard.report.limits import MAX_FINDINGS

    doc = _read_json(out / "scan" / "findings.json")
    if doc is None:
        return None
    found = doc.get("findings", [])
    groups: dict[tuple, dict] = {}
    for i, f in enumerate(found):
        value = f.get("secret_hmac") or str(f.get("fingerprint") or "").rsplit(":", 1)[-1] or f"#{i}"
        g = groups.get((f.get("rule_id"), value))
        if g is None:
            g = groups[(f.get("rule_id"), value)] = {
                "rule_id": f.get("rule_id"), "severity": f.get("severity") or "high",
                "where": [], "redacted": _masked(f.get("redacted")), "entropy": f.get("entropy"),
                "count": 0, "files": [], "path": f.get("path"), "line": f.get("line")}
        g["count"] += 1
        sev = f.get("severity") or "high"     # one value in many places: its worst placement
        if sev in SEVERITIES and SEVERITIES.index(sev) < SEVERITIES.index(g["severity"]):
            g["severity"] = sev
        where = f.get("location") or "source"
        if where not in g["where"]:
            g["where"].append(where)
        if len(g["files"]) < MAX_FILES_PER_VALUE:
            g["files"].append({"path": f.get("path"), "line": f.get("line")})
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    rows = sorted(groups.values(), key=lambda g: (rank.get(g["severity"], len(rank)), -g["count"],
                                                  str(g["rule_id"]), str(g["path"])))
    for g in rows:
        g["where"] = ", ".join(g["where"])
    by_rule = defaultdict(int)
    for f in found:
        by_rule[f.get("rule_id")] += 1
    line = summary([SimpleNamespace(location=f.get("location") or "source", severity=f.get("severity") or "high")
                    for f in found])
    return {"count": len(found), "distinct": len(rows), "summary": line,
            "by_rule": dict(sorted(by_rule.items(), key=lambda kv: -kv[1])),
            "rows": rows[:MAX_FINDINGS], "shown": min(len(rows), MAX_FINDINGS)}


def _ledger(out: Path) -> dict | None:
    path = out / "ledger.jsonl"
    if not path.is_file():
        return None
    from repoguard.accounting.ledger import read_entries, spent, verify

    check = verify(path)
    doc = {"ok": bool(check["ok"]), "problems": check["problems"][:5], "entries": check.get("entries"),
           "runs": [], "spent_kl": {}, "insecure": {}}
    if check["ok"]:
        from repoguard.accounting.published import insecure_history

        doc["spent_kl"] = {k: v[0] for k, v in spent(path).items()}
        doc["insecure"] = insecure_history(path)     # {secret: insecure-reproducible runs that trained it}
        last = {}
        for e in read_entries(path):
            last[e["run_id"]] = e
        doc["runs"] = [{"run_id": e["run_id"], "time": e.get("time"), "status": e.get("status"),
                        "steps_completed": e.get("steps_completed"), "sigma": e.get("sigma"),
                        "randomness": e.get("randomness")}
                       for e in list(last.values())[-20:]]
    return doc


def _secrets(plan, ledger: dict | None, evidence_counts: dict, *, no_privacy: bool = False) -> dict:
    """Per-secret rows and counts. A secret an insecure-reproducible run trained (ledger, or the
    plan's record) is never "within target"; with `no_privacy` (the published run was --no-dp)
    no secret is."""
    from repoguard.report.limits import MAX_ROWS

    spent = (ledger or {}).get("spent_kl", {})
    insecure = {**(plan.extra.get("insecure_runs") or {}), **((ledger or {}).get("insecure") or {})}
    s = plan.secrets
    ratio = np.array([x.achieved_bound / x.r if x.r > 0 else math.inf for x in s], dtype=float)
    unsafe = np.array([no_privacy or x.id in insecure for x in s], dtype=bool)
    order = np.argsort(-ratio, kind="stable")[:MAX_ROWS]
    rows = [{"id": s[j].id, "p": s[j].p, "r": s[j].r, "achieved_bound": s[j].achieved_bound,
             "ratio": float(ratio[j]), "binding": s[j].binding, "n_examples": s[j].n_examples,
             "sum_w": s[j].sum_w, "kl_spent": s[j].kl_spent, "ledger_kl_total": spent.get(s[j].id),
             "n_evidence": evidence_counts.get(s[j].id, 0), "insecure_runs": insecure.get(s[j].id, [])}
            for j in order]
    finite = ratio[np.isfinite(ratio)]
    hist_counts, hist_edges = (np.histogram(np.log10(np.clip(finite, 1e-12, None)), bins=40)
                               if finite.size else (np.zeros(0), np.zeros(0)))
    return {"count": len(s), "shown": len(rows), "rows": rows,
            "met": int(np.sum((ratio <= 1 + 1e-9) & ~unsafe)), "violated": int(np.sum(ratio > 1 + 1e-9)),
            "insecure": int(sum(x.id in insecure for x in s)), "no_privacy": no_privacy,
            "ratio_max": float(ratio.max()) if ratio.size else None,
            "ratio_median": float(np.median(ratio)) if ratio.size else None,
            "ratio_log10_hist": {"counts": hist_counts.tolist(), "edges": hist_edges.tolist()},
            "binding_kinds": _count(x.binding.split(":")[0] for x in s)}


def _count(it) -> dict:
    d = defaultdict(int)
    for x in it:
        d[x] += 1
    return dict(d)


def _explorer(plan, inc, rows: list[dict]) -> list[dict]:
    """Evidence per shown secret: which files, which analyzer, why (capped)."""
    from repoguard.report.limits import MAX_EVIDENCE, MAX_EXPLORER

    wanted = [r["id"] for r in rows[:MAX_EXPLORER]] if rows else [s.id for s in inc.secrets[:MAX_EXPLORER]]
    want = set(wanted)
    by = defaultdict(list)
    n = defaultdict(int)
    for e in inc.evidence:
        if e.secret_id in want:
            n[e.secret_id] += 1
            if len(by[e.secret_id]) < MAX_EVIDENCE:
                by[e.secret_id].append({"path": e.path, "analyzer": e.analyzer, "reason": e.reason,
                                        "chain": list(e.chain)[:6]})
    shown = _shown_names({e["path"] for rows_ in by.values() for e in rows_})
    for rows_ in by.values():
        for e in rows_:
            e["path"] = shown.get(e["path"], e["path"])
    desc = {s.id: s.description for s in inc.secrets if s.id in want}
    return [{"id": sid, "description": desc.get(sid, ""), "n_evidence": n[sid], "evidence": by[sid]} for sid in wanted]


def _shown_names(paths: set[str]) -> dict[str, str]:
    """{path: redacted} for evidence paths whose name holds a credential (credentials.names):
    the report is published, and `cfg/token_ghp_….txt` must not appear in it."""
    from repoguard.credentials.names import redacted_names
    from repoguard.credentials.redact import default_engine

    return redacted_names(default_engine(), sorted(paths)) if paths else {}


def _left_out(plan, inc, excluded: dict | None, *, limit: int = 30) -> dict:
    """What training leaves out and why, per secret and per top-level directory.

    Weighting: `retention.retention` (examples, Σw, Σw/n per group; the plan's own
    `extra["retention"]` when it has one, else computed from its w). Corpus: files left out before
    weighting, by reason (corpus/excluded.json). Rows: the `limit` groups with the smallest
    retained share."""
    from repoguard.planning.retention import retention, top_dir

    given = plan.extra.get("retention") if isinstance(plan.extra.get("retention"), dict) else None
    ret = given if given and "per_directory" in given else retention(inc, plan.w, plan.test_mask)
    dirs = {d["directory"]: {**d, "files_left_out": 0} for d in ret["per_directory"]}
    reasons: dict[str, int] = {}
    for e in (excluded or {}).get("excluded", []):
        top = top_dir(e.get("path", ""))
        d = dirs.setdefault(top, {"directory": top, "examples": 0, "held_out": 0, "sum_w": 0.0, "tied": 0,
                                  "retained": None, "files_left_out": 0})
        d["files_left_out"] += 1
        reasons[e.get("reason", "?")] = reasons.get(e.get("reason", "?"), 0) + 1
    per_dir = sorted(dirs.values(), key=lambda d: (d["retained"] if d["retained"] is not None else 2.0, d["directory"]))
    per_secret = [r for r in ret["per_secret"] if r["examples"]]
    # "n_secrets": those with training examples; "n_secrets_all": every secret (a secret whose
    # examples are all held out has none to retain, issue 41 item 17: "of 35" beside 36 secrets)
    return {"per_secret": per_secret[:limit], "n_secrets": len(per_secret),
            "n_secrets_all": len(ret["per_secret"]), "per_directory": per_dir[:limit],
            "n_directories": len(dirs), "corpus_reasons": dict(sorted(reasons.items())),
            "retained": ret.get("retained"), "n_train": ret.get("n_train")}


def collect(out: Path, *, repo_name: str = "") -> dict:
    """The report document. Raises InputError when `out` has no artefact of any stage."""
    from repoguard.report.limits import MAX_EXPLORER, MAX_ROWS

    out = Path(out)
    doc: dict = {"format_version": 1, "generated": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                 "repo": repo_name, "out": str(out), "limits": {"secret_rows": MAX_ROWS, "explorer": MAX_EXPLORER}}
    sections = []
    doc["findings"] = _findings(out)
    if doc["findings"] is not None:
        sections.append("findings")
    doc["ledger"] = _ledger(out)
    doc["training"] = _training(out)
    pr = doc["training"]["privacy_report"]
    # The published adapter of a --no-dp run promises nothing: said first, and no secret is "within target".
    doc["no_privacy"] = (pr.get("warning") or "NO PRIVACY: the published adapter was trained with --no-dp"
                         if isinstance(pr, dict) and pr.get("private") is False else None)
    inc = plan = None
    if (out / "incidence" / "secrets.json").is_file():
        from repoguard.analyzers.incidence import load_incidence
        inc = load_incidence(out)
    if (out / "plan" / "plan.json").is_file():
        from repoguard.planning.plan import load_plan
        plan = load_plan(out)
    ev_counts = _count(e.secret_id for e in inc.evidence) if inc is not None else {}
    if plan is not None:
        from repoguard.planning.retention import least_retained

        sections += ["plan", "secrets", "sweep", "histogram"]
        doc["plan"] = {"sigma": plan.sigma, "batch_size": plan.batch_size, "steps": plan.steps,
                       "clip_norm": plan.clip_norm, "c": plan.c, "cap": plan.cap, "accountant": plan.accountant,
                       "adjacency": plan.adjacency, "n_examples": len(plan.example_ids),
                       "sum_w": float(plan.w.sum()),
                       # one definition everywhere (issue 28 item 4): Σw over training examples / n_train
                       "retained": (plan.extra.get("retention") or {}).get("retained"),
                       "least_retained": least_retained(plan.extra.get("retention")),
                       "max_rho": float(plan.rho.max()) if plan.rho.size else 0.0,
                       "sigma_paper_kl": plan.extra.get("sigma_paper_kl"), "c_rule": plan.extra.get("c_rule"),
                       "exposures": plan.extra.get("exposures", []),
                       "n_train": int((~plan.test_mask).sum()),
                       "undetected_floor": plan.extra.get("undetected_floor"),
                       "floor_bought": plan.extra.get("floor_bought")}
        doc["secrets"] = _secrets(plan, doc["ledger"], ev_counts, no_privacy=doc["no_privacy"] is not None)
        doc["sweep"] = [{k: r.get(k) for k in ("c", "frac_positive", "sum_w", "sigma", "score")}
                        for r in plan.extra.get("sweep", [])]
    else:
        doc["plan"] = doc["secrets"] = None
        doc["sweep"] = []
    if inc is not None:
        sections.append("explorer")
        doc["incidence"] = {"n_examples": len(inc.example_ids), "n_secrets": len(inc.secrets),
                            "n_evidence": len(inc.evidence), "by_analyzer": _count(e.analyzer for e in inc.evidence),
                            "untied_examples": int(np.sum(inc.matrix.getnnz(axis=1) == 0))}
        doc["explorer"] = _explorer(plan, inc, doc["secrets"]["rows"] if doc["secrets"] else [])
        if plan is not None:
            doc["left_out"] = _left_out(plan, inc, _read_json(out / "corpus" / "excluded.json"))
            sections.append("left-out")
    else:
        doc["incidence"], doc["explorer"] = None, []
    if doc["training"]["runs"]:
        sections.append("training")
    doc["canaries"] = _read_json(out / "audit" / "canaries.json")
    doc["extraction"] = _read_json(out / "audit" / "extraction.json")
    if doc["canaries"] or doc["extraction"]:
        sections.append("audit")
    from repoguard.report.risk import collect_risk
    doc["risk"] = collect_risk(out)
    if doc["risk"]:
        sections.append("risk")
    from repoguard.report.compare import collect_compare
    doc["compare"] = collect_compare(out)
    if doc["compare"]:
        sections.append("compare")
    if not sections:
        raise InputError(f"{out}: no artefacts to report (run `repoguard scan`, `analyze`, `plan` first)")
    doc["sections"] = ["summary"] + sections
    return doc


def _training(out: Path) -> dict:
    """Loss curves: the real run (OUT/train) and the audit pairs (OUT/audit/<name>/<label>)."""
    runs = []
    pr = _read_json(out / "train" / "privacy_report.json")
    log = _read_log(out / "train" / "train_log.jsonl")
    if log:
        private = pr.get("private") if pr else None
        insecure = " (DP, INSECURE reproducible test run)" if pr and pr.get("insecure_reproducible") else " (DP)"
        runs.append({"name": "train" + ("" if private is None else (insecure if private else " (--no-dp)")),
                     "private": private, "log": _downsample(log), "heldout": _heldout(log)})
    audit = out / "audit"
    if audit.is_dir():
        for d in sorted(p for p in audit.iterdir() if p.is_dir()):
            for label in ("dp", "no-dp"):
                log = _read_log(d / label / "train_log.jsonl")
                if log:
                    runs.append({"name": f"audit/{d.name} ({label})", "private": label == "dp",
                                 "log": _downsample(log), "heldout": _heldout(log)})
    return {"privacy_report": pr, "runs": runs}
