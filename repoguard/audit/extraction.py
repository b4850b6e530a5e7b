"""k-extractable memorisation [Carlini et al. 2023, "Quantifying Memorization Across Neural
Language Models", §2; Hush §5.2]: a training example is memorised when, prompted with its first
k tokens, greedy decoding reproduces its next m tokens exactly.

Measured per secret over a seeded sample of its examples (and over examples tied to no secret,
the baseline), for the DP and the --no-dp model of `runs.train_pair`. Defaults k = m = 50; when
k + m exceeds the model's `max_length` (the embedded tiny model trains on short sequences) both are
scaled down in proportion and the result says so. Examples shorter than k + m tokens are skipped
and counted.

Exact-match extraction is an argmax test with no margin: a token whose probability is 0.3 under
a flat distribution decides it as surely as one at 0.99, and then float rounding (AVX-512 vs AVX2
kernels) can flip it. So each group also reports `p_target`, the mean over its sampled examples of
the geometric-mean probability of the m true tokens given their teacher-forced prefix; and the
document's `reference` says whether the --no-dp model memorised anything at all: a no-DP reference
that extracts (almost) nothing cannot show what DP prevents, and the audit says so instead of
reporting "0 % extractable" as if it were a finding.

Output `OUT/audit/extraction.json` (format version 1).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from repoguard.core.errors import InputError

PUBLIC = "(no secret)"


def clamp_lengths(k: int, m: int, max_length: int) -> tuple[int, int, str]:
    """(k', m', note): k and m scaled in proportion so that k' + m' ≤ max_length, each ≥ 1.

    Raises InputError when k or m < 1 or max_length < 2."""
    if k < 1 or m < 1:
        raise InputError(f"-k/-m: must be ≥ 1, got k={k}, m={m}")
    if max_length < 2:
        raise InputError(f"max_length: must be ≥ 2, got {max_length}")
    if k + m <= max_length:
        return k, m, ""
    k2 = max(1, min(max_length - 1, math.floor(max_length * k / (k + m))))
    m2 = max_length - k2
    return k2, m2, (f"k={k}, m={m} exceed max_length={max_length} tokens per example; "
                    f"clamped to k={k2}, m={m2}")


def extractable(model, seqs, *, k: int, m: int, pad_id: int) -> np.ndarray:
    """Boolean per sequence (each of length ≥ k + m): greedy decoding from its first k tokens
    reproduces tokens k..k+m−1 exactly."""
    from repoguard.audit.scoring import greedy_continuations

    if not len(seqs):
        return np.zeros(0, dtype=bool)
    arr = np.stack([np.asarray(s[:k + m], dtype=np.int64) for s in seqs])
    gen = greedy_continuations(model, arr[:, :k], m=m, pad_id=pad_id)
    return np.all(gen == arr[:, k:k + m], axis=1)


def target_probability(model, seqs, *, k: int, m: int) -> np.ndarray:
    """Geometric-mean probability of tokens k..k+m−1 given everything before them (teacher
    forced), per sequence (each of length ≥ k + m): shape (len(seqs),), values in (0, 1]."""
    import torch

    from repoguard.training.scoring import evaluating

    if not len(seqs):
        return np.zeros(0)
    arr = np.stack([np.asarray(s[:k + m], dtype=np.int64) for s in seqs])
    device = next(model.parameters()).device
    out = np.empty(arr.shape[0])
    with evaluating(model):
        for b in range(0, arr.shape[0], 64):
            x = torch.from_numpy(arr[b:b + 64]).to(device)
            logp = torch.log_softmax(model(input_ids=x, use_cache=False).logits[:, k - 1:k + m - 1].float(), -1)
            tok = logp.gather(-1, x[:, k:k + m, None])[..., 0]
            out[b:b + x.shape[0]] = tok.mean(dim=1).exp().cpu().numpy()
    return out


# Below this fraction of secret examples extractable from the --no-dp model, the reference has not
# memorised what the audit asks about, and a DP figure of 0 % says nothing.
MIN_REFERENCE_EXTRACTION = 0.1


def reference_note(groups: dict, label: str = "no-dp") -> str:
    """"" when the --no-dp reference extracts ≥ MIN_REFERENCE_EXTRACTION of some secret's sampled
    examples, else a one-line warning that the audit cannot show what DP prevents."""
    rates = [g.get(label) for name, g in groups.items() if name != PUBLIC and g.get(label) is not None]
    if not rates or max(rates) >= MIN_REFERENCE_EXTRACTION:
        return ""
    return (f"the --no-dp reference extracts at most {100 * max(rates):.0f} % of any secret's examples: it "
            "memorised too little for this audit to show what DP prevents (train more --steps, a higher "
            "learning rate, or adapt more modules with --lora-targets)")


def sample_groups(plan, incidence, seqs, *, need: int, per_secret: int, max_secrets: int,
                  rng: np.random.Generator) -> tuple[dict[str, dict], int]:
    """{group: {"rows": sampled plan rows, "n_examples", "n_long_enough"}} for the `max_secrets`
    secrets with the most examples, plus the examples tied to no secret; and the number of secrets
    left out. Only rows with ρ > 0 (ever trained on) and ≥ `need` tokens are eligible."""
    long_enough = np.array([len(s) >= need for s in seqs]) & (np.asarray(plan.rho) > 0)
    csc = incidence.matrix.tocsc()
    counts = np.diff(csc.indptr)
    order = np.argsort(-counts, kind="stable")[:max_secrets]
    groups = {}

    def add(name, rows):
        ok = rows[long_enough[rows]]
        pick = np.sort(rng.choice(ok, size=min(per_secret, ok.size), replace=False)) if ok.size else ok
        groups[name] = {"rows": pick, "n_examples": int(rows.size), "n_long_enough": int(ok.size)}

    for j in order:
        add(incidence.secrets[j].id, csc.indices[csc.indptr[j]:csc.indptr[j + 1]])
    add(PUBLIC, np.flatnonzero(incidence.matrix.getnnz(axis=1) == 0))
    return groups, int(max(0, len(incidence.secrets) - len(order)))


def measure(runs, plan, incidence, *, k: int = 50, m: int = 50, max_length: int, per_secret: int = 20,
            max_secrets: int = 50, seed: int = 0) -> dict:
    """Fraction of sampled examples k-extractable, per group and per model in `runs.models`.

    Returns {"k", "m", "note", "groups": {group: {"n_examples", "n_long_enough", "n_sampled",
    "<label>": fraction or None, "p_target_<label>": mean `target_probability` or None}},
    "secrets_left_out", "reference": `reference_note` ("" when the --no-dp model memorised)}."""
    k2, m2, note = clamp_lengths(k, m, max_length)
    rng = np.random.default_rng(seed)
    groups, left_out = sample_groups(plan, incidence, runs.seqs, need=k2 + m2, per_secret=per_secret,
                                     max_secrets=max_secrets, rng=rng)
    rows_all = np.unique(np.concatenate([g["rows"] for g in groups.values()] or [np.zeros(0, int)])).astype(int)
    hit, prob = {}, {}
    for label, model in runs.models.items():
        seqs = [runs.seqs[i] for i in rows_all]
        res = extractable(model, seqs, k=k2, m=m2, pad_id=runs.tokenizer.pad_token_id)
        hit[label] = dict(zip(rows_all.tolist(), res.tolist()))
        prob[label] = dict(zip(rows_all.tolist(), target_probability(model, seqs, k=k2, m=m2).tolist()))
    out = {}
    for name, g in groups.items():
        row = {"n_examples": g["n_examples"], "n_long_enough": g["n_long_enough"], "n_sampled": int(g["rows"].size)}
        for label in runs.models:
            row[label] = (float(np.mean([hit[label][int(i)] for i in g["rows"]])) if g["rows"].size else None)
            row[f"p_target_{label}"] = (float(np.mean([prob[label][int(i)] for i in g["rows"]]))
                                        if g["rows"].size else None)
        out[name] = row
    return {"k": k2, "m": m2, "k_requested": k, "m_requested": m, "note": note, "groups": out,
            "secrets_left_out": left_out, "reference": reference_note(out)}


def run_extract_audit(*, out: Path, root: Path, cfg, k: int = 50, m: int = 50, per_secret: int = 20,
                      max_secrets: int = 50, steps: int | None = None, seed: int = 0, noise_seed: int = 0,
                      device: str = "auto", show_progress: bool = False, tiny_size=None) -> dict:
    """Train the DP/--no-dp pair on the plan's (redacted) examples and measure extraction.

    Returns the document written to `out/audit/extraction.json`. Raises InputError for missing
    artefacts or bad k/m."""
    from repoguard.core.artefacts import FORMAT_VERSION, atomic_write_json
    from repoguard.audit.runs import public_texts, train_pair
    from repoguard.source.corpus import load_corpus
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.planning.plan import load_plan
    from repoguard.training.data import default_redactor, example_texts

    clamp_lengths(k, m, cfg.max_length)          # fail before training
    plan, inc = load_plan(out), load_incidence(out)
    texts = example_texts(load_corpus(out, root), plan.example_ids, redactor=default_redactor(out, root))
    runs = train_pair(plan=plan, texts=texts, public=public_texts(out, plan.example_ids, texts), cfg=cfg,
                      log_dir=out / "audit" / "extraction", steps=steps, seed=seed, noise_seed=noise_seed,
                      device=device, show_progress=show_progress, tiny_size=tiny_size)
    doc = measure(runs, plan, inc, k=k, m=m, max_length=cfg.max_length, per_secret=per_secret,
                  max_secrets=max_secrets, seed=seed)
    doc.update({"format_version": FORMAT_VERSION, "sigma": plan.sigma, "batch_size": plan.batch_size,
                "steps": plan.steps if steps is None else int(steps), "clip_norm": plan.clip_norm,
                "model": cfg.model or "embedded tiny model", "max_length": cfg.max_length,
                "learning_rate": cfg.learning_rate, "seed": seed})
    atomic_write_json(out / "audit" / "extraction.json", doc)
    return doc
