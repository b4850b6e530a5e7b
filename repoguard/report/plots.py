"""The report's figures: matplotlib on the Agg backend → `data:image/png;base64,…` URIs.

Figures: the c sweep (share of examples with w > 0, retained Σw/n and σ against c, as Hush Fig. 1a
and 1c),
the histogram of achieved/target bound, training loss per run, and canary exposure per run.
Each function returns None when it has nothing to draw.
"""
from __future__ import annotations

import base64
import io


def _fig(w: float = 6.4, h: float = 3.2):
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(w, h), dpi=90)
    return plt, fig, ax


def _png(plt, fig) -> str:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def sweep_plot(sweep: list[dict], chosen_c: float | None, n_train: int | None = None) -> str | None:
    """Retention (share with w > 0, and Σw/n over the `n_train` training examples; left axis) and σ
    (right axis) against c, log2 x axis [Hush Fig. 1a, 1c]. When Σw is the same at every c
    (`retention.sweep_retention_flat`) the title says so: c then moves only σ and the secrets' weight."""
    from repoguard.planning.retention import sweep_retention_flat

    pts = [r for r in sweep if r.get("c")]
    if not pts:
        return None
    plt, fig, ax = _fig()
    cs = [r["c"] for r in pts]
    ax.plot(cs, [r.get("frac_positive") or 0 for r in pts], "o-", color="tab:blue", label="w > 0")
    if n_train:
        ax.plot(cs, [(r.get("sum_w") or 0) / n_train for r in pts], "^:", color="tab:cyan", label="retained Σw/n")
        ax.legend(fontsize=7, loc="lower right")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("c (LP scale)")
    ax.set_ylabel("share of training examples", color="tab:blue")
    ax.set_ylim(0, 1.05)
    ax2 = ax.twinx()
    sig = [r["sigma"] if r.get("sigma") is not None else float("nan") for r in pts]
    ax2.plot(cs, sig, "s--", color="tab:red", label="σ")
    ax2.set_yscale("log")
    ax2.set_ylabel("noise multiplier σ", color="tab:red")
    if chosen_c:
        ax.axvline(chosen_c, color="gray", lw=1, ls=":")
    flat = sweep_retention_flat(pts)
    ax.set_title("c sweep: retention does not change with c (only σ does)" if flat else "c sweep: retention and σ",
                 fontsize=10 if flat else None)
    return _png(plt, fig)


def ratio_histogram(hist: dict) -> str | None:
    """Histogram of log10(achieved bound / target r) over all secrets (≤ 0 = target met)."""
    counts, edges = hist.get("counts") or [], hist.get("edges") or []
    if not counts:
        return None
    plt, fig, ax = _fig()
    ax.stairs(counts, edges, fill=True, color="tab:green", alpha=0.7)
    ax.axvline(0, color="black", lw=1)
    ax.set_xlabel("log10(achieved bound / target r)")
    ax.set_ylabel("secrets")
    ax.set_title("achieved / target bound")
    return _png(plt, fig)


def loss_plot(runs: list[dict]) -> str | None:
    """Per-step training loss of each run (DP solid, --no-dp dashed), and the public held-out loss
    where the log has it (markers): a published DP run logs only the latter."""
    runs = [r for r in runs if any(x.get("loss") is not None for x in r["log"]) or r.get("heldout")]
    if not runs:
        return None
    plt, fig, ax = _fig()
    for r in runs:
        pts = [(x["step"], x["loss"]) for x in r["log"] if x.get("loss") is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], ls="-" if r.get("private") else "--", label=r["name"])
        if r.get("heldout"):
            ax.plot([p[0] for p in r["heldout"]], [p[1] for p in r["heldout"]], marker="o", ls=":",
                    label=f"{r['name']}: held-out (public slice)")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats/token)")
    ax.legend(fontsize=7)
    ax.set_title("training and held-out loss")
    return _png(plt, fig)


def exposure_plot(canaries: dict | None) -> str | None:
    """Exposure (sampled and skew-normal) per run against the maximum log2|R|."""
    if not canaries or not canaries.get("runs"):
        return None
    plt, fig, ax = _fig(6.4, 2.8)
    labels = list(canaries["runs"])
    import numpy as np

    x = np.arange(len(labels))
    ax.bar(x - 0.2, [canaries["runs"][k]["exposure_sampled"] for k in labels], 0.4, label="sampled rank")
    ax.bar(x + 0.2, [canaries["runs"][k]["exposure_skewnorm"] for k in labels], 0.4, label="skew-normal")
    ax.axhline(canaries["log2_space_size"], color="black", lw=1, ls=":", label="log2 |R|")
    ax.set_xticks(x, labels)
    ax.set_ylabel("exposure (bits)")
    ax.legend(fontsize=7)
    ax.set_title("canary exposure")
    return _png(plt, fig)
