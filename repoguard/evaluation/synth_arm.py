"""`compare`'s opt-in `synth` arm: a SecPE corpus at the same declared targets, floor and ledger
snapshot as the other arms, the base fine-tuned on it without noise, scored on the same held-out
rows (issue 29). `ctx` is `compare._Ctx`."""
from __future__ import annotations

import copy
import time
import weakref
from pathlib import Path

SYNTH_ARM = {"n": 32, "rounds": 3, "variations": 2, "clusters": 16}   # the synth arm's default SecPE settings
SYNTH_FLAGS = {"n": "--synth-n", "rounds": "--synth-rounds", "variations": "--synth-variations",
               "clusters": "--synth-clusters"}          # `compare`'s flag for each setting


def synth_settings(values: dict | None = None) -> dict:
    """The synth arm's SecPE settings: `SYNTH_ARM` with `values` ({"n", "rounds", "variations",
    "clusters"} → int, or a string as typed on the command line; None entries keep the default),
    plus "prompt" (`--synth-prompt`: the generator's public start text, `generators.LocalLM`)
    when one is given (absent when empty, so a run without one keys as before).
    Raises InputError, one line naming the `compare` flag, for an unknown setting or a value that
    is not a positive integer (strings like "1.5", "x", "0", "-2"; floats; booleans)."""
    from repoguard.core.errors import InputError

    out = dict(SYNTH_ARM)
    for name, value in (values or {}).items():
        if name == "prompt":
            if value is not None and not isinstance(value, str):
                raise InputError(f"--synth-prompt: must be text, not {value!r}")
            if value:
                out["prompt"] = value
            continue
        if name not in SYNTH_ARM:
            raise InputError(f"synth arm: unknown setting {name!r} (known: {', '.join(SYNTH_ARM)}, prompt)")
        if value is None:
            continue
        flag = SYNTH_FLAGS[name]
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise InputError(f"{flag}: must be a positive integer, not {value!r}")
        if isinstance(value, str):
            try:
                value = int(value.strip(), 10)
            except ValueError:
                raise InputError(f"{flag}: must be a positive integer, not {value!r}") from None
        if value < 1:
            raise InputError(f"{flag}: must be a positive integer (≥ 1), not {value}")
        out[name] = int(value)
    return out


# One memoised embedder per base model, so `compare --repeats` embeds the counted examples once
# (they and the base are the same every repeat; only the release's randomness changes).
_EMBEDDERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _embedder(base, tok, max_length: int):
    """The memoised mean-pooled embedder of `base` at `max_length` tokens (`embedding.Memoised`)."""
    from repoguard.synthesis.embedding import MeanPooled, Memoised

    per = _EMBEDDERS.setdefault(base, {})
    if max_length not in per:
        per[max_length] = Memoised(MeanPooled(base, tok, max_length=max_length))
    return per[max_length]


def synth_label(settings: dict) -> str:
    """'N = 32, T = 3, L = 2, K = 16': the settings as the table and the docs write them."""
    return (f"N = {settings['n']}, T = {settings['rounds']}, L = {settings['variations']}, "
            f"K = {settings['clusters']}")


