"""The slices a company reads a compare by (issue 44 item 4), and each protected arm against drop-dp.

`public` and `secret-tied` (`source.split.slices`) mix code with documentation and data files: on
scrapy most untied held-out examples are docs, so a method that moves sampling between docs and
code looks better or worse there for reasons nobody deploying a code assistant cares about. The
slices added here are over held-out examples of *code* files only (`is_code`: a programming
language's extension; Markdown, reStructuredText, text, JSON, YAML, TOML, CSV, HTML… are not):

- `public-code`    untied code;
- `tied-code`      code tied to any secret;
- `uses-internal`  code whose file imports a file of a declared secret (directly: one hop in the
                   import graph of `analyzers.imports`, built here over the held-out files only) —
                   what an assistant for this company's code must know, whatever the tie rules.

`versus_drop_dp` puts each protected arm beside `drop-dp` (what a team would do instead: drop
what is tied, DP-SGD on the rest) per slice: the difference arm − drop-dp of the mean held-out
losses over repeats with its standard error, sqrt(s_a²/n_a + s_d²/n_d) (Welch; sample standard
deviations), and the share of the drop-dp → no-dp headroom the arm recovers,
(L_drop-dp − L_arm) / (L_drop-dp − L_no-dp) — 0 is drop-dp's loss, 1 the ceiling of training on
everything without noise.
"""
from __future__ import annotations

import math
import statistics

import numpy as np

CODE_SLICES = ("public-code", "tied-code", "uses-internal")
# Slices the arm-against-drop-dp summary reports, in this order.
VERSUS_SLICES = ("public-code", "tied-code", "uses-internal", "public", "secret-tied")

# Source extensions beyond those the import analyzer parses (analyzers.imports_lang.EXTENSIONS).
_MORE_CODE = (".rb", ".php", ".kt", ".kts", ".scala", ".swift", ".cs", ".fs", ".m", ".mm", ".lua", ".pl",
              ".pm", ".r", ".jl", ".dart", ".ex", ".exs", ".erl", ".hs", ".clj", ".groovy", ".vue",
              ".svelte", ".sh", ".bash", ".zsh", ".ps1", ".sql", ".proto", ".pyx", ".zig", ".nim", ".ml")


def code_extensions() -> frozenset[str]:
    """Extensions (with the dot, lower-case) counted as code: the import analyzer's
    (imports_lang.EXTENSIONS) and other programming languages'."""
    from repoguard.analyzers.imports_lang import EXTENSIONS

    return frozenset(EXTENSIONS) | frozenset(_MORE_CODE)


def is_code(path: str) -> bool:
    """True when `path` has a programming language's extension (case-insensitive)."""
    dot = path.rfind(".")
    return dot > path.rfind("/") and path[dot:].lower() in code_extensions()


def internal_importers(repo, corpus, incidence, test: np.ndarray) -> set[str]:
    """Held-out code files (plan rows `test`) that directly import a file of a declared secret.

    A declared secret's files are those its `declared` evidence names (the files under its
    paths). The import graph is built over the held-out files alone (their imports resolved among
    every tracked file), so this costs a parse of a few dozen files, not the repository."""
    from repoguard.analyzers import _files
    from repoguard.analyzers.imports import build_graph
    from repoguard.source.split import example_path

    declared = {s.id for s in incidence.secrets if s.kind == "declared"}
    seeds = {ev.path for ev in incidence.evidence if ev.analyzer == "declared" and ev.secret_id in declared}
    held = {example_path(incidence.example_ids[i]) for i in np.flatnonzero(test)}
    held = {p for p in held if is_code(p) and p not in seeds}
    if not seeds or not held:
        return set()
    shas = _files.corpus_files(corpus)
    g = build_graph(repo, {p: shas.get(p, "") for p in sorted(held)}).graph
    return {u for u in held if g.has_node(u)
            and any(v in seeds and not g.edges[u, v].get("contains") for v in g.successors(u))}


