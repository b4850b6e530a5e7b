"""The report's at-risk section: `OUT/audit/risk*.json` → tables per secret and a scatter plot.

One part per risk document (`risk.json` of the run, `risk-<label>.json` of other runs, e.g. the
arms of `repoguard compare`). The scatter plot puts every scored window at (calibrated loss
ℓ(θ, z) − ℓ(θ₀, z), log10 P of the best attack decoding) [Stock et al. 2022 §3.2, §4.2]:
the upper left is at risk. Windows tied to a secret are coloured; credential windows (scored on
their pre-redaction text, which never leaves the audit) are marked. Self-contained: inline PNG,
no JavaScript; prefixes are of redacted text and every value is escaped by the caller's helpers.
"""
from __future__ import annotations

import json
from pathlib import Path

MAX_SECRETS = 15
MAX_ROWS = 3


def collect_risk(out: Path) -> list[dict]:
    """The risk documents in `out/audit/`, trimmed for the report (≤ MAX_SECRETS × MAX_ROWS rows)."""
    docs = []
    audit = Path(out) / "audit"
    for path in sorted(audit.glob("risk*.json")) if audit.is_dir() else []:
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(d, dict) or "secrets" not in d:
            continue
        keep = ("private", "sigma", "steps_completed", "k", "m", "samplers", "score", "n_examples",
                "n_scored_examples", "n_windows", "n_tied", "n_credential_windows", "calibration", "points", "note")
        doc = {k: d.get(k) for k in keep}
        doc["name"] = path.stem
        doc["secrets"] = [{**{k: t.get(k) for k in ("secret", "kind", "n_examples", "n_windows", "worst_score",
                                                      "median_score")}, "rows": t.get("rows", [])[:MAX_ROWS]}
                          for t in d["secrets"][:MAX_SECRETS]]
        doc["secrets_total"] = len(d["secrets"])
        docs.append(doc)
    return docs


def scatter_plot(doc: dict) -> str | None:
    """log10 P(best decoding regenerates the span) against the calibrated loss, tied windows coloured."""
    from repoguard.report.plots import _fig, _png

    pts = [p for p in doc.get("points") or [] if p.get("y") is not None]
    if not pts:
        return None
    plt, fig, ax = _fig(6.4, 3.6)
    groups = (("no secret", lambda p: not p["tied"], dict(color="tab:gray", alpha=0.5, s=10)),
              ("tied to a secret", lambda p: p["tied"] and not p["credential"], dict(color="tab:red", alpha=0.8, s=14)),
              ("credential (pre-redaction)", lambda p: p["credential"], dict(color="tab:orange", marker="x", s=22)))
    for label, pick, style in groups:
        sel = [p for p in pts if pick(p)]
        if sel:
            ax.scatter([p["x"] for p in sel], [p["y"] for p in sel], label=label, **style)
    ax.axvline(0, color="black", lw=0.8, ls=":")
    ax.set_xlabel("calibrated loss ℓ(θ,z) − ℓ(θ₀,z) (nats/token)")
    ax.set_ylabel("log10 P(attack regenerates span)")
    ax.legend(fontsize=7)
    ax.set_title(f"at-risk examples: {doc['name']}")
    return _png(plt, fig)


def render_risk(docs: list[dict], *, e, td, table, img) -> str:
    """The HTML section (the page's own escaping/table helpers are passed in)."""
    if not docs:
        return ""
    parts = ['<h2 id="risk">At-risk examples</h2>',
             '<p>Per training example, the probability that an attack decoding regenerates its span from its '
             'preceding context (lazy sampling: the product of the sampler\'s renormalised conditionals, 0 outside '
             'the top k) against the calibrated loss ℓ(θ,z) − ℓ(θ₀,z), θ₀ the base model that never saw z '
             '[Stock et al. 2022, §3.2]. Upper left = at risk. Score = best per-token log-probability − calibrated '
             'loss (higher = more at risk). Credential windows are scored on the pre-redaction text inside the '
             'audit; only the rule id is shown.</p>']
    for d in docs:
        kind = {True: "DP", False: "--no-dp (no guarantee)", None: "unknown"}.get(d.get("private"), "unknown")
        samplers = ", ".join(s["name"] for s in d.get("samplers") or [])
        parts.append(f'<h3>{e(d["name"])} — {e(kind)} run</h3><p>{d.get("n_windows")} windows of '
                     f'{d.get("n_scored_examples")} examples; context k = {d.get("k")}, span m = {d.get("m")} tokens; '
                     f'samplers: {e(samplers)}. Showing the {len(d["secrets"])} worst of {d["secrets_total"]} '
                     f'secrets, {MAX_ROWS} windows each.</p>')
        rows = []
        for t in d["secrets"]:
            for r in t["rows"]:
                what = f"<REDACTED:{r.get('rule')}> in " if r.get("window") == "credential" else ""
                rows.append([td(t["secret"]), td(r.get("rank"), True, "d"), td(r.get("score"), True, ".3f"),
                             td(r.get("log10_prob_best"), True, ".2f"), td(r.get("calibrated_loss"), True, ".3f"),
                             td(f'{what}{r.get("path")}:{r.get("start_line")}'), td(r.get("prefix"))])
        parts.append(table(["secret", "rank", "score", "log10 P (best)", "calibrated loss", "example", "prefix"], rows))
        parts.append(img(scatter_plot(d), f"at-risk scatter {d['name']}"))
    return "".join(parts)
