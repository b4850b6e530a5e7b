"""The Pareto picture of `repoguard compare --floors`: undetected-floor bound against held-out
public loss, per arm (docs/commands/compare.md "Equal protection"), as inline SVG written here in Python.

x: the arm's achieved floor bound (cumulative posterior bound of a secret nobody declared, living
in k untied examples; log scale, 1 = no bound); y: held-out public loss (nats/token, lower is
better). One line with markers per protected arm through its floor levels; the references
(no floor: `drop`, `no-dp`, clear `two-phase`) as horizontal dashed lines at their public loss,
labelled "no floor"; dotted verticals at each level r. No script, no external resource: the
page stays self-contained.
"""
from __future__ import annotations

import html
import math

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
REF_COLORS = ("#555555", "#999999", "#bcbd22", "#7f7f7f")
MARKERS = ("circle", "square", "triangle", "diamond", "circle", "square", "triangle", "diamond")
W, H = 860, 460
LEFT, RIGHT, TOP, BOTTOM = 72, 270, 58, 58


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _marker(kind: str, x: float, y: float, color: str, hollow: bool = False) -> str:
    fill = "#fff" if hollow else color
    s = 5.0
    if kind == "square":
        return (f'<rect x="{x - s:.1f}" y="{y - s:.1f}" width="{2 * s:.1f}" height="{2 * s:.1f}" fill="{fill}" '
                f'stroke="{color}" stroke-width="1.5"/>')
    if kind == "triangle":
        pts = f"{x:.1f},{y - s - 1:.1f} {x - s - 1:.1f},{y + s:.1f} {x + s + 1:.1f},{y + s:.1f}"
        return f'<polygon points="{pts}" fill="{fill}" stroke="{color}" stroke-width="1.5"/>'
    if kind == "diamond":
        pts = f"{x:.1f},{y - s - 1:.1f} {x + s + 1:.1f},{y:.1f} {x:.1f},{y + s + 1:.1f} {x - s - 1:.1f},{y:.1f}"
        return f'<polygon points="{pts}" fill="{fill}" stroke="{color}" stroke-width="1.5"/>'
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{s:.1f}" fill="{fill}" stroke="{color}" stroke-width="1.5"/>'


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    span = hi - lo
    if span <= 0:
        return [lo]
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step) * step
    out, t = [], start
    while t <= hi + 1e-12 * span:
        out.append(round(t, 12))
        t += step
    return out


_SUP = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _sup(e: int) -> str:
    return "10" + str(e).translate(_SUP)


