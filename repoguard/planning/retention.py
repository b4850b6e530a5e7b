"""What the weighting keeps: per secret and per top-level directory, examples, Σw and Σw/n.

Example i is sampled at rate ρ_i ∝ w_i ∈ [0, 1] (Hush eq. 1, Alg. 2), so over a group of n
training examples Σw/n is the share of the group trained on at full rate and 1 − Σw/n what
protecting secrets costs it. Held-out examples (the evaluation split, w = 0 by construction) are
counted apart (`held_out`) and left out of n, so a directory is not "dropped" for being tested on.
A declared secret whose training examples keep less than `DROPPED` of their weight (Σw/n) is
"effectively dropped": the run is drop-dp for it, and every summary (run, plan, report) says so
in words (`secret_lines`), since a bound "within target" says nothing about whether it was
trained on. Every "retained" figure of repoguard is this module's Σw/n; there is no other.
An example's directory is the first component of the path in its id (`evaluation.split.
example_path`: paths may hold '#'); files at the root are "(root)".
"""
from __future__ import annotations

import numpy as np

DROPPED = 0.01   # a declared secret keeping less than this share of its examples' weight is dropped


def top_dir(path: str) -> str:
    """`docs/a/b.py` → `docs/`; `setup.py` → `(root)`."""
    return path.split("/", 1)[0] + "/" if "/" in path else "(root)"


def retention(incidence, w: np.ndarray, test: np.ndarray | None = None) -> dict:
    """{"per_secret": rows, "per_directory": rows, "n_train", "sum_w", "retained"}.

    Rows: per secret {"secret", "kind", "examples" (training examples tied to it), "held_out", "sum_w",
    "retained" (Σw/examples, None when it has none)}; per directory {"directory", "examples",
    "held_out", "tied", "sum_w", "retained"}; both sorted by retained share, least first.
    `w` (n_examples,) in plan row order; `test` bool (n_examples,) or None."""
    from repoguard.source.split import example_path

    ids = list(incidence.example_ids)
    w = np.asarray(w, dtype=float)
    test = np.zeros(len(ids), dtype=bool) if test is None else np.asarray(test, dtype=bool)
    train = ~test
    csc = incidence.matrix.tocsc()
    per_secret = []
    for j, sec in enumerate(incidence.secrets):
        rows = csc.indices[csc.indptr[j]:csc.indptr[j + 1]]
        tr = rows[train[rows]]
        sw = float(w[tr].sum())
        per_secret.append({"secret": sec.id, "kind": sec.kind, "examples": int(tr.size), "held_out": int(rows.size - tr.size),
                           "sum_w": sw, "retained": sw / tr.size if tr.size else None})
    tied = np.asarray(incidence.matrix.getnnz(axis=1) > 0)
    dirs: dict[str, dict] = {}
    for i, eid in enumerate(ids):
        top = top_dir(example_path(eid))
        d = dirs.setdefault(top, {"directory": top, "examples": 0, "held_out": 0, "tied": 0, "sum_w": 0.0})
        if test[i]:
            d["held_out"] += 1
            continue
        d["examples"] += 1
        d["sum_w"] += float(w[i])
        d["tied"] += int(tied[i])
    for d in dirs.values():
        d["retained"] = d["sum_w"] / d["examples"] if d["examples"] else None

    def key(r, name):
        return (r["retained"] if r["retained"] is not None else 2.0, r[name])
    n_train = int(train.sum())
    return {"per_secret": sorted(per_secret, key=lambda r: key(r, "secret")),
            "per_directory": sorted(dirs.values(), key=lambda r: key(r, "directory")),
            "n_train": n_train, "sum_w": float(w[train].sum()),
            "retained": float(w[train].sum()) / n_train if n_train else None}


def sweep_retention_flat(sweep: list[dict], *, rel_tol: float = 0.005) -> bool:
    """True when the c sweep's retained weight Σw is the same at every c to within `rel_tol`
    (relative): the LP's secret budgets are a negligible share of Σw, so c moves σ and the
    secrets' own weight but not how much of the corpus is trained on."""
    sw = [float(r.get("sum_w") or 0) for r in sweep if r.get("c")]
    if len(sw) < 2 or max(sw) <= 0:
        return False
    return (max(sw) - min(sw)) <= rel_tol * max(sw)


def least_retained(ret: dict | None, limit: int = 3) -> dict:
    """The declared secrets that keep least, from a `retention` dict: {"rows": the `limit` least
    retained declared secrets with training examples (rows of `per_secret`), "dropped": ids of
    every declared secret keeping < DROPPED of its weight, "n_declared"}. A row without `kind`
    (a plan written before it was recorded) counts as declared."""
    rows = [r for r in (ret or {}).get("per_secret", [])
            if r.get("examples") and r.get("kind", "declared") == "declared" and r.get("retained") is not None]
    rows.sort(key=lambda r: (r["retained"], r["secret"]))
    return {"rows": rows[:limit], "dropped": [r["secret"] for r in rows if r["retained"] < DROPPED],
            "n_declared": len(rows)}


def secret_line(row: dict) -> str:
    """One secret's retention in words: "dynamo-query: kept 12.3 of 500 examples (2.5 %)", or for
    a dropped one "sfn-engine: 0.0 % of 949 examples kept — not trained on (Σw 0.02)"."""
    pct = 100 * row["retained"]
    if row["retained"] < DROPPED:
        return (f"{row['secret']}: {pct:.1f} % of {row['examples']} examples kept — not trained on "
                f"(Σw {row['sum_w']:.3g})")
    return f"{row['secret']}: kept {row['sum_w']:.3g} of {row['examples']} examples ({pct:.1f} %)"


def secret_lines(least: dict | None, *, max_dropped: int = 10) -> list[str]:
    """The lines every summary prints from `least_retained`: the least retained declared secrets,
    then, when more are dropped than those lines show, how many and which ([] when no declared
    secret has training examples)."""
    if not least or not least.get("rows"):
        return []
    lines = [secret_line(r) for r in least["rows"]]
    shown = {r["secret"] for r in least["rows"]}
    rest = [s for s in least["dropped"] if s not in shown]
    if rest:
        more = f" and {len(rest) - max_dropped} more" if len(rest) > max_dropped else ""
        lines.append(f"{len(least['dropped'])} of {least['n_declared']} declared secrets are not trained on "
                     f"(< {100 * DROPPED:g} % kept), also: {', '.join(rest[:max_dropped])}{more}")
    return lines
