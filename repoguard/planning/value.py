"""What an example is worth to the weighting LP: the objective's coefficient v_i (issue 44 item 3).

    objective "examples"     maximise Σ_i w_i            (Hush eq. 1: every example counts 1)
    objective "code-tokens"  maximise Σ_i v_i·w_i, v_i = (n_bytes_i / 4) × (1 for code, LOW for
                             prose and data files), scaled to mean 1 over the examples

A secret's budget buys about as much weight whatever the objective; the objective decides where
it goes. Under "examples" a 200-byte README chunk and a 4 000-byte module chunk are worth the
same, so the LP spends the budget on whichever examples touch fewest secrets, often short docs;
"code-tokens" spends it on the examples with the most code to learn from. Bytes / 4 stands in for
the token count (about 4 bytes per BPE token of source code); the scale to mean 1 keeps the
objective's magnitude (and the solver's tolerances) as under "examples". Generated, vendored and
minified files never reach the corpus (`source.corpus`), so they need no weight of their own.
"""
from __future__ import annotations

import numpy as np

OBJECTIVES = ("examples", "code-tokens")
LOW = 0.25                      # a prose or data example's tokens count this much
PROSE_OR_DATA = frozenset({"markdown", "rst", "text", "html", "xml", "json", "yaml", "toml", "ini",
                           "dotenv", "csv", "codeowners"})


def example_values(examples, example_ids, objective: str) -> np.ndarray | None:
    """v (len(example_ids),) for `objective`, or None for "examples" (all ones: the LP as in Hush).

    `examples`: the corpus's examples (`source.corpus.Example`: `id`, `n_bytes`, `language`).
    Raises ValueError for an unknown objective or an example id the corpus lacks."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r} (known: {', '.join(OBJECTIVES)})")
    if objective == "examples":
        return None
    by_id = {e.id: e for e in examples}
    v = np.empty(len(example_ids))
    for i, eid in enumerate(example_ids):
        e = by_id.get(eid)
        if e is None:
            raise ValueError(f"example {eid!r} is not in the corpus")
        v[i] = max(e.n_bytes, 1) / 4 * (LOW if e.language in PROSE_OR_DATA else 1.0)
    return v / v.mean() if v.size else v


def plan_values(out_dir, incidence, objective: str) -> dict:
    """`build_plan` keyword arguments for `objective` ({} for "examples"): the corpus that
    `repoguard analyze` wrote to `out_dir` gives each example's size and language. Raises
    InputError when the corpus is missing or does not hold the incidence's examples."""
    if objective == "examples":
        return {}
    from repoguard.core.errors import InputError
    from repoguard.source.corpus import load_corpus

    try:
        v = example_values(load_corpus(out_dir).examples, incidence.example_ids, objective)
    except ValueError as exc:
        raise InputError(f"{out_dir}/corpus: {exc}; re-run `repoguard analyze`") from None
    return {"value": v, "objective": objective}
