"""At-risk ranking: which training examples would a trained model give away?

[Stock, Shilov, Mironov, Sablayrolles 2022, "Defending against reconstruction attacks with Rényi
differential privacy", §3.2 lazy sampling, §4.2; docs/privacy.md "Audits".] For each scored
example z of a trained run (a *window*: a context followed by a span of tokens):

  * log P_S(span | context) — the log-probability that the attack's decoding S regenerates the
    span after the context, for plain, temperature and top-k sampling (`audit.lazy`: the sum of
    the sampler's log renormalised conditionals; −inf, written as null, when a token falls outside
    the top k);
  * the calibrated loss Δℓ(z) = ℓ(θ, z) − ℓ(θ₀, z), with ℓ the mean next-token cross-entropy over
    the window (nats/token) and θ₀ a calibration model that never saw z: the run's base model
    (its LoRA adapter disabled; the base is frozen during training). Δℓ < 0: the run fits z
    better than a model that never trained on it.

The single risk score (nats/token; higher = more at risk) combines the two coordinates:

    score(z) = max_S log P_S(span | context) / |span|  −  Δℓ(z)

i.e. the best attack's per-token log generation probability plus how much better the trained
model fits z than the calibration model. Both coordinates are kept in the output.

Windows. A *trained* window is the example exactly as trained (credentials redacted, BOS,
truncated to `max_length` tokens): context = its first min(k, L − m) tokens (≥ 1), span = the
next ≤ m tokens. A *credential* window exists for every credential finding in an example's
pre-redaction text (the training text held `<REDACTED:rule>` there): span = the first ≤ m tokens
overlapping the credential, context = BOS + the tokens before it (left-truncated so the window
fits `max_length`). The raw text lives only in memory here; outputs carry the example id, the
rule id and a prefix of the *redacted* text, never credential text.

Which examples: every example tied to a secret, every example that held a credential, and the
examples tied to no secret (all, or a seeded sample of `sample` of them, stated in the output).
With `sample`, only the scored examples are read and redacted (each on its whole file, as training
redacts them: `training.data.ExampleRedactor`): the tied ones (an `analyze` with the credentials
analyzer ties every credential's examples to a credential secret) and the sample drawn among the
others; a credential the redaction finds in a sampled example still gets its window, but the
files of untied, unsampled examples are never scanned.

Outputs (`dest`, default `OUT/audit/risk.json`, format version 1): settings, the calibration
model, per-secret tables (worst `per_secret` windows first), the global top, scatter points; and
`risk.npz` next to it with every window's columns (plan row, credential flag, log P per sampler,
losses, score).
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from repoguard.audit.lazy import Sampler
from repoguard.core.errors import InputError

DEFAULT_SAMPLERS = (Sampler(), Sampler(temperature=0.7), Sampler(top_k=40))
PREFIX_CHARS = 24
PUBLIC = "(no secret)"
MAX_POINTS = 5000


@dataclass
class Window:
    """One scored window: plan row, token ids, index of the span's first token, kind
    ("trained" or "credential"), the finding's rule id and the secrets it carries."""

    row: int
    ids: np.ndarray
    span_start: int
    kind: str = "trained"
    rule: str | None = None
    secrets: list[str] = field(default_factory=list)


def trained_window(seq: np.ndarray, *, k: int, m: int) -> tuple[np.ndarray, int] | None:
    """(window, span start) of a trained sequence: context min(k, L − m) tokens (≥ 1), span the
    next ≤ m. None for sequences shorter than 2 tokens (nothing to predict)."""
    n = len(seq)
    if n < 2:
        return None
    ctx = min(k, max(1, n - m))
    span = min(m, n - ctx)
    return np.asarray(seq[:ctx + span], dtype=np.int64), ctx


def credential_windows(raw: str, findings, tokenizer, *, max_length: int, m: int) -> list[tuple[object, np.ndarray, int]]:
    """[(finding, window, span start)] for each finding with a span in `raw` (pre-redaction text):
    span = the first ≤ m tokens overlapping the credential, context = BOS + the tokens before it
    (left-truncated to fit `max_length`). Finding offsets are UTF-8 byte offsets (credentials.redact)."""
    data = raw.encode("utf-8", "surrogateescape")
    enc = tokenizer(raw, add_special_tokens=False, return_offsets_mapping=True)
    ids, offs = list(enc["input_ids"]), list(enc["offset_mapping"])
    bos = tokenizer.bos_token_id
    out = []
    for f in sorted((f for f in findings if f.end > f.start), key=lambda f: f.start):
        c0 = len(data[:f.start].decode("utf-8", "surrogateescape"))
        c1 = len(data[:f.end].decode("utf-8", "surrogateescape"))
        t0 = next((t for t, (_, e) in enumerate(offs) if e > c0), len(ids))
        t1 = next((t for t, (s, _) in enumerate(offs) if s >= c1), len(ids))
        if t0 >= len(ids):
            continue
        n_span = max(1, min(m, t1 - t0, max_length - 2))
        room = max_length - n_span - (bos is not None)
        ctx = ids[max(0, t0 - room):t0]
        head = ([bos] if bos is not None else []) + ctx
        if not head:
            continue            # no BOS and the credential opens the text: no context to condition on
        out.append((f, np.asarray(head + ids[t0:t0 + n_span], dtype=np.int64), len(head)))
    return out


