"""The report document → one self-contained HTML page.

No network (no external stylesheet, font or image: plots are inline PNG data URIs), no
JavaScript (the evidence explorer is `<details>`/`<summary>`), every value escaped. Large tables
arrive already capped by `collect`; the page says how many rows it shows of how many.
"""
from __future__ import annotations

import html
import math

from repoguard.report import plots

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1180px;
padding:16px 24px;color:#1b1f23;background:#fff}
h1{font-size:24px;margin:8px 0}h2{font-size:18px;border-bottom:2px solid #d0d7de;padding-bottom:4px;margin-top:28px}
table{border-collapse:collapse;margin:8px 0;font-size:12.5px}th,td{border:1px solid #d0d7de;padding:3px 7px;text-align:left}
th{background:#f3f6f9}td.n{text-align:right;font-variant-numeric:tabular-nums}tr.bad td{background:#ffebe9}
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{border:1px solid #d0d7de;border-radius:6px;padding:8px 12px;min-width:140px}
.card b{display:block;font-size:18px}.muted{color:#57606a}img.plot{border:1px solid #d0d7de;margin:6px 6px 6px 0;max-width:100%}
details{border:1px solid #d0d7de;border-radius:6px;margin:4px 0;padding:4px 8px}summary{cursor:pointer;font-weight:600}
code{background:#f3f6f9;padding:0 3px;border-radius:3px}nav a{margin-right:12px}
"""


def _e(x) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def _num(x, fmt: str = ".3g") -> str:
    if x is None:
        return "–"
    if isinstance(x, float) and not math.isfinite(x):
        return "∞" if x > 0 else "−∞"
    return format(x, fmt) if isinstance(x, (int, float)) else _e(x)


def _table(head: list[str], rows: list[list[str]], *, classes: list[str] | None = None) -> str:
    h = "".join(f"<th>{_e(c)}</th>" for c in head)
    body = []
    for k, r in enumerate(rows):
        cls = f' class="{classes[k]}"' if classes and classes[k] else ""
        body.append(f"<tr{cls}>" + "".join(r) + "</tr>")
    return f"<table><thead><tr>{h}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _td(x, num: bool = False, fmt: str = ".3g") -> str:
    return f'<td class="n">{_num(x, fmt)}</td>' if num else f"<td>{_e(x)}</td>"


def _img(uri: str | None, alt: str) -> str:
    return f'<img class="plot" alt="{_e(alt)}" src="{uri}">' if uri else f'<p class="muted">({_e(alt)}: no data)</p>'


def _card(label: str, value: str) -> str:
    return f'<div class="card"><b>{value}</b><span class="muted">{_e(label)}</span></div>'


def _summary(doc: dict) -> str:
    cards = []
    p, s, inc, f = doc.get("plan"), doc.get("secrets"), doc.get("incidence"), doc.get("findings")
    if inc:
        cards += [_card("examples", _num(inc["n_examples"], "d")), _card("secrets", _num(inc["n_secrets"], "d")),
                  _card("evidence rows", _num(inc["n_evidence"], "d"))]
    if p:
        cards += [_card("noise multiplier σ", _num(p["sigma"], ".4g")), _card("batch B / steps T",
                  f'{_num(p["batch_size"], "g")} / {_num(p["steps"], "d")}'), _card("clip norm C", _num(p["clip_norm"], "g")),
                  _card("c (LP scale)", _num(p["c"], "g")), _card("retained Σw/n (training examples)", _num(p["retained"], ".3f"))]
    if s:
        cards += [_card("secrets within target", "NONE: NO PRIVACY (--no-dp)" if s.get("no_privacy")
                        else f'{s["met"]} / {s["count"]}'),
                  _card("worst achieved/target", _num(s["ratio_max"], ".3g"))]
    if f is not None:
        distinct = f.get("distinct", f["count"])
        cards.append(_card("credential findings" + (f" ({distinct} distinct values)" if distinct != f["count"] else ""),
                           _num(f["count"], "d")))
    pr = (doc.get("training") or {}).get("privacy_report") or {}
    insecure = (doc.get("ledger") or {}).get("insecure") or {}
    if insecure:            # any insecure run in a secret's history, not only the latest run
        runs = sorted({r for v in insecure.values() for r in v})
        cards.append(_card("batches and noise", f"INSECURE: {len(insecure)} secret(s) trained by "
                           f"insecure-reproducible run(s) {_e(', '.join(runs[:3]))}, no guarantee"))
    elif pr.get("private"):   # where the batches and the noise came from (training.randomness)
        cards.append(_card("batches and noise", "INSECURE: reproducible test run, no guarantee"
                           if pr.get("insecure_reproducible") else "OS entropy (secret)"))
    if p:
        cards.append(_floor_card(p.get("undetected_floor")))
    if p and p.get("exposures"):
        cards.append(_card("exposed by a clear phase (bound 1)",
                           ", ".join(sorted({_e(x["secret"]) for x in p["exposures"]}))))
    led = doc.get("ledger")
    if led is not None:
        cards.append(_card("ledger", ("verified, " if led["ok"] else "FAILS verification, ") + f'{led.get("entries")} entries'))
    can = doc.get("canaries")
    if can:
        for label, r in can["runs"].items():
            cards.append(_card(f"canary exposure ({label})", f'{r["exposure_skewnorm"]:.1f} bits'))
    banner = (f'<p style="background:#ffebe9;border:2px solid #cf222e;padding:8px;font-size:18px"><b>'
              f'{_e(doc["no_privacy"])}</b></p>' if doc.get("no_privacy") else "")
    return f'{banner}<h2 id="summary">Summary</h2><div class="cards">{"".join(cards)}</div>{_least_retained(p)}'


def _least_retained(p: dict | None) -> str:
    """The least-retained declared secrets in words, a dropped one (< 1 % kept) in red: a secret
    "within target" may not have been trained on at all (issue 44 item 5)."""
    from repoguard.planning.retention import secret_lines

    lines = secret_lines((p or {}).get("least_retained"))
    if not lines:
        return ""
    red = ' style="color:#cf222e"'
    items = "".join(f'<li{red if "not trained on" in x else ""}>{_e(x)}</li>' for x in lines)
    return f'<p>Least retained declared secrets (Σw over their training examples):</p><ul id="least-retained">{items}</ul>'


def _floor_card(fl: dict | None) -> str:
    """The undetected-secret floor (issue 26): target and achieved bound, or the opt-out in red."""
    if not fl:
        return _card("undetected floor", "not computed (older plan)")
    if not fl.get("enabled", True):
        return _card("undetected floor", f'OFF (opt-out): a secret nobody found in k = {fl.get("k", 1)} example(s) '
                     f'gets bound {_num(fl.get("achieved_bound"), ".3g")}, no target')
    return _card("undetected floor", f'k = {fl["k"]}: {_num(fl.get("achieved_bound"), ".3g")} ≤ r = {fl["r"]:g} '
                 f'(p = {fl["p"]:g}; σ_floor {_num(fl.get("sigma_floor"), ".3g")})')


_FILES_INLINE = 3


def _files_cell(r: dict) -> str:
    """The files holding one value: the first few inline, the rest (as many as the report kept)
    behind a <details>; older documents give one `path`/`line` per row."""
    files = r.get("files") or [{"path": r.get("path"), "line": r.get("line")}]
    locs = [_e(f"{x['path']}:{x['line']}") for x in files]
    more = r.get("count", len(files)) - _FILES_INLINE
    cell = "<br>".join(locs[:_FILES_INLINE])
    if more > 0:
        rest = "<br>".join(locs[_FILES_INLINE:])
        unlisted = r.get("count", len(files)) - len(files)
        if unlisted > 0:
            rest += f"<br>… and {unlisted} more"
        cell += f"<details class=\"files\"><summary>+{more} more</summary>{rest}</details>"
    return f"<td>{cell}</td>"


def _findings(f: dict | None) -> str:
    """One row per distinct value (rule + keyed hash): severity, rule, where (source/config/test/…),
    how many times it occurs and in which files; sorted by severity, critical first (collect)."""
    if f is None:
        return ""
    rows = [[_td(r.get("severity")), _td(r["rule_id"]), _td(r.get("where") or r.get("location")),
             _td(r.get("count", 1), True, "d"), _files_cell(r), _td(r["redacted"]),
             _td(r["entropy"], True, ".2f")] for r in f["rows"]]
    rules = ", ".join(f"{_e(k)} ({v})" for k, v in list(f["by_rule"].items())[:30])
    distinct = f.get("distinct", len(f["rows"]))
    line = f'<p><strong>{_e(f["summary"])}</strong></p>' if f.get("summary") else ""
    head = (f'{f["count"]} findings of {distinct} distinct value(s). ' if distinct != f["count"]
            else "" if line else f'{f["count"]} findings. ')
    return (f'<h2 id="findings">Credential findings</h2>{line}<p>{head}One row per distinct value (rule and '
            f'keyed hash), most severe first; shown redacted (rule and length, no character of the value). '
            f'By rule: {rules}. Showing {f["shown"]} of {distinct}.</p>'
            + _table(["severity", "rule", "where", "count", "files", "redacted", "entropy"], rows))


# Why a published DP run has no loss curve (training/trainer.py: its train_log.jsonl keeps step and
# learning rate; the batch statistics go to the owner-only OUT/train/internal/steps.jsonl).
DP_LOSS_NOTE = (
    "Not published for DP runs: a step's training loss is the mean loss over the examples sampled "
    "into that batch, computed from the private training text without noise, so the privacy accountant "
    "does not cover it (a one-example batch's loss names the example). train_log.jsonl of a DP run keeps "
    "only the step and learning rate (and, with an evaluator, the public held-out slice); the per-step "
    "loss, batch size and token count are kept owner-only in OUT/train/internal/steps.jsonl for the "
    "operator: never publish that file. Runs with --no-dp, and the audits' unpublished measuring runs, log their loss.")


def _training(runs: list[dict]) -> str:
    """The loss curves, and in words why a DP run has none (instead of "no data")."""
    silent = [r["name"] for r in runs if r.get("private") and not any(x.get("loss") is not None for x in r["log"])]
    uri = plots.loss_plot(runs)
    out = '<h2 id="training">Training</h2>'
    if uri:
        out += _img(uri, "training loss")
    elif not silent:
        out += _img(None, "training loss")
    if silent:
        shown = [n for n in silent if any(r["name"] == n and r.get("heldout") for r in runs)]
        also = (f" The plot shows the public held-out loss of {', '.join(shown)} instead (the base model at "
                "step 0, then every evaluation)." if shown else "")
        out += f'<p class="muted">Training loss of {_e(", ".join(silent))}: {_e(DP_LOSS_NOTE + also)}</p>'

    return out


def _secrets(s: dict | None) -> str:
    if not s:
        return ""
    rows, classes = [], []
    for r in s["rows"]:
        rows.append([_td(r["id"]), _td(r["p"], True, ".2g"), _td(r["r"], True, ".2g"), _td(r["achieved_bound"], True, ".3g"),
                     _td(r["ratio"], True, ".3f"), _td(r["binding"]), _td(r["n_examples"], True, "d"),
                     _td(r["sum_w"], True, ".4g"), _td(r["kl_spent"], True, ".3g"), _td(r["ledger_kl_total"], True, ".3g")])
        classes.append("bad" if r["ratio"] > 1 + 1e-9 or r.get("insecure_runs") or s.get("no_privacy") else "")
    kinds = ", ".join(f"{_e(k)}: {v}" for k, v in s["binding_kinds"].items())
    flags = ((" NO PRIVACY: the published adapter was trained with --no-dp; the bounds below are the plan's, "
              "not the adapter's.") if s.get("no_privacy") else "") + (
        f' {s["insecure"]} trained by an insecure-reproducible run (not counted within target).'
        if s.get("insecure") else "")
    return (f'<h2 id="secrets">Secrets</h2><p>{s["count"]} secret{"" if s["count"] == 1 else "s"}; {s["met"]} within target, {s["violated"]} above.{_e(flags)} '
            f'Binding bound kinds: {kinds}. Showing the {s["shown"]} with the highest achieved/target '
            f'(complete table: <code>plan/plan.json</code>).</p>'
            '<p class="muted">How to read it: <b>achieved bound</b> is the probability that an adversary '
            'reconstructs the secret with the model, given that it succeeds with probability <b>p</b> '
            'without it; it must stay ≤ the target <b>r</b>. <b>binding</b> names the accounting method '
            'that gave the tightest bound: <code>kl</code> (the KL divergence, Hush Lemma 3.2), '
            '<code>renyi:α</code> (the Rényi divergence of order α, e.g. <code>renyi:1.4</code>), or '
            '<code>pld:ε</code> (the Neyman–Pearson bound r ≤ e<sup>ε</sup>·p + δ(ε) from the privacy-loss '
            'distribution, attained at that ε, e.g. <code>pld:13.5</code>), or <code>exposed</code>: an '
            'earlier run trained on some of the secret\'s examples in the clear (a public phase, before they '
            'were tied to it), so its bound is 1 whatever the noise. <b>KL spent</b> is the KL '
            'divergence this run (and the ledger, all runs) spent on the secret, in nats (natural-log '
            'units; 1 nat ≈ 1.44 bits). <b>Σw</b> is the sum of the LP weights w ∈ [0, 1] of the '
            'secret\'s examples: how many examples\' worth of it is sampled at full rate.</p>'
            + _table(["secret", "prior p", "target r", "achieved bound", "achieved/r", "binding", "examples", "Σw",
                      "KL spent (run)", "KL total (ledger)"], rows, classes=classes))


def _audit(doc: dict) -> str:
    can, ext = doc.get("canaries"), doc.get("extraction")
    if not can and not ext:
        return ""
    parts = ['<h2 id="audit">Memorisation audit</h2>']
    if can:
        parts.append(f'<p>Canary <code>{_e(can["format"])}</code>, |R| = 2^{can["log2_space_size"]:.0f}, '
                     f'planted in {can["n_inserted"]} examples of secret <code>{_e(can["secret"])}</code> '
                     f'(expected occurrences in training {can["expected_canary_occurrences"]:.1f}); '
                     f'{can["n_references"]} reference candidates; σ = {can["sigma"]:.4g}, T = {can["steps"]}. '
                     f'By the secret\'s bound, the DP run reaches exposure ≥ '
                     f'{_num(can.get("dp_exposure_at_level_1e-3"), ".1f")} bits with probability ≤ 10<sup>−3</sup> '
                     f'[Hush Lemma 3.2 at prior 2<sup>−e</sup>].</p>')
        rows = []
        for label, r in can["runs"].items():
            rows.append([_td(label), _td(r["rank_in_sample"], True, "d"), _td(r["exposure_sampled"], True, ".2f"),
                         _td(r["exposure_skewnorm"], True, ".2f"), _td(r.get("tail_bound_skewnorm"), True, ".3g"),
                         _td(r.get("final_loss"), True, ".3f")])
        parts.append(_table(["run", "rank among N+1", "exposure (sampled)", "exposure (skew-normal)",
                             "DP bound on P[exposure ≥ this]", "final loss"], rows))
        parts.append(_img(plots.exposure_plot(can), "canary exposure"))
    if ext:
        labels = [k for k in ("dp", "no-dp")]
        rows = []
        for name, g in ext["groups"].items():
            rows.append([_td(name), _td(g["n_examples"], True, "d"), _td(g["n_sampled"], True, "d")]
                        + [_td(None if g.get(k) is None else 100 * g[k], True, ".1f") for k in labels])
        note = f' <span class="muted">{_e(ext["note"])}</span>' if ext.get("note") else ""
        if ext.get("reference"):
            note += f' <strong>Warning: {_e(ext["reference"])}.</strong>'
        parts.append(f'<p>k-extractable memorisation (k = {ext["k"]} prefix tokens, m = {ext["m"]} reproduced '
                     f'greedily).{note}</p>' + _table(["secret", "examples", "sampled", "DP % extracted", "no-DP % extracted"], rows))
    return "".join(parts)


def _left_out(lo: dict | None) -> str:
    if not lo:
        return ""
    srows = [[_td(r["secret"]), _td(r["examples"], True, "d"), _td(r["sum_w"], True, ".3g"),
              _td(100 * r["retained"], True, ".1f"), _td(100 * (1 - r["retained"]), True, ".1f")] for r in lo["per_secret"]]
    drows = [[_td(r["directory"]), _td(r["examples"], True, "d"), _td(r["tied"], True, "d"), _td(r["sum_w"], True, ".3g"),
              _td(None if r["retained"] is None else 100 * r["retained"], True, ".1f"),
              _td(r.get("held_out", 0), True, "d"), _td(r["files_left_out"], True, "d")]
             for r in lo["per_directory"]]
    reasons = ", ".join(f"{_e(k)}: {v}" for k, v in lo["corpus_reasons"].items()) or "none"
    return ('<h2 id="left-out">What training leaves out, and why</h2>'
            '<p>Two things keep data out of training. Files are left out of the corpus before weighting '
            f'(by reason: {reasons}). Then the weighting LP gives each example a weight w ∈ [0, 1]: an '
            'example is sampled at rate ∝ w, so over a group <b>Σw/n</b> is the share trained on at full '
            'rate and the rest is what protecting the group\'s secrets costs. Examples tied to no secret '
            'keep w = 1; held-out (evaluation) examples are counted apart.</p>'
            f'<p>Per secret (the {len(srows)} least retained of {lo["n_secrets"]} secrets with training '
            f'examples{_no_training(lo)}):</p>'
            + _table(["secret", "examples", "Σw", "retained %", "left out %"], srows)
            + f'<p>Per top-level directory (the {len(drows)} least retained of {lo["n_directories"]}):</p>'
            + _table(["directory", "training examples", "tied to a secret", "Σw", "retained %", "held out (evaluation)",
                      "files left out of the corpus"], drows))


def _no_training(lo: dict) -> str:
    """'; 1 more has none (…)' when some secrets have no training example to retain."""
    extra = int(lo.get("n_secrets_all", lo["n_secrets"])) - int(lo["n_secrets"])
    if extra <= 0:
        return ""
    return (f"; {extra} more {'has' if extra == 1 else 'have'} none (every example held out for evaluation, "
            "or no example at all)")


def _sweep_note(sweep: list[dict]) -> str:
    from repoguard.planning.retention import sweep_retention_flat

    if not sweep_retention_flat(sweep):
        return ""
    sw = [r.get("sum_w") or 0 for r in sweep if r.get("c")]
    return (f'<p class="muted">Retention does not change with c: Σw stays within {min(sw):.6g}–{max(sw):.6g} '
            'over the sweep. The secrets\' LP budgets are a negligible share of the corpus, so c only trades '
            'their own weight against σ.</p>')


def _explorer(items: list[dict], total: int) -> str:
    if not items:
        return ""
    out = [f'<h2 id="explorer">Evidence explorer</h2><p>Why each file carries a secret (showing {len(items)} of '
           f'{total} secrets, at most 20 evidence rows each; <code>repoguard explain --secret ID</code> gives all).</p>']
    for it in items:
        rows = [[_td(e["path"]), _td(e["analyzer"]), _td(e["reason"]), _td(" → ".join(e["chain"]))] for e in it["evidence"]]
        more = it["n_evidence"] - len(it["evidence"])
        tail = f'<p class="muted">… {more} more</p>' if more > 0 else ""
        desc = f' <span class="muted">{_e(it["description"])}</span>' if it.get("description") else ""
        out.append(f'<details><summary>{_e(it["id"])} ({it["n_evidence"]} evidence rows){desc}</summary>'
                   + _table(["file", "analyzer", "reason", "chain"], rows) + tail + "</details>")
    return "".join(out)


_TERMS = [
    ("example", "one training example: a chunk of a file (at most example_max_chars characters)."),
    ("secret", "something the model must not let an adversary reconstruct: a declared trade secret or a credential."),
    ("prior p", "the adversary's probability of reconstructing the secret without the model."),
    ("target r", "the bound the probability must stay under with the model (Hush Def. 3.1)."),
    ("achieved bound", "the bound the accounting proves for this plan, the ledger's earlier runs included."),
    ("binding", "the accounting method that gave the achieved bound: kl, renyi:α (Rényi divergence of order α) "
                "or pld:ε (Neyman–Pearson bound from the privacy-loss distribution, attained at ε)."),
    ("nats", "units of divergence with the natural logarithm; 1 nat = 1/ln 2 ≈ 1.44 bits."),
    ("KL", "Kullback–Leibler divergence between the training run with and without the secret's examples."),
    ("w, Σw", "per-example weight in [0, 1] from the weighting LP (Hush eq. 1); Σw sums them (over all "
              "examples: the retained data; over a secret's: how much of it is trained on)."),
    ("retained Σw/n", "the share of the corpus trained on at full rate; the rest was down-weighted or left out."),
    ("σ (noise multiplier)", "Gaussian noise of std σ·C is added to each step's summed clipped gradients."),
    ("C (clip norm)", "each example's gradient is scaled to L2 norm at most C."),
    ("B, T", "the expected batch size (public) and the number of steps."),
    ("ρ", "example i's sampling probability per step, B·w_i/Σw."),
    ("c", "the LP's scale: a secret's examples may carry at most c·cap_j of weight."),
    ("ledger", "the hash-chained record of what each secret spent in every training run."),
    ("exposure", "how much more likely a planted canary is than random candidates, in bits (Carlini et al. 2019)."),
]
_GLOSSARY = ('<h2 id="glossary">Glossary</h2><dl>'
             + "".join(f"<dt>{_e(t)}</dt><dd>{_e(d)}</dd>" for t, d in _TERMS) + "</dl>")


def render(doc: dict) -> str:
    """The page for a report document from `collect`. Pure: no file or network access."""
    p = doc.get("plan")
    sections = [_summary(doc), _findings(doc.get("findings")), _secrets(doc.get("secrets"))]
    if p:
        sections.append('<h2 id="plots">Plan</h2>' + _img(plots.sweep_plot(doc.get("sweep") or [], p.get("c"), p.get("n_train")), "c sweep")
                        + _sweep_note(doc.get("sweep") or [])
                        + _img(plots.ratio_histogram(doc["secrets"]["ratio_log10_hist"]), "achieved/target histogram"))
    if doc.get("training", {}).get("runs"):
        sections.append(_training(doc["training"]["runs"]))
    sections.append(_audit(doc))
    from repoguard.report.risk import render_risk
    sections.append(render_risk(doc.get("risk") or [], e=_e, td=_td, table=_table, img=_img))
    from repoguard.report.compare import render_compare
    sections.append(render_compare(doc.get("compare"), e=_e, td=_td, table=_table, img=_img))
    sections.append(_left_out(doc.get("left_out")))
    n_sec = (doc.get("incidence") or {}).get("n_secrets", 0)
    sections.append(_explorer(doc.get("explorer") or [], n_sec))
    sections.append(_GLOSSARY)
    nav = "".join(f'<a href="#{s}">{s}</a>' for s in ("summary", "findings", "secrets", "plots", "training", "audit", "risk",
                                                     "compare", "left-out", "explorer", "glossary")
                  if f'id="{s}"' in "".join(sections))
    title = f"repoguard report{(' — ' + doc['repo']) if doc.get('repo') else ''}"
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
            f'content="width=device-width,initial-scale=1"><title>{_e(title)}</title><style>{_CSS}</style></head>'
            f'<body><h1>{_e(title)}</h1><p class="muted">generated {_e(doc.get("generated"))} from '
            f'<code>{_e(doc.get("out"))}</code></p><nav>{nav}</nav>{"".join(sections)}</body></html>\n')
