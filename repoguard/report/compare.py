"""The report's compare section: `OUT/compare/` (from `repoguard compare`) → curves, bars, tables.

Figures: with `compare --floors`, the Pareto plot of floor bound against held-out public loss
per arm (`report.pareto`, inline SVG) and, in words, which arm is lowest at each level; held-out
loss against step, one line per arm (public slice, and the secret-tied slice when scored), from
each arm's evaluation history (`curve` in `OUT/compare/<arm>.json`, the same numbers as the
arm's own `OUT/compare/<arm>/eval.json`); and per slice (public, secret-tied, then per secret, at
most `MAX_SLICES`) bars of the final loss, top-1 accuracy and line exact match per arm, the base
model first. Tables: the `compare` text table's columns (with each arm's floor bound and
protection: meets floor, or reference with no floor), the floor sweep, and — when the `hush` and
`no-dp` arms were ranked by `audit.risk_compare` — their most at-risk windows side by side
(redacted prefixes only).

Owner-only content: the secret-tied slices are functions of secret text that no accountant
counts, and `drop`/`no-dp` carry no guarantee. The report is the security team's (as the audit
sections are); the section says so. Self-contained (inline PNG), no JavaScript.
"""
from __future__ import annotations

import json
from pathlib import Path

MAX_SLICES = 8
METRICS = (("loss", "loss (nats/token)"), ("accuracy", "top-1 accuracy"), ("exact_match", "line exact match"))


def _read(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def collect_compare(out: Path) -> dict | None:
    """The compare document trimmed for the report, or None when `OUT/compare/compare.json` is absent."""
    cdir = Path(out) / "compare"
    doc = _read(cdir / "compare.json")
    if not isinstance(doc, dict) or not doc.get("arms"):
        return None
    from repoguard.evaluation.compare import ARMS

    arms = {}
    rank = {a: i for i, a in enumerate(ARMS)}
    for name, r in sorted(doc["arms"].items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])):
        arms[name] = {k: r.get(k) for k in ("sigma", "private", "sum_w_over_n", "slices", "curve", "bound_ratio_min",
                                            "bound_ratio_max", "undetected_floor", "seconds", "steps", "protection",
                                            "meets_floor", "meets_targets", "floor", "phase1")}
    risk = _read(cdir / "risk.json")
    return {"base": doc.get("base") or {}, "eval_set": doc.get("eval_set") or {}, "split": doc.get("split"),
            "arms": arms, "risk": risk if isinstance(risk, dict) and risk.get("top") is not None else None,
            "floor": doc.get("floor"), "ledger": doc.get("ledger"), "levels": doc.get("levels"),
            "repeats": doc.get("repeats"), "versus": doc.get("versus")}


def _slices(doc: dict) -> list[str]:
    names = list((doc.get("base") or {}).keys())
    for r in doc["arms"].values():
        names += [k for k in (r.get("slices") or {}) if k not in names]
    from repoguard.evaluation.slices import CODE_SLICES

    order = [n for n in ("public", "secret-tied", *CODE_SLICES) if n in names] + \
        sorted(n for n in names if n.startswith("secret:"))
    return order[:MAX_SLICES]


def curve_plot(doc: dict) -> str | None:
    """Held-out loss against step, one line per arm; public (left) and secret-tied (right) slices."""
    from repoguard.report.plots import _fig, _png

    panels = [s for s in ("public", "secret-tied")
              if any(any((c.get("slices") or {}).get(s, {}).get("loss") is not None for c in r.get("curve") or [])
                     or (s == "public" and any(c.get("loss") is not None for c in r.get("curve") or []))
                     for r in doc["arms"].values())]
    if not panels:
        return None
    plt, fig, _ax = _fig(6.4 if len(panels) == 1 else 9.6, 3.2)
    fig.clear()
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, sl in zip(axes, panels):
        for name, r in doc["arms"].items():
            pts = []
            for c in r.get("curve") or []:
                y = (c.get("slices") or {}).get(sl, {}).get("loss")
                if y is None and sl == "public":
                    y = c.get("loss")
                if y is not None:
                    pts.append((c["step"], y))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o" if len(pts) < 12 else None,
                        ls="-" if r.get("private") else "--", label=name, ms=3)
        ax.set_xlabel("step")
        ax.set_ylabel("held-out loss (nats/token)")
        ax.set_title(f"{sl} slice")
    axes[0].legend(fontsize=7)
    return _png(plt, fig)


