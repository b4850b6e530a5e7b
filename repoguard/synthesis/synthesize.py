"""The stage behind `repoguard synth`: OUT/incidence/ + corpus → OUT/synth/.

Order of work, each step seeing only what it may:
1. SecretNoise (`noise.py`): weights, ρ and σ per round against the ledger's spending; with the
   undetected-secret floor on (the default) untied examples get ρ_u and the floor is calibrated
   as one more secret;
2. anchors: by default from the generator's own initial samples (`rounds.initial_samples`,
   data-independent); with `--undetected off` (the paper's mode) from the public (untied)
   examples in the clear (`anchors.py`);
3. texts of the counted examples (tied; untied too by default; never held-out ones), credentials
   redacted on the whole file before anything is embedded;
4. the T releases of SecretClustering (`clustering.py`), with secret randomness (OS entropy;
   `insecure_reproducible` derives it from `seed`, tests only);
5. the ledger entry (like a training run: `accounting.ledger.record_run`, with the floor's
   account when it is on, and — floor off only — the public ids used in the clear recorded as
   the run's clear examples, `clear_exposures.py`), appended *before* anything is published;
6. the rounds (`rounds.run_rounds`) from the releases (and the generator's own samples) alone,
   every synthetic text redacted again (the generator could produce a credential-shaped string
   of its own), then OUT/synth/ atomically.

OUT/synth/ (format version 1):
    synthetic.jsonl  {"text", "round", "score", "affinity"} per example, best first
    summary.json     run id, ledger head, σ per round, noise std, ρ summary, per-secret bounds
                     composed over the rounds (and the ledger), timings, voting cost; no example
                     ids, no generator or noise state.
"""
from __future__ import annotations

import json
import logging
import secrets as _secrets
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from repoguard.core.errors import InputError

log = logging.getLogger("repoguard")

FORMAT = 1


@dataclass
class SynthOptions:
    """`n` N_syn, `rounds` T, `variations` L, `clusters` K; `c` the LP scale (0 = sweep);
    `model` a local checkpoint (empty: the embedded base); `generator_url` an OpenAI-compatible
    server (then `model` only embeds); `embedder` a local embedding checkpoint (empty: `model`'s
    mean-pooled hidden states); `prompt` public text every local sample starts from (after BOS;
    e.g. "```python" for an instruction-tuned base, `generators.LocalLM`); `seed` seeds the
    public randomness (K-means, generator) and, only with `insecure_reproducible`, the private inclusions and noise too."""

    n: int = 32
    rounds: int = 3
    variations: int = 2
    clusters: int = 16
    c: float = 0.0
    model: str = ""
    generator_url: str = ""
    generator_model: str = "default"
    embedder: str = ""
    max_length: int = 256
    max_new_tokens: int = 96
    temperature: float = 1.0
    prompt: str = ""
    seed: int = 0
    insecure_reproducible: bool = False
    show_progress: bool = True
    undetected: str | None = None      # `--undetected` (None: [defaults] undetected); "off": the paper's mode

    def check(self) -> None:
        """Raises InputError naming the flag when N, T, K, `max_length` or `max_new_tokens` is < 1, L < 0
        or the temperature is not > 0."""
        for name in ("n", "rounds", "clusters", "max_length", "max_new_tokens"):
            if getattr(self, name) < 1:
                raise InputError(f"--{name.replace('_', '-')}: must be ≥ 1, not {getattr(self, name)}")
        if self.variations < 0:
            raise InputError(f"--variations: must be ≥ 0, not {self.variations}")
        if not self.temperature > 0:
            raise InputError(f"--temperature: must be > 0, not {self.temperature}")


def backends(opts: SynthOptions):
    """(generator, embedder) for `opts`."""
    from repoguard.synthesis.embedding import MeanPooled, load_embedder
    from repoguard.synthesis.generators import HTTPGenerator, LocalLM
    from repoguard.training.base_model import embedded_base
    from repoguard.training.model import limit_cpu_threads, load_model

    import torch

    cpu = torch.device("cpu")
    # One intra-op thread, as train and compare use: on 2 shared cores SmolLM2-135M's sampling
    # took 17× the CPU with torch's default two threads (8 samples × 32 tokens: 60.7 s against
    # 3.5 s at load ~14; issue 44).
    limit_cpu_threads(cpu)
    if opts.model:
        model, tok = load_model(opts.model, device=cpu, bf16=False)
    else:
        model, tok = embedded_base(max_length=opts.max_length + opts.max_new_tokens, device=cpu,
                                   show_progress=opts.show_progress)
    if opts.generator_url:
        gen = HTTPGenerator(opts.generator_url, model=opts.generator_model, max_tokens=opts.max_new_tokens,
                            temperature=opts.temperature, prompt=opts.prompt)
    else:
        gen = LocalLM(model, tok, max_new_tokens=opts.max_new_tokens, temperature=opts.temperature,
                      name=opts.model or "embedded-base", prompt=opts.prompt)
    emb = load_embedder(opts.embedder, max_length=opts.max_length) if opts.embedder else \
        MeanPooled(model, tok, max_length=opts.max_length)
    return gen, emb