def risk_scores(logp: np.ndarray, n_span: np.ndarray, loss: np.ndarray, loss_calibration: np.ndarray) -> np.ndarray:
    """score = max_S logp_S / |span| − (ℓ(θ, z) − ℓ(θ₀, z)), nats/token (module docstring).

    logp (n, S) nats (−inf allowed), n_span (n,) ≥ 1, losses (n,) → (n,); −inf when every sampler
    gives probability 0."""
    with np.errstate(invalid="ignore"):
        best = np.max(logp, axis=1) / np.maximum(n_span, 1)
    return best - (loss - loss_calibration)


def _prefix(text: str) -> str:
    flat = " ".join(text.split())
    return flat[:PREFIX_CHARS] + ("…" if len(flat) > PREFIX_CHARS else "")


def _num(x: float):
    return float(x) if math.isfinite(x) else None


def run_risk_audit(*, out: Path, root: Path, cfg, run_dir: Path | None = None, model_dir: str | None = None,
                   k: int = 32, m: int = 32, samplers: Sequence[Sampler] = DEFAULT_SAMPLERS,
                   sample: int | None = None, per_secret: int = 10, seed: int = 0, device: str = "auto",
                   batch_size: int = 16, dest: Path | None = None, plan=None) -> dict:
    """Rank the examples of the run in `run_dir` (default `out/train`) by reconstruction risk.

    Args:
        out: the output directory holding `plan/`, `incidence/`, `corpus/` of that run.
        cfg: `[training]` (`max_length`: tokens per trained example; `model`: base of a --model run).
        k, m: context and span tokens (clamped so k + m ≤ max_length, as `audit extract` does).
        samplers: the attack decodings (≥ 1). sample: untied examples scored (None = all; tied
            and credential examples are always all scored). per_secret: rows kept per secret.
        dest: the JSON file (default `out/audit/risk.json`); the `.npz` goes next to it.
        plan: the run's own plan when it is not `out/plan` (a `compare` arm: its ρ), same examples.
    Returns the JSON document. Raises InputError for missing/inconsistent artefacts or bad values."""
    from repoguard.core.artefacts import FORMAT_VERSION, atomic_write_bytes, atomic_write_json
    from repoguard.audit.extraction import clamp_lengths
    from repoguard.audit.lazy import score_windows
    from repoguard.audit.trained import load_trained_run
    from repoguard.analyzers.credentials import secret_id as credential_secret_id
    from repoguard.source.corpus import load_corpus
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.planning.plan import load_plan
    from repoguard.training.data import ExampleRedactor, default_redactor, tokenize
    from repoguard.training.model import limit_cpu_threads, pick_device

    if not samplers:
        raise InputError("risk: at least one sampler is needed")
    if sample is not None and sample < 0 or per_secret < 1 or batch_size < 1:
        raise InputError("--sample must be ≥ 0, --per-secret and --batch-size ≥ 1")
    k2, m2, note = clamp_lengths(k, m, cfg.max_length)
    plan, inc = plan if plan is not None else load_plan(out), load_incidence(out)
    if list(inc.example_ids) != list(plan.example_ids):
        raise InputError(f"{out / 'plan'}: plan and incidence disagree on the examples; re-run `repoguard plan`")
    run_dir = Path(run_dir) if run_dir else Path(out) / "train"
    dev = pick_device(device)
    limit_cpu_threads(dev)
    run = load_trained_run(run_dir, device=dev, model_dir=model_dir or cfg.model or None)
    _check_run(run, plan)
    corpus = load_corpus(out, root)
    by_id = {e.id: e for e in corpus.examples}
    redactor = ExampleRedactor(corpus, default_redactor(out, root))
    n = len(plan.example_ids)
    csr = inc.matrix.tocsr()
    tied = np.diff(csr.indptr) > 0
    pool = np.flatnonzero(~tied)
    if sample is None:
        todo = np.arange(n)
    else:   # redact only what is scored: the tied examples (credential secrets included) + the sample
        if sample < pool.size:
            pool = np.sort(np.random.default_rng(seed).choice(pool, size=sample, replace=False))
        todo = np.union1d(np.flatnonzero(tied), pool).astype(int)
    raw: dict[int, str] = {}
    red: dict[int, str] = {}
    findings: dict[int, list] = {}
    for i in todo:
        eid = plan.example_ids[i]
        ex = by_id.get(eid)
        if ex is None:
            raise InputError(f"{out / 'plan'}: example {eid!r} is not in the corpus; re-run `repoguard plan`")
        text, r, fs = redactor(ex)       # the whole file is scanned: a key cut by a chunk boundary too
        raw[int(i)], red[int(i)] = text, r
        findings[int(i)] = [f for f in fs if f.end > f.start]
    has_cred = np.zeros(n, dtype=bool)
    has_cred[[i for i, fs in findings.items() if fs]] = True
    must = np.flatnonzero(tied | has_cred)
    rest = np.setdiff1d(todo, must)
    rows = np.union1d(must, rest).astype(int)

    tok = run.tokenizer
    seqs = tokenize([red[i] for i in rows], tok, max_length=cfg.max_length)
    windows: list[Window] = []
    for i, seq in zip(rows, seqs):
        secrets = [inc.secrets[j].id for j in csr.indices[csr.indptr[i]:csr.indptr[i + 1]]]
        w = trained_window(seq, k=k2, m=m2)
        if w is not None:
            windows.append(Window(int(i), w[0], w[1], "trained", None, secrets))
        if findings[i]:
            for f, ids, start in credential_windows(raw[i], findings[i], tok, max_length=cfg.max_length, m=m2):
                windows.append(Window(int(i), ids, start, "credential", f.rule_id, [credential_secret_id(f)]))
    raw = None        # noqa: F841 — the pre-redaction text is not needed past this point
    if not windows:
        raise InputError(f"{out}: no example has 2 or more tokens to score")

    ids, starts = [w.ids for w in windows], [w.span_start for w in windows]
    pad = tok.pad_token_id
    target = score_windows(run.model, ids, starts, samplers, pad_id=pad, batch_size=batch_size, label="risk: run")
    with run.model.disable_adapter():     # θ₀: the frozen base the run started from
        calib = score_windows(run.model, ids, starts, samplers, pad_id=pad, batch_size=batch_size,
                              want_logp=False, label="risk: calibration")
    n_span = np.array([len(w.ids) - w.span_start for w in windows])
    score = risk_scores(target.logp, n_span, target.loss, calib.loss)
    order = np.argsort(-np.nan_to_num(score, nan=-np.inf, neginf=-1e300), kind="stable")
    rank = np.empty(len(windows), dtype=int)
    rank[order] = np.arange(1, len(windows) + 1)

    names = [s.name for s in samplers]

    def row_json(q: int) -> dict:
        w = windows[q]
        ex = by_id[plan.example_ids[w.row]]
        lp = target.logp[q]
        best = float(np.max(lp))
        return {"rank": int(rank[q]), "window_index": int(q), "example": ex.id, "path": ex.path, "start_line": ex.start_line,
                "window": w.kind, "rule": w.rule, "secrets": w.secrets, "rho": float(plan.rho[w.row]),
                "n_context": int(w.span_start), "n_span": int(n_span[q]),
                "log_prob": {nm: _num(float(v)) for nm, v in zip(names, lp)},
                "log10_prob_best": _num(best / math.log(10)),
                "loss": float(target.loss[q]), "loss_calibration": float(calib.loss[q]),
                "calibrated_loss": float(target.loss[q] - calib.loss[q]), "score": _num(float(score[q])),
                "prefix": _prefix(red[w.row])}

    groups: dict[str, list[int]] = {}
    for q in order:
        for s in windows[q].secrets or [PUBLIC]:
            groups.setdefault(s, []).append(int(q))
    kinds = {s.id: s.kind for s in inc.secrets}
    tables = []
    for sid, qs in groups.items():
        sc = score[qs]
        fin = sc[np.isfinite(sc)]
        tables.append({"secret": sid, "kind": kinds.get(sid, "credential" if sid.startswith("credential:") else "none"),
                       "n_windows": len(qs), "n_examples": len({windows[q].row for q in qs}),
                       "worst_score": _num(float(sc[0])), "median_score": _num(float(np.median(fin))) if fin.size else None,
                       "top_ranks": [int(rank[q]) for q in qs[:per_secret]],
                       "rows": [row_json(q) for q in qs[:per_secret]]})
    tables.sort(key=lambda t: (t["secret"] == PUBLIC, -(t["worst_score"] if t["worst_score"] is not None else -1e300)))

    points = _points(windows, target.logp, target.loss - calib.loss, seed=seed)
    doc = {
        "format_version": FORMAT_VERSION, "run": str(run_dir), "private": run.private,
        "sigma": run.report.get("sigma"), "steps_completed": run.report.get("steps_completed"),
        "calibration": {"model": "base model of the run, adapter disabled", "path": run.base,
                        "never_trained_on": "every scored example (the base is frozen; LoRA holds the run's updates)"},
        "k": k2, "m": m2, "note": note, "max_length": cfg.max_length,
        "samplers": [{"name": s.name, "temperature": s.temperature, "top_k": s.top_k} for s in samplers],
        "score": "max_S log P_S(span|context)/|span| − (ℓ(θ,z) − ℓ(θ₀,z)), nats/token; higher = more at risk",
        "n_examples": n, "n_scored_examples": int(len({w.row for w in windows})), "n_windows": len(windows),
        "n_tied": int(tied.sum()), "n_credential_examples": int(has_cred.sum()),
        "n_credential_windows": int(sum(w.kind == "credential" for w in windows)),
        # with a sample: the draw among untied examples (a drawn one holding a credential is
        # scored with its credential windows) out of all untied ones, none of them scanned
        "sample": {"untied_scored": int(rest.size) if sample is None else int(pool.size),
                   "untied_total": int((~(tied | has_cred)).sum()) if sample is None else int((~tied).sum()),
                   "seed": seed if sample is not None else None},
        "top": [row_json(int(q)) for q in order[:per_secret]],
        "secrets": tables, "points": points,
    }
    dest = Path(dest) if dest else Path(out) / "audit" / "risk.json"
    buf = io.BytesIO()
    np.savez_compressed(buf, plan_row=np.array([w.row for w in windows], dtype=np.int64),
                        credential=np.array([w.kind == "credential" for w in windows]),
                        log_prob=target.logp, samplers=np.array(names), n_span=n_span, loss=target.loss,
                        loss_calibration=calib.loss, score=score, rank=rank)
    atomic_write_bytes(dest.with_suffix(".npz"), buf.getvalue())
    atomic_write_json(dest, doc)
    return doc