def slice_plot(doc: dict, sl: str) -> str | None:
    """Final loss, accuracy and exact match of every arm (base first) on slice `sl`."""
    from repoguard.report.plots import _fig, _png

    names = ["base", *doc["arms"]]
    vals = [(doc.get("base") or {}).get(sl) or {}] + [(r.get("slices") or {}).get(sl) or {} for r in doc["arms"].values()]
    if not any(v.get("loss") is not None for v in vals):
        return None
    plt, fig, _ax = _fig(9.6, 2.6)
    fig.clear()
    axes = fig.subplots(1, len(METRICS), squeeze=False)[0]
    colors = ["tab:gray"] + [f"C{i}" for i in range(len(names) - 1)]
    for ax, (key, label) in zip(axes, METRICS):
        ys = [v.get(key) for v in vals]
        ax.bar(range(len(names)), [y if y is not None else 0 for y in ys], color=colors)
        for i, y in enumerate(ys):
            ax.text(i, y or 0, "n/a" if y is None else f"{y:.4g}", ha="center", va="bottom", fontsize=6)
        got = [y for y in ys if y is not None]
        if key == "loss" and got and min(got) > 0:      # losses differ in the 2nd decimal: zoom in
            lo, hi = min(got), max(got)
            ax.set_ylim(max(0.0, lo - 0.5 * (hi - lo) - 0.02 * lo), hi + 0.3 * (hi - lo) + 0.01 * hi)
            label += " (axis not from 0)"
        ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=7)
        ax.set_title(label, fontsize=9)
    fig.suptitle(f"final held-out metrics: {sl}", fontsize=10)
    return _png(plt, fig)