def _rngs(opts: SynthOptions) -> tuple[np.random.Generator, str]:
    """The private generator (inclusions and noise) and the randomness mode."""
    from repoguard.training.randomness import INSECURE, INSECURE_WARNING, NOISE_OFFSET, SECURE

    if opts.insecure_reproducible:
        log.warning(INSECURE_WARNING.replace("Poisson batches", "inclusions").replace("adapter", "synthetic corpus"))
        return np.random.default_rng(opts.seed + NOISE_OFFSET), INSECURE
    return np.random.default_rng(_secrets.randbits(128)), SECURE


@dataclass
class Release:
    """What SecretNoise and SecretClustering hand to the rounds: `noise` (`noise.NoisePlan`),
    the `anchors`, the T releases `stats`, the randomness `mode`, the backends used, the
    redactor, `n_private` tied and `n_untied` untied examples counted through the noise,
    `n_public` untied examples used in the clear (floor off), `initial` / `initial_emb` the
    generator's round-0 samples and their embeddings (default mode: they built the anchors),
    `floor` the undetected floor's record, `timings`."""

    noise: object
    anchors: object
    stats: list
    mode: str
    generator: object
    embedder: object
    redactor: object
    n_private: int
    timings: dict
    n_untied: int = 0
    n_public: int = 0
    initial: list | None = None
    initial_emb: object = None
    floor: dict | None = None