def code_slices(incidence, test: np.ndarray, *, importers: set[str] = frozenset()) -> dict[str, np.ndarray]:
    """{"public-code", "tied-code", "uses-internal"} → held-out plan rows (sorted), from the
    incidence's example ids and `importers` (`internal_importers`). Empty slices are left out,
    as `split.slices` leaves out empty per-secret slices."""
    from repoguard.source.split import example_path

    tied = incidence.matrix.tocsr().getnnz(axis=1) > 0
    idx = np.flatnonzero(test)
    paths = [example_path(incidence.example_ids[i]) for i in idx]
    code = np.fromiter((is_code(p) for p in paths), dtype=bool, count=len(idx))
    uses = np.fromiter((p in importers for p in paths), dtype=bool, count=len(idx))
    out = {"public-code": idx[code & ~tied[idx]], "tied-code": idx[code & tied[idx]],
           "uses-internal": idx[code & uses]}
    return {k: v for k, v in out.items() if v.size}


def slice_losses(runs: list[dict], sl: str) -> list[float]:
    """The final held-out loss on slice `sl` of each run result that scored it."""
    vals = [((r.get("slices") or {}).get(sl) or {}).get("loss") for r in runs]
    return [float(v) for v in vals if v is not None]


def versus_drop_dp(runs: dict[str, list[dict]], protected=None) -> dict:
    """Each protected arm of `runs` (arm → its repeats' results) against `drop-dp`, per slice of
    `VERSUS_SLICES`: {arm: {slice: {"diff", "se", "t", "headroom", "n"}}} where diff = mean loss of
    the arm − mean loss of drop-dp (negative: the arm is better), se its standard error (None with
    fewer than two repeats of either arm), t = diff / se, and headroom the share of the drop-dp →
    no-dp gap the arm recovers (None without a no-dp arm or when that gap is not positive).
    {} without a drop-dp arm."""
    from repoguard.evaluation.protection import PROTECTED

    protected = PROTECTED if protected is None else protected
    if "drop-dp" not in runs:
        return {}
    out: dict = {}
    for arm, rs in runs.items():
        if arm == "drop-dp" or arm not in protected:
            continue
        per = {}
        for sl in VERSUS_SLICES:
            a, d = slice_losses(rs, sl), slice_losses(runs["drop-dp"], sl)
            if not a or not d:
                continue
            diff = statistics.fmean(a) - statistics.fmean(d)
            se = math.sqrt(statistics.variance(a) / len(a) + statistics.variance(d) / len(d)) \
                if len(a) > 1 and len(d) > 1 else None
            nd = slice_losses(runs.get("no-dp") or [], sl)
            gap = statistics.fmean(d) - statistics.fmean(nd) if nd else None
            per[sl] = {"diff": diff, "se": se, "t": diff / se if se else None,
                       "headroom": -diff / gap if gap and gap > 0 else None,
                       "gap": gap, "n": [len(a), len(d), len(nd)]}
        out[arm] = per
    return out


def format_versus(vs: dict) -> list[str]:
    """`versus_drop_dp` as text lines: per arm and slice, diff ± se (t) and headroom recovered."""
    if not vs:
        return []
    out = ["against drop-dp (arm − drop-dp held-out loss, mean over repeats ± standard error; headroom = "
           "share of the drop-dp → no-dp gap recovered):"]
    for arm, per in vs.items():
        cells = []
        for sl in VERSUS_SLICES:
            v = per.get(sl)
            if not v:
                continue
            se = f" ± {v['se']:.4f} (t {v['t']:+.1f})" if v.get("se") else ""
            hr = f", headroom {v['headroom']:+.0%}" if v.get("headroom") is not None else ""
            cells.append(f"{sl} {v['diff']:+.4f}{se}{hr}")
        out.append(f"  {arm:>18}  " + "; ".join(cells))
    return out