def render_compare(doc: dict | None, *, e, td, table, img) -> str:
    """The HTML section (the page's own escaping/table helpers are passed in); "" without a compare."""
    if not doc:
        return ""
    from repoguard.evaluation.compare_text import best_sentence, floor_title, protection_label

    parts = ['<h2 id="compare">Compare: what each way of fine-tuning learned</h2>',
             f'<p><b>{e(floor_title(doc))}</b></p>'
             '<p>Every arm of <code>repoguard compare</code> starts from the same base with the plan\'s B, T, '
             'learning rate and held-out split, and is scored on exactly the same held-out examples and lines '
             f'(split <code>{e((doc.get("split") or "")[:12])}</code>). Protected arms meet the same declared '
             'targets and the same undetected-secret floor, calibrated against one snapshot of the ledger: '
             '<b>hush</b>: the plan; <b>uniform</b>: plain DP-SGD (w = 1, ρ = B/n); <b>drop-dp</b>: secret-tied '
             'examples removed, DP-SGD at σ_floor; <b>two-phase-noised</b>: a noised public phase 1, then the plan. '
             'References, no floor: <b>drop</b> (secret-tied examples removed, no noise), <b>no-dp</b> (everything, '
             'no noise) and <b>two-phase</b> (clear phase 1). Dashed lines: arms with no guarantee.</p>'
             '<p class="muted">Owner-only: the secret-tied slices are computed on held-out secret text that no '
             'bound covers, and the reference arms carry no floor guarantee. Keep this page inside the security '
             'team.</p>']
    k = (doc.get("floor") or {}).get("k", 1)
    head = ["arm", "σ", "Σw/n", "public loss", "acc", "EM", "tied loss", "acc", "EM", "max bound/r", f"floor k={k}",
            "protection", "s"]
    rows = [[td("base"), td(None), td(None), *_cells(doc["base"].get("public"), td),
             *_cells(doc["base"].get("secret-tied"), td), td(None), td(None), td(None), td(None)]]
    classes = [""]
    for name, r in doc["arms"].items():
        br = (f'{r["bound_ratio_max"]:.2g}' if r.get("bound_ratio_max") is not None   # the worst secret
              else "≤ 1 (calibrated)" if name == "uniform" else "—")
        fl = (r.get("floor") or {}).get("bound")
        if fl is None:
            fl = (r.get("undetected_floor") or {}).get("1")
        rows.append([td(name), td(r.get("sigma"), True, ".4g"), td(r.get("sum_w_over_n"), True, ".3f"),
                     *_cells((r.get("slices") or {}).get("public"), td),
                     *_cells((r.get("slices") or {}).get("secret-tied"), td), td(br),
                     td(fl, True, ".2g") if fl is not None else td("none"), td(protection_label(r)),
                     td(r.get("seconds"), True, ".0f")])
        classes.append("bad" if (r.get("meets_floor") is False or r.get("meets_targets") is False)
                       and r.get("protection") != "reference" else "")
    parts.append(table(head, rows, classes=classes))
    parts += _code_slices(doc, e=e, td=td, table=table)
    rep = doc.get("repeats")
    if rep:
        n = max(v["n"] for v in rep.values())
        parts.append(f'<h3>Over {n} repeats</h3><p>Every arm trained {n} times (fresh sampler and noise randomness, '
                     'LoRA init seed + i); held-out loss mean ± sample sd and range. The table above is repeat 0.</p>')
        rrows = []
        for name, v in _ordered(rep):
            rrows.append([td(name), *(td(f'{v[k + "_mean"]:.3f} ± {v[k + "_sd"]:.3f}') if v.get(k + "_mean") is not None
                                      else td(None) for k in ("public", "tied")),
                          *(td(f'{v[k + "_min"]:.3f} … {v[k + "_max"]:.3f}') if v.get(k + "_min") is not None
                            else td(None) for k in ("public", "tied")),
                          td(protection_label(doc["arms"].get(name) or {}))])
        parts.append(table(["arm", "public loss", "tied loss", "public range", "tied range", "protection"], rrows))
    lv = doc.get("levels")
    if lv:
        from repoguard.report.pareto import pareto_svg

        svg = pareto_svg(lv)
        parts.append('<h3>Floor levels: the Pareto picture</h3><p>Each protected arm trained at every floor level '
                     f'r ∈ {{{", ".join(f"{x:g}" for x in lv["r"])}}} (k = {lv["k"]}, p = {lv["p"]:g}; '
                     'declared targets unchanged): x is the floor bound the arm achieves (a secret nobody declared, '
                     'living in k untied examples; lower is safer), y its held-out public loss (lower is better). '
                     'The references meet no floor (bound 1) and are drawn as dashed lines at their loss. An arm '
                     'whose points share one x is one the floor does not bind: its σ is set by the declared '
                     'secrets, and its bound sits below every level. One training run per point, with fresh '
                     'randomness: repeat compare before reading small differences in loss.</p>')
        parts.append(svg if svg else '<p class="muted">(floor sweep: no data)</p>')
        parts.append("<ul>" + "".join(f"<li>{e(best_sentence(b))}</li>" for b in lv.get("best") or []) + "</ul>")
        lrows = []
        for name, pts in _ordered(lv["arms"]):
            for x in pts:
                lrows.append([td(name), td(x["r"], True, "g"), td(x.get("sigma"), True, ".4g"),
                              td(x.get("floor_bound"), True, ".2g"), td(x.get("public_loss"), True, ".3f"),
                              td("yes" if x.get("meets_floor") else "NO" if x.get("meets_floor") is False else "—")])
        for name, ref in _ordered(lv["references"]):
            lrows.append([td(f"{name} (reference)"), td("no floor"), td(ref.get("sigma"), True, ".4g"),
                          td(ref.get("floor_bound"), True, ".2g"), td(ref.get("public_loss"), True, ".3f"), td("no")])
        parts.append(table(["arm", "floor r", "σ", "floor bound", "public loss", "meets floor"], lrows))
    parts.append(img(curve_plot(doc), "held-out loss against step per arm"))
    for sl in _slices(doc):
        parts.append(img(slice_plot(doc, sl), f"final metrics per arm: {sl}"))
    risk = doc.get("risk")
    if risk:
        med = risk.get("median_tied") or {}
        parts.append(f'<h3>How DP moves the at-risk examples</h3><p>The {len(risk["top"])} windows the '
                     f'<b>no-dp</b> arm puts most at risk (of {risk["n_windows"]} scored; context k = {risk.get("k")}, '
                     f'span m = {risk.get("m")} tokens), and where the <b>hush</b> arm ranks them; '
                     f'{risk.get("overlap_top")} of them are also in hush\'s top {len(risk["top"])}. Median score of '
                     f'tied windows: no-dp {_f(med.get("no-dp"))}, hush {_f(med.get("hush"))} (higher = more at risk). '
                     'The scatter plots per arm are in the at-risk section.</p>')
        rrows = []
        for r in risk["top"]:
            what = f"<REDACTED:{r.get('rule')}> in " if r.get("window") == "credential" else ""
            a, b = r["no-dp"], r["hush"]
            rrows.append([td(a["rank"], True, "d"), td(a["score"], True, ".3f"), td(b["rank"], True, "d"),
                          td(b["score"], True, ".3f"), td(", ".join(r.get("secrets") or []) or "—"),
                          td(f'{what}{r.get("path")}:{r.get("start_line")}'), td(r.get("prefix"))])
        parts.append(table(["no-dp rank", "score", "hush rank", "score", "secrets", "example", "prefix (redacted)"], rrows))
    return "".join(parts)