def release_for(inc, test, corpus, redactor, *, opts: SynthOptions, accountant: str, adjacency: str, c: float,
                spent, generator=None, embedder=None, floor=None) -> Release:
    """SecPE Alg. 1–2 for incidence `inc` (held-out mask `test`): σ per round against the
    ledger's spending `spent` (`accounting.spending.Spent`), the anchors and the T noisy
    releases. Texts are read from `corpus` and redacted by `redactor` before they are embedded;
    held-out rows are never read. Records nothing.

    `floor` (a `config.Undetected`; None = off). Enabled (the default of `synthesize`): the
    anchors come from the generator's own initial samples (data-independent), every training
    example — untied ones at ρ_u, `noise.UNTIED_RHO` — enters only through the releases, and σ
    meets the floor with the declared targets (`noise.secret_noise`). Off: the paper's mode,
    public (untied) examples build the anchors in the clear. Raises InputError (no public example
    with the floor off) and PolicyError (a target or the floor is out of reach)."""
    from repoguard.synthesis.anchors import generated_anchors, public_anchors
    from repoguard.synthesis.clustering import release_rounds
    from repoguard.synthesis.noise import secret_noise
    from repoguard.synthesis.rounds import initial_samples
    from repoguard.training.data import example_texts

    enforce = floor is not None and floor.enabled
    timings = {}
    t0 = time.perf_counter()
    noise = secret_noise(inc, test, rounds=opts.rounds, c=c, accountant=accountant, adjacency=adjacency,
                         spent=spent, floor=floor)
    timings["calibrate_s"] = time.perf_counter() - t0
    if not enforce and not noise.public.any():
        raise InputError("synth --undetected off: every training example is tied to a secret; the public "
                         "anchors need untied examples")
    if generator is None or embedder is None:
        g, e = backends(opts)
        generator, embedder = generator or g, embedder or e
    ids = np.asarray(inc.example_ids, dtype=object)
    counted = np.flatnonzero(noise.rho > 0)            # tied (ρ > 0) and, with the floor, untied
    initial = initial_emb = None
    t0 = time.perf_counter()
    if enforce:
        initial = initial_samples(generator, n=opts.n, variations=opts.variations, seed=opts.seed)
        initial_emb = embedder.embed(initial)
        anchors = generated_anchors(initial_emb, opts.clusters, rng=np.random.default_rng(opts.seed))
        n_public = 0
    else:
        pub_rows = np.flatnonzero(noise.public)
        pub_emb = embedder.embed(example_texts(corpus, list(ids[pub_rows]), redactor=redactor))
        anchors = public_anchors(pub_emb, opts.clusters, rng=np.random.default_rng(opts.seed))
        n_public = len(pub_rows)
    timings["anchors_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    priv_emb = embedder.embed(example_texts(corpus, list(ids[counted]), redactor=redactor))
    timings["embed_corpus_s"] = time.perf_counter() - t0
    rng, mode = _rngs(opts)
    stats = release_rounds(anchors, priv_emb, noise.rho[counted], noise.noise_std, opts.rounds, rng=rng)
    del priv_emb, rng                                  # nothing private leaves but `stats`
    n_untied = int(np.sum(noise.public[counted]))
    return Release(noise, anchors, stats, mode, generator, embedder, redactor, len(counted) - n_untied, timings,
                   n_untied=n_untied, n_public=n_public, initial=initial, initial_emb=initial_emb, floor=noise.floor)


def synthesize(*, root: Path, out: Path, config, opts: SynthOptions, generator=None, embedder=None) -> dict:
    """Run SecPE on the analysed repository at `root` (artefacts in `out`); returns the summary
    (also written to OUT/synth/summary.json). `generator`/`embedder` override `opts`' backends
    (tests). Raises InputError (bad options, missing artefacts, no public example) and
    PolicyError (the ledger leaves no σ that meets some target, or it fails verification)."""
    from repoguard.accounting.ledger import read_spent, verify
    from repoguard.accounting.published import check_published
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.source.corpus import load_corpus
    from repoguard.source.split import split_from_config
    from repoguard.training.data import default_redactor

    from repoguard.planning.undetected import resolve

    opts.check()
    und = resolve(config, opts.undetected)
    t_start = time.perf_counter()
    timings: dict = {}
    inc = load_incidence(out)
    pc = config.plan
    split = split_from_config(inc.example_ids, pc)
    ledger_path = out / "ledger.jsonl"
    check_published(out, ledger_path)                 # a deleted ledger never resets the budget
    head = verify(ledger_path).get("last_hash") or "0" * 64
    spent = read_spent(ledger_path, floor_account=und.account if und.enabled else None)
    rel = release_for(inc, split.test, load_corpus(out, root), default_redactor(out, root), opts=opts,
                      accountant=pc.accountant, adjacency=pc.adjacency, c=opts.c if opts.c > 0 else pc.c,
                      spent=spent, generator=generator, embedder=embedder, floor=und)
    noise, anchors, stats, mode = rel.noise, rel.anchors, rel.stats, rel.mode
    generator, embedder, redactor = rel.generator, rel.embedder, rel.redactor
    timings.update(rel.timings)
    ids = np.asarray(inc.example_ids, dtype=object)
    clear_rows = np.flatnonzero(noise.clear)          # none with the floor on
    run_id = f"synth-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{_secrets.token_hex(4)}"
    plan = ledger_plan(inc, split, noise)
    from repoguard.accounting.ledger import record_run

    entry = record_run(ledger_path, plan, run_id=run_id, steps_completed=plan.steps, status="completed",
                       randomness=mode, clear_example_ids=list(ids[clear_rows]), base_head=head)
    from repoguard.synthesis.rounds import run_rounds, voting_cost

    t0 = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if opts.show_progress:
            log.info("synth: round %d/%d done (%.1f s)", done, total, time.perf_counter() - t0)

    res = run_rounds(stats, generator, embedder, n=opts.n, variations=opts.variations, seed=opts.seed,
                     progress=progress, initial=rel.initial, initial_embeddings=rel.initial_emb)
    timings["rounds_s"] = time.perf_counter() - t0
    rows, redacted = [], 0
    for c in res.kept:
        text, found = redactor(c.text, "synthetic.py")
        redacted += len(found)
        rows.append({"text": text, "round": c.round, "score": c.score, "affinity": c.affinity})
    dim = int(anchors.centres.shape[1])
    m = int(noise.public.sum() + noise.private.sum())
    cost = voting_cost(anchors.k, m, max(res.population), dim, rng=np.random.default_rng(0))
    timings["total_s"] = time.perf_counter() - t_start
    summary = _summary(plan, noise, inc, opts, run_id=run_id, ledger_head=entry["hash"], mode=mode, anchors=anchors,
                       rel=rel, res=res, timings=timings, cost=cost, generator=generator, redacted=redacted,
                       n_out=len(rows))
    _write(out / "synth", rows, summary)
    return summary


def ledger_plan(inc, split, noise):
    """The synthesis as a `planning.plan.Plan` for `record_run`: σ the noise multiplier, T the
    rounds, C = R, B = Σρ (expected private contributions per round), the per-secret divergences
    and pairs of the calibration."""
    import math

    from repoguard.accounting.pld import pair_record
    from repoguard.planning.plan import Plan, SecretPlan
    from repoguard.synthesis.noise import RADIUS

    cal = noise.cal
    ev = cal.evals
    csc = inc.matrix.tocsc()
    secrets = []
    for j, s in enumerate(inc.secrets):
        rows = csc.indices[csc.indptr[j]:csc.indptr[j + 1]]
        mix, a, t = cal.pairs[j]
        ren = {f"{al:g}": float(v) for al, v in zip(cal.alphas, ev.renyi[j]) if math.isfinite(v)}
        secrets.append(SecretPlan(id=s.id, p=s.p, r=s.r, achieved_bound=float(ev.bound[j]), binding=ev.binding[j],
                                  kl_spent=float(ev.kl[j]), renyi_spent=ren, n_examples=int(rows.size),
                                  sum_w=float(noise.w[rows].sum()),
                                  pair=pair_record(mix, a, t) if mix is not None and mix.n > 0 else None))
    extra = {"synthesis": True, "holdout": split.record()}
    if noise.floor is not None:         # the floor's account (`@undetected:k=…`) is spent like a secret
        extra["undetected_floor"] = noise.floor
    plan = Plan(sigma=noise.sigma, batch_size=max(float(noise.rho.sum()), 1e-9), steps=noise.rounds,
                clip_norm=RADIUS, c=noise.c, cap="gdp", accountant=noise.accountant, adjacency=noise.adjacency,
                example_ids=list(inc.example_ids), w=noise.w, rho=noise.rho, secrets=secrets,
                extra=extra, test=np.asarray(split.test, dtype=bool))
    plan.check()
    return plan


GUARANTEE_FLOOR = ("every declared secret's reconstruction bound, composed over the rounds and the ledger's "
                   "earlier runs, is <= its r, and so is the undetected-secret floor's (a secret nobody declared "
                   "or detected, in k untied examples); the anchors come from the generator's own samples and "
                   "every training example, untied ones included, reaches the corpus only through the noisy "
                   "statistics; held-out examples never enter")
GUARANTEE_OFF = ("UNDETECTED FLOOR OFF (opt-out): every declared secret's reconstruction bound, composed over the "
                 "rounds and the ledger's earlier runs, is <= its r; untied examples build the anchors in the clear "
                 "and carry no guarantee; held-out examples never enter")


def _summary(plan, noise, inc, opts, *, run_id, ledger_head, mode, anchors, rel, res, timings,
             cost, generator, redacted, n_out) -> dict:
    from repoguard.synthesis.noise import RADIUS, SENSITIVITY

    rounds = [{"round": t["round"], "sigma": noise.sigma, "noise_std": noise.noise_std,
               "population": p, **{k: v for k, v in t.items() if k != "round"}}
              for t, p in zip(res.timings, res.population)]
    return {
        "format_version": FORMAT, "private": True, "run_id": run_id, "ledger_head": ledger_head,
        "randomness": mode, "method": "SecPE (Alg. 1-3, Thm. 2)",
        "n": opts.n, "rounds": opts.rounds, "variations": opts.variations, "clusters": anchors.k,
        "examples_written": n_out, "credentials_redacted_in_output": redacted,
        "sigma": noise.sigma, "noise_std": noise.noise_std, "sensitivity": SENSITIVITY, "radius": RADIUS,
        "sigma_per_round": [noise.sigma] * noise.rounds,
        "c": noise.c, "cap": "gdp", "accountant": noise.accountant, "adjacency": noise.adjacency,
        "c_sweep": noise.sweep, "lp": noise.lp,
        "anchors": "generated" if rel.initial is not None else "public (in the clear)",
        "inputs": {"public_examples": rel.n_public, "private_examples_counted": rel.n_private,
                   "untied_examples_counted": rel.n_untied, "untied_rho": noise.rho_u,
                   "expected_counted_per_round": float(noise.rho.sum()),   # Σρ: tied + untied (floor on)
                   "held_out_examples": int(plan.test_mask.sum())},
        "secrets": [{"id": s.id, "p": s.p, "r": s.r, "bound": s.achieved_bound, "binding": s.binding,
                     "kl_this_run": s.kl_spent, "n_examples": s.n_examples, "sum_w": s.sum_w}
                    for s in plan.secrets],
        "guarantee": GUARANTEE_FLOOR if rel.initial is not None else GUARANTEE_OFF,
        "undetected_floor": noise.floor,
        "generator": generator.describe(),
        "timings": timings, "per_round": rounds, "voting_cost": cost,
    }


def _json_safe(obj):
    """Non-finite floats → None (JSON has no NaN/inf)."""
    import math

    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def _write(target: Path, rows: list[dict], summary: dict) -> None:
    from repoguard.core.artefacts import atomic_dir

    with atomic_dir(target) as tmp:
        with open(tmp / "synthetic.jsonl", "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        (tmp / "summary.json").write_text(json.dumps(_json_safe(summary), indent=2, sort_keys=True) + "\n",
                                          encoding="utf-8")