def _check_run(run, plan) -> None:
    """The run's privacy report must describe this plan (B, T, C)."""
    rep = run.report
    if not rep:
        return
    for key, val in (("batch_size", plan.batch_size), ("steps", plan.steps), ("clip_norm", plan.clip_norm)):
        if key in rep and not math.isclose(float(rep[key]), float(val), rel_tol=1e-9):
            raise InputError(f"{run.run_dir / 'privacy_report.json'}: {key} = {rep[key]} but the plan has {val}; "
                             "the run was not trained on this plan")


def _points(windows: list[Window], logp: np.ndarray, dloss: np.ndarray, *, seed: int) -> list[dict]:
    """Scatter points (calibrated loss, log10 P of the best sampler), at most MAX_POINTS: every
    tied or credential window first, then a seeded sample of the others."""
    best = np.max(logp, axis=1) / math.log(10)
    key = [bool(w.secrets) or w.kind == "credential" for w in windows]
    pri = [q for q in range(len(windows)) if key[q]]
    oth = [q for q in range(len(windows)) if not key[q]]
    room = max(0, MAX_POINTS - len(pri))
    if len(oth) > room:
        oth = sorted(np.random.default_rng(seed).choice(oth, size=room, replace=False).tolist())
    return [{"x": float(dloss[q]), "y": _num(float(best[q])), "tied": key[q],
             "credential": windows[q].kind == "credential"} for q in (pri + oth)[:MAX_POINTS]]


def table_lines(doc: dict, *, rows: int = 5, secrets: int = 20) -> list[str]:
    """Plain-text table per secret (worst windows first) for the command's output."""
    lines = [f"{'rank':>5} {'score':>7} {'log10 P':>8} {'Δloss':>7}  {'example (redacted prefix)'}"]
    for t in doc["secrets"][:secrets]:
        lines.append(f"{t['secret']}  ({t['n_examples']} examples, {t['n_windows']} windows)")
        for r in t["rows"][:rows]:
            what = f"<REDACTED:{r['rule']}> in " if r["window"] == "credential" else ""
            lines.append(f"{r['rank']:>5} {_f(r['score'], '7.3f')} {_f(r['log10_prob_best'], '8.2f')} "
                         f"{r['calibrated_loss']:7.3f}  {what}{r['path']}:{r['start_line']}  {r['prefix']}")
    return lines


def _f(x, fmt: str) -> str:
    return format(x, fmt) if x is not None else format("-inf", ">" + fmt.split(".")[0])