def run_synth_arm(ctx, und, *, arm_dir: Path, t0: float) -> dict:
    """The `synth` arm: a SecPE corpus (`synthesis`, settings `ctx.synth`, default `SYNTH_ARM`; the base model as
    generator and embedder) calibrated to the same declared targets *and floor `und`* against
    the same ledger snapshot, then the base fine-tuned *without noise* on it (LoRA, the same B,
    T, lr), scored on the same held-out rows. Nothing is recorded or published. With the floor
    on, the anchors come from the generator's samples and untied examples enter only through the
    noise (protected, "meets floor"); with it off, the paper's mode: untied examples build the
    anchors in the clear ("declared only")."""
    import secrets as _secrets
    import shutil

    import numpy as np

    from repoguard.evaluation.metrics import Evaluator
    from repoguard.evaluation.periodic import PeriodicEval
    from repoguard.planning.plan import Plan
    from repoguard.synthesis.generators import LocalLM
    from repoguard.synthesis.rounds import run_rounds
    from repoguard.synthesis.synthesize import SynthOptions, release_for
    from repoguard.training.data import tokenize
    from repoguard.training.model import TINY_LORA_TARGETS, apply_lora
    from repoguard.training.randomness import secure_dir
    from repoguard.training.trainer import TrainSettings, train

    cfg, bp = ctx.cfg, ctx.base_plan
    seed = ctx.seed if ctx.seed is not None else _secrets.randbits(32)
    synth = synth_settings(getattr(ctx, "synth", None))
    opts = SynthOptions(**synth, max_length=cfg.max_length, max_new_tokens=min(96, cfg.max_length),
                        seed=seed, insecure_reproducible=ctx.seed is not None, show_progress=False)
    gen = LocalLM(ctx.base, ctx.tok, max_new_tokens=opts.max_new_tokens, prompt=opts.prompt)
    emb = _embedder(ctx.base, ctx.tok, cfg.max_length)
    rel = release_for(ctx.incidence, bp.test_mask, ctx.corpus, ctx.redactor, opts=opts, accountant=bp.accountant,
                      adjacency=bp.adjacency, c=0.0, spent=ctx.snap.as_spent(legacy=und.enabled),
                      generator=gen, embedder=emb, floor=und)
    res = run_rounds(rel.stats, gen, emb, n=opts.n, variations=opts.variations, seed=seed, initial=rel.initial,
                     initial_embeddings=rel.initial_emb)
    rounds_s = [t["total_s"] for t in res.timings]
    texts = [ctx.redactor(c.text, "synthetic.py")[0] for c in res.kept]
    seqs = tokenize(texts, ctx.tok, max_length=cfg.max_length)
    n = len(seqs)
    batch = min(float(bp.batch_size), float(n))
    plan = Plan(sigma=1.0, batch_size=batch, steps=ctx.total, clip_norm=bp.clip_norm, c=0.0, cap=bp.cap,
                accountant=bp.accountant, adjacency=bp.adjacency, example_ids=[f"synthetic#{i}" for i in range(n)],
                w=np.ones(n), rho=np.full(n, batch / n))
    model = apply_lora(copy.deepcopy(ctx.base), r=cfg.lora_r, alpha=cfg.lora_alpha, dropout=cfg.lora_dropout,
                       targets=cfg.lora_targets or (() if cfg.model else TINY_LORA_TARGETS), seed=cfg.seed)
    ev = Evaluator(model, ctx.es, tokenizer=ctx.tok, pad_id=ctx.tok.pad_token_id,
                   micro_batch_size=cfg.micro_batch_size or 8)
    pe = PeriodicEval(ev, every=cfg.eval_every, base=ctx.base_metrics)
    shutil.rmtree(arm_dir, ignore_errors=True)
    secure_dir(arm_dir)
    settings = TrainSettings(lr=cfg.learning_rate, micro_batch_size=cfg.micro_batch_size, checkpoint_every=ctx.total,
                             steps=ctx.total, private=False, seed=seed)
    train(model=model, seqs=seqs, pad_id=ctx.tok.pad_token_id, plan=plan, train_dir=arm_dir, settings=settings,
          ledger=None, publish=False, show_progress=ctx.show_progress, evaluator=pe)
    shutil.rmtree(arm_dir / "checkpoints", ignore_errors=True)
    bounds = [float(b) / s.r for b, s in zip(rel.noise.cal.evals.bound, ctx.incidence.secrets)]
    from repoguard.evaluation.protection import floor_entry

    fr = rel.floor or {}
    floor = (floor_entry(und, rho_u=rel.noise.rho_u, sigma=rel.noise.sigma, sigma_floor=fr.get("sigma_floor"),
                         bound=float(fr.get("achieved_bound", 1.0)), source="certified")
             if und.enabled else
             floor_entry(und, rho_u=0.0, sigma=0.0, sigma_floor=None, bound=1.0, source="clear"))
    return {"sigma": rel.noise.sigma, "private": True, "sum_w_over_n": None,
            "slices": pe.history[-1]["slices"],
            "curve": pe.curve(),
            "bound_ratio_min": min(bounds) if bounds else None, "bound_ratio_max": max(bounds) if bounds else None,
            "undetected_floor": fr.get("bounds") if und.enabled else None,
            "seconds": time.perf_counter() - t0, "steps": ctx.total,
            "eval_rows": ev.es.slice_rows(), "protection": "floor" if und.enabled else "declared",
            "meets_floor": bool(floor["bound"] <= und.r * (1 + 1e-9)) if und.enabled else None, "floor": floor,
            "synthesis": {**synth, "examples": n, "noise_std": rel.noise.noise_std, "c": rel.noise.c,
                          "randomness": rel.mode, "anchors": "generated" if und.enabled else "public (clear)",
                          "untied_rho": rel.noise.rho_u, "untied_counted": rel.n_untied,
                          "tied_counted": rel.n_private, "rounds_s": rounds_s}}
