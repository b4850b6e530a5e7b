"""Shared set-up of the audit tests: the fixture monorepo's corpus, a test secret, a plan, and one
DP / --no-dp pair trained with a canary planted (built once per pytest process, ~20 s on CPU).

The test secret `canary-test` covers trading/alpha/, services/risk/ and libs/pricing/ (22
examples) with prior p = 16^-10 (a uniformly random 10-hex-digit canary) and target r = 1e-9.
c = 2^40 keeps every example at w = 1, so each has ρ = B/n (the canary is seen ~T·Σρ ≈ 109
times); σ is calibrated by the real accountant. The canary pair trains what `repoguard audit
canaries` trains by default: the embedded base pretrained on the standard library
(`training.base_model`, cached once per test session) with LoRA on the detected q, v.
`training_config()` adapts lm_head too: the risk test's base, pretrained on a few fixture files
for 300 steps, cannot memorise the canary within 200 steps at lr 1e-2 through q, v alone.
"""
from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

SECRET = "canary-test"
PRIOR = 16.0 ** -10
TARGET = 1e-9
PREFIXES = ("trading/alpha/", "services/risk/", "libs/pricing/")
N_REFERENCES = 2000            # the command's default is 10^4; 2000 keeps the test fast

_CACHE: dict = {}


def tiny_size():
    from repoguard.training.model import TinyConfig

    return TinyConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, max_position=64)


def training_config():
    from repoguard.config import TrainingConfig

    return TrainingConfig(max_length=32, lora_r=8, lora_alpha=16, learning_rate=3e-2, micro_batch_size=32,
                          lora_targets=("q_proj", "v_proj", "lm_head"))


@contextlib.contextmanager
def one_thread():
    """Torch on one thread: on a shared 2-core runner, more threads are several times slower."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def prepare_out(repo_root: Path, out: Path, *, steps: int = 200, batch_size: float = 8.0, exclude: tuple = ()):
    """corpus + incidence (the test secret, declared evidence) + calibrated plan in `out`
    (`exclude`: paths left out of the corpus)."""
    from repoguard.corpus import build_corpus, save_corpus
    from repoguard.gitrepo import GitRepo
    from repoguard.incidence import Evidence, Secret, build_incidence, save_incidence
    from repoguard.plan import build_plan, save_plan

    from repoguard.config import CorpusConfig

    corpus = build_corpus(GitRepo(repo_root), CorpusConfig(exclude=tuple(exclude)))
    save_corpus(corpus, out)
    sec = Secret(SECRET, "declared", PRIOR, TARGET, "test secret carrying the canary")
    ev = [Evidence(p, SECRET, "declared", f"matches {p.split('/')[0]}/** in the test config")
          for p in corpus.file_examples if p.startswith(PREFIXES)]
    inc = build_incidence([e.id for e in corpus.examples], corpus.file_examples, [sec], ev)
    save_incidence(inc, out)
    plan = build_plan(inc, batch_size=batch_size, steps=steps, clip_norm=1.0, c=2.0 ** 40)
    save_plan(plan, out)
    return plan, inc


def canary_pair(repo_root: Path, tmp_root: Path):
    """(out, doc, runs): the canary audit on the fixture, run once per process."""
    if "pair" not in _CACHE:
        from repoguard.audit.canaries import run_canary_audit

        out = tmp_root / "out"
        plan, inc = prepare_out(repo_root, out)
        n = int((plan.rho[inc.examples_of(SECRET)] > 0).sum())
        with one_thread():
            cfg = dataclasses.replace(training_config(), lora_targets=())     # the command's default
            doc, runs = run_canary_audit(out=out, root=repo_root, cfg=cfg, secret_id=SECRET,
                                         n_insert=n, n_references=N_REFERENCES, seed=0, noise_seed=1,
                                         device="cpu", return_runs=True)
        _CACHE["pair"] = (out, doc, runs)
    return _CACHE["pair"]


def pretrained_public_base(public: list[str], dest: Path, *, steps: int = 300, max_length: int = 32, seed: int = 0) -> Path:
    """A tiny Llama pretrained (all weights, plain AdamW, no DP: public text only) on `public`,
    saved as a local Hugging Face checkpoint in `dest` — the stand-in for a real use's base model,
    which knows public code (licence headers, idioms) but has never seen a secret's examples."""
    import numpy as np
    import torch

    from repoguard.training.data import collate, per_example_loss, tokenize
    from repoguard.training.model import TinyConfig, build_tiny_model, save_base_model

    size = tiny_size()
    model, tok = build_tiny_model(public, seed=seed, size=TinyConfig(**{**size.__dict__, "max_position": max(64, max_length)}))
    seqs = [s for s in tokenize(public, tok, max_length=max_length) if len(s) >= 2]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    rng = np.random.default_rng(seed)
    model.train()
    with one_thread():
        for _ in range(steps):
            b = collate([seqs[i] for i in rng.choice(len(seqs), size=16)], pad_id=tok.pad_token_id)
            loss = per_example_loss(model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits,
                                    b["labels"]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    save_base_model(model.eval(), tok, dest)
    return dest