def pareto_svg(levels: dict) -> str | None:
    """The floor sweep `levels` (`evaluation.compare.run_compare`'s doc["levels"]: "r", "k", "p",
    "arms" {arm: [{"r", "floor_bound", "public_loss", "meets_floor"}]}, "references" {arm:
    {"public_loss", "floor_bound"}}) as an `<svg>` element string; None when no point has both
    a bound and a loss. Points of an arm that fails its floor are drawn hollow."""
    from repoguard.evaluation.compare import ARMS

    rank = {a: i for i, a in enumerate(ARMS)}
    series = []
    for name, pts in sorted((levels.get("arms") or {}).items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])):
        good = sorted(((float(p["floor_bound"]), float(p["public_loss"]), p.get("meets_floor") is not False,
                        float(p["r"])) for p in pts if p.get("floor_bound") and p.get("public_loss") is not None),
                      key=lambda t: t[3])
        if good:
            series.append((name, good))
    refs = [(n, float(v["public_loss"])) for n, v in sorted((levels.get("references") or {}).items(),
                                                              key=lambda kv: (rank.get(kv[0], len(rank)), kv[0]))
            if v.get("public_loss") is not None]
    if not series:
        return None
    p = float(levels.get("p") or 1e-10)
    xs = [max(b, p) for _, s in series for b, *_ in s] + [float(r) for r in levels.get("r") or []] + [1.0]
    ys = [y for _, s in series for _, y, *_ in s] + [y for _, y in refs]
    lx0, lx1 = math.floor(math.log10(min(xs))), 0
    if lx1 - lx0 < 2:
        lx0 = lx1 - 2
    y0, y1 = min(ys), max(ys)
    pad = 0.12 * (y1 - y0) if y1 > y0 else 0.01 * max(abs(y1), 1e-9)
    y0, y1 = y0 - pad, y1 + pad
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def X(b: float) -> float:
        return LEFT + (math.log10(max(b, 10 ** lx0)) - lx0) / (lx1 - lx0) * pw

    def Y(v: float) -> float:
        return TOP + (y1 - v) / (y1 - y0) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           'role="img" aria-label="Pareto plot: undetected-floor bound against held-out public loss per arm" '
           'style="font:12px system-ui,sans-serif;background:#fff;border:1px solid #d0d7de">']
    out.append(f'<text x="{LEFT + pw / 2:.0f}" y="18" text-anchor="middle" font-size="14" font-weight="600">'
               f'Undetected floor (k = {_e(levels.get("k", 1))}, p = {p:g}) against held-out public loss</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#8c959f"/>')
    step = 1 if lx1 - lx0 <= 8 else 2
    for e in range(lx0, lx1 + 1):
        x = X(10.0 ** e)
        out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + ph}" stroke="#eaeef2"/>')
        if (e - lx1) % step == 0:
            label = "1 (no bound)" if e == 0 else _sup(e)
            out.append(f'<text x="{x:.1f}" y="{TOP + ph + 16}" text-anchor="middle">{_e(label)}</text>')
    for t in _nice_ticks(y0, y1):
        y = Y(t)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + pw}" y2="{y:.1f}" stroke="#eaeef2"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{t:.4g}</text>')
    last_x, row = -1e9, 0
    for r in sorted(float(x) for x in levels.get("r") or []):
        x = X(r)
        out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + ph}" stroke="#57606a" '
                   'stroke-dasharray="2,3"/>')
        # labels above the frame, clear of the data; a close neighbour goes one row up
        row = 1 - row if x - last_x < 48 else 0
        last_x = x
        out.append(f'<text x="{x:.1f}" y="{TOP - 5 - 12 * row}" fill="#57606a" font-size="10.5" '
                   f'text-anchor="middle">r = {r:g}</text>')
    out.append(f'<text x="{LEFT + pw / 2:.0f}" y="{H - 16}" text-anchor="middle">floor bound: posterior bound of '
               'a secret nobody declared (log scale; ≤ r = meets the floor)</text>')
    out.append(f'<text x="16" y="{TOP + ph / 2:.0f}" text-anchor="middle" transform="rotate(-90 16 '
               f'{TOP + ph / 2:.0f})">held-out public loss (nats/token)</text>')
    legend = []
    for i, (name, ref_loss) in enumerate(refs):
        color = REF_COLORS[i % len(REF_COLORS)]
        y = Y(ref_loss)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + pw}" y2="{y:.1f}" stroke="{color}" '
                   'stroke-width="1.5" stroke-dasharray="7,4"/>')
        legend.append(f'<line x1="0" y1="0" x2="22" y2="0" stroke="{color}" stroke-width="1.5" '
                      f'stroke-dasharray="7,4"/><text x="28" y="4">{_e(name)} (reference, no floor)</text>')
    for i, (name, pts) in enumerate(series):
        color, mk = COLORS[i % len(COLORS)], MARKERS[i % len(MARKERS)]
        coords = [(X(max(b, p)), Y(v), ok) for b, v, ok, _r in pts]
        if len({round(x, 1) for x, _, _ in coords}) > 1:       # one x: the floor does not bind; no line
            out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
                       + " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in coords) + '"/>')
        for x, y, ok in coords:
            out.append(_marker(mk, x, y, color, hollow=not ok))
        legend.insert(i, f'<line x1="0" y1="0" x2="22" y2="0" stroke="{color}" stroke-width="2"/>'
                         f'{_marker(mk, 11, 0, color)}<text x="28" y="4">{_e(name)}</text>')
    lx = LEFT + pw + 18
    for j, item in enumerate(legend):
        out.append(f'<g transform="translate({lx},{TOP + 10 + 20 * j})">{item}</g>')
    out.append("</svg>")
    return "".join(out)