def _code_slices(doc: dict, *, e, td, table) -> list[str]:
    """The code slices' losses per arm and each protected arm against drop-dp (`slices`)."""
    from repoguard.evaluation.slices import CODE_SLICES, VERSUS_SLICES

    base = doc.get("base") or {}
    if not any(sl in base for sl in CODE_SLICES):
        return []
    parts = ['<h3>Code slices</h3><p>Held-out examples of code files only (documentation and data files '
             'left out): <b>public-code</b> (tied to no secret), <b>tied-code</b> (tied to a secret) and '
             '<b>uses-internal</b> (files that import a declared secret\'s files: the code an assistant for '
             'this company must help with). Examples scored: '
             + e(", ".join(f"{sl} {(base.get(sl) or {}).get('examples', 0)}" for sl in CODE_SLICES)) + '.</p>']
    rows = [[td("base"), *(td((base.get(sl) or {}).get("loss"), True, ".3f") for sl in CODE_SLICES)]]
    rows += [[td(name), *(td(((r.get("slices") or {}).get(sl) or {}).get("loss"), True, ".3f") for sl in CODE_SLICES)]
             for name, r in doc["arms"].items()]
    parts.append(table(["arm", *(f"{sl} loss" for sl in CODE_SLICES)], rows))
    vs = doc.get("versus") or {}
    if vs:
        parts.append('<p>Each protected arm against <b>drop-dp</b> (what a team would do instead): arm − drop-dp '
                     'held-out loss, mean over repeats ± its standard error (negative: the arm is better), and '
                     'the share of the drop-dp → no-dp gap it recovers (0 %: drop-dp, 100 %: training on '
                     'everything without noise). One repeat gives no standard error: run '
                     '<code>compare --repeats N</code>.</p>')
        vrows = []
        for arm, per in _ordered(vs):
            for sl in VERSUS_SLICES:
                v = per.get(sl)
                if v:
                    vrows.append([td(arm), td(sl), td(v["diff"], True, "+.4f"), td(v.get("se"), True, ".4f"),
                                  td(v.get("t"), True, "+.1f"), td(v.get("headroom"), True, "+.0%"),
                                  td("/".join(str(x) for x in v.get("n") or []))])
        parts.append(table(["arm", "slice", "arm − drop-dp", "se", "t", "headroom recovered",
                            "repeats (arm/drop-dp/no-dp)"], vrows))
    return parts


def _ordered(d: dict) -> list[tuple]:
    """`d`'s items in `ARMS` order (compare.json is written with sorted keys)."""
    from repoguard.evaluation.compare import ARMS

    rank = {a: i for i, a in enumerate(ARMS)}
    return sorted(d.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0]))


def _cells(m: dict | None, td) -> list[str]:
    m = m or {}
    return [td(m.get("loss"), True, ".3f"), td(m.get("accuracy"), True, ".3f"), td(m.get("exact_match"), True, ".2f")]


def _f(x) -> str:
    return "–" if x is None else f"{x:.3f}"
