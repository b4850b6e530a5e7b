"""The canary audit [Carlini et al. 2019, "The Secret Sharer", §4–5]: plant a random canary in a
secret's examples, train a DP and a --no-dp model with identical settings, measure its exposure.

A canary has a stated format, e.g. `ALPHA_SIGNAL_KEY = "<10 random hex digits>"` (|R| = 16^10,
log2|R| = 40 bits). It is prepended as the first line of `n_insert` examples tied to the test
secret (first, so truncation to max_length never cuts it); those examples keep their ρ, so the
canary is covered by the secret's dominating pair and its bound. The reference candidates are
N ≥ 10^4 other draws from R, scored by the same model.

Output `OUT/audit/canaries.json` (format version 1): the format, |R|, the secret, which examples
carry the canary and their ρ, and per run (`dp`, `no-dp`) both exposure estimates; for the DP run
also the tail bound P[exposure ≥ e] ≤ r(2^−e) from the secret's divergences [Hush Lemma 3.2].
The canary itself is stored only as a SHA-256 and its first 4 characters.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from repoguard.core.errors import InputError


@dataclass(frozen=True)
class CanaryFormat:
    """`name = "<length symbols of alphabet>"`; the secret space R has |alphabet|^length members."""

    name: str = "ALPHA_SIGNAL_KEY"
    alphabet: str = "0123456789abcdef"
    length: int = 10

    @property
    def space_size(self) -> float:
        """|R| = |alphabet|^length, the number of possible secrets (a float: it may exceed 2^63)."""
        return float(len(self.alphabet)) ** self.length

    def render(self, secret: str) -> str:
        """The canary line s[r] for secret r: `name = "r"`."""
        return f'{self.name} = "{secret}"'

    def draw(self, rng: np.random.Generator, n: int) -> list[str]:
        """`n` secrets drawn uniformly (with replacement) from R."""
        idx = rng.integers(0, len(self.alphabet), size=(n, self.length))
        sym = np.array(list(self.alphabet))
        return ["".join(row) for row in sym[idx]]

    def describe(self) -> str:
        """The format with a placeholder for the secret (reports; never a drawn secret)."""
        return self.render(f"<{self.length} random symbols of {self.alphabet}>")


def choose_examples(plan, incidence, secret_id: str, n: int | None, rng: np.random.Generator) -> np.ndarray:
    """`n` plan rows (sorted) drawn without replacement from the secret's examples with ρ > 0;
    `n` None = all of them (the examples a run can ever sample: a canary elsewhere is never seen).

    Raises InputError for an unknown secret, a secret with no example of ρ > 0, or `n` outside
    1..(its examples with ρ > 0)."""
    if secret_id not in incidence.secret_index():
        known = ", ".join(s.id for s in incidence.secrets[:10])
        raise InputError(f"--secret {secret_id}: not in the incidence (known: {known})")
    if list(incidence.example_ids) != list(plan.example_ids):
        raise InputError("plan and incidence disagree on the examples; re-run `repoguard plan`")
    rows = incidence.examples_of(secret_id)
    live = rows[plan.rho[rows] > 0]
    if live.size == 0:
        raise InputError(f"--secret {secret_id}: none of its {rows.size} examples has ρ > 0 (the plan never "
                         "samples them, so a canary there is never trained on); choose another secret")
    if n is None:
        return np.sort(live)
    if n < 1 or live.size < n:
        raise InputError(f"--insert {n}: secret {secret_id} has {live.size} examples with ρ > 0 "
                         f"(of {rows.size}); choose 1..{live.size}, leave --insert out to use all, or another secret")
    return np.sort(rng.choice(live, size=n, replace=False))


def insert_canary(texts: list[str], rows, line: str) -> list[str]:
    """Copy of `texts` with `line` + newline prepended to each of `rows`."""
    out = list(texts)
    for i in rows:
        out[int(i)] = line + "\n" + out[int(i)]
    return out


def scaled_divergences(secret_plan, plan_steps: int, steps: int) -> tuple[float, dict[str, float]]:
    """The secret's divergences for `steps` of the plan's T steps (they compose linearly [Hush §4])."""
    f = steps / plan_steps
    return secret_plan.kl_spent * f, {a: v * f for a, v in secret_plan.renyi_spent.items()}


def run_canary_audit(*, out: Path, root: Path, cfg, secret_id: str, n_insert: int | None = None, n_references: int = 10_000,
                     steps: int | None = None, seed: int = 0, noise_seed: int = 0, fmt: CanaryFormat = CanaryFormat(),
                     device: str = "auto", show_progress: bool = False, tiny_size=None,
                     return_runs: bool = False):
    """Plant one canary in `n_insert` examples of `secret_id` (None = every one of its examples with
    ρ > 0), train the DP/--no-dp pair, score.

    Returns the JSON document also written to `out/audit/canaries.json` (with `return_runs`, the
    pair `(doc, runs.AuditRuns)` so the same models can be measured further). Raises InputError for a
    missing plan/corpus/incidence, an unknown secret, too few sampled examples, N < 10^2."""
    from repoguard.core.artefacts import FORMAT_VERSION, atomic_write_json
    from repoguard.audit.canary_exposure import estimate_exposure, exposure_at_level, exposure_tail_bound
    from repoguard.audit.runs import public_texts, train_pair
    from repoguard.audit.scoring import log_perplexity
    from repoguard.source.corpus import load_corpus
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.planning.plan import load_plan
    from repoguard.training.data import default_redactor, example_texts

    if n_references < 100:
        raise InputError(f"--references {n_references}: need at least 100 (the paper uses ≥ 10^4)")
    plan, inc = load_plan(out), load_incidence(out)
    total = plan.steps if steps is None else int(steps)
    rng = np.random.default_rng(seed)
    rows = choose_examples(plan, inc, secret_id, n_insert, rng)
    canary, *_ = fmt.draw(rng, 1)
    refs = [r for r in fmt.draw(rng, n_references + 16) if r != canary][:n_references]
    texts = example_texts(load_corpus(out, root), plan.example_ids, redactor=default_redactor(out, root))
    public = public_texts(out, plan.example_ids, texts)
    runs = train_pair(plan=plan, texts=insert_canary(texts, rows, fmt.render(canary)), public=public, cfg=cfg,
                      log_dir=out / "audit" / "canaries", steps=total, seed=seed, noise_seed=noise_seed,
                      device=device, show_progress=show_progress, tiny_size=tiny_size)
    sp = next(s for s in plan.secrets if s.id == secret_id)
    kl, ren = scaled_divergences(sp, plan.steps, total)
    candidates = [fmt.render(canary) + "\n"] + [fmt.render(r) + "\n" for r in refs]
    results = {}
    for label, model in runs.models.items():
        px = log_perplexity(model, runs.tokenizer, candidates)
        ex = estimate_exposure(px[0], px[1:], space_size=fmt.space_size).to_json()
        if label == "dp":
            ex["tail_bound_sampled"] = exposure_tail_bound(ex["exposure_sampled"], kl=kl, renyi=ren)
            ex["tail_bound_skewnorm"] = exposure_tail_bound(ex["exposure_skewnorm"], kl=kl, renyi=ren)
        ex["final_loss"] = _final_loss(out / "audit" / "canaries" / label / "train_log.jsonl")
        results[label] = ex
    doc = {
        "format_version": FORMAT_VERSION, "format": fmt.describe(), "space_size": fmt.space_size,
        "log2_space_size": math.log2(fmt.space_size),
        "canary_sha256": hashlib.sha256(canary.encode()).hexdigest(), "canary_redacted": canary[:4] + "…",
        "secret": secret_id, "secret_p": sp.p, "secret_r": sp.r, "achieved_bound": sp.achieved_bound,
        "n_inserted": int(rows.size), "inserted_examples": [plan.example_ids[i] for i in rows],
        "rho_inserted": [float(plan.rho[i]) for i in rows],
        "expected_canary_occurrences": float(total * plan.rho[rows].sum()),
        "sigma": plan.sigma, "batch_size": plan.batch_size, "steps": total, "clip_norm": plan.clip_norm,
        "kl_spent": kl, "n_references": n_references, "seed": seed,
        # Exposure the DP run reaches with probability ≤ 1e-3 by the secret's bound.
        "dp_exposure_at_level_1e-3": exposure_at_level(1e-3, kl=kl, renyi=ren, max_exposure=math.log2(fmt.space_size)),
        "model": cfg.model or "embedded tiny model", "max_length": cfg.max_length, "learning_rate": cfg.learning_rate,
        "runs": results,
        "reading": "P[exposure >= e] <= tail_bound(e) for the DP run [Hush Lemma 3.2 at prior 2^-e]; "
                   "exposure_sampled saturates at log2(N+1)",
    }
    atomic_write_json(out / "audit" / "canaries.json", doc)
    return (doc, runs) if return_runs else doc


def _final_loss(path: Path) -> float | None:
    """Mean loss of the last 10 logged steps with a batch (None when none)."""
    import json

    if not path.is_file():
        return None
    losses = [r["loss"] for r in map(json.loads, path.read_text(encoding="utf-8").splitlines()) if r.get("loss") is not None]
    return float(np.mean(losses[-10:])) if losses else None
