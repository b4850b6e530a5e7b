"""Lazy sampling: the probability that an attack's decoding regenerates a span, without sampling.

[Stock, Shilov, Mironov, Sablayrolles 2022, "Defending against reconstruction attacks with Rényi
differential privacy", §3.2 "lazy sampling".] An adversary prompts the released model with a
context c and decodes m tokens with a sampler S (plain, temperature, top-k). The chance that it
produces the training span x_1..x_m exactly is the product of the sampler's *renormalised*
conditionals

    P_S(x | c) = Π_t S(x_t | c, x_<t),     S(v | h) = exp(z_v/τ) · 1[v ∈ top_k(z)] / Σ_{u ∈ top_k(z)} exp(z_u/τ)

with z the model's logits at that position, τ the temperature and top_k(z) the k largest logits
(ties with the k-th are kept, as Hugging Face's `TopKLogitsWarper` does: it removes only logits
strictly below the k-th largest). A token outside the top k has probability 0, so the span's
log-probability is −inf. One teacher-forced forward pass gives every conditional at once — no
sampling, hence "lazy": ranking 10^6 examples costs 10^6 forward passes, not 10^6 × 10^5 samples.

Everything here works on token ids and logits; `repoguard.audit.risk` turns examples into them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class Sampler:
    """One attack decoding: temperature τ > 0 and optional top-k (None = the whole vocabulary)."""

    temperature: float = 1.0
    top_k: int | None = None

    def __post_init__(self):
        if not (self.temperature > 0 and math.isfinite(self.temperature)):
            raise ValueError(f"temperature must be a positive number, got {self.temperature}")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"top_k must be ≥ 1, got {self.top_k}")

    @property
    def name(self) -> str:
        """A label for reports: the non-default settings ("temperature 0.8, top-40"), else "plain"."""
        parts = []
        if self.temperature != 1.0:
            parts.append(f"temperature {self.temperature:g}")
        if self.top_k is not None:
            parts.append(f"top-{self.top_k}")
        return ", ".join(parts) or "plain"


def sampler_log_probs(logits, targets, sampler: Sampler):
    """log S(target | position) for each position: logits (..., V) float, targets (...) int64 →
    (...) float32 tensor of log renormalised conditionals, −inf where the target is outside the
    top k [lazy sampling, Stock et al. 2022 §3.2].

    Temperature divides the logits; top-k keeps every logit ≥ the k-th largest (so a top-k set
    is the same before and after the temperature, τ > 0)."""
    import torch

    z = logits.float() / sampler.temperature
    if sampler.top_k is not None and sampler.top_k < z.shape[-1]:
        kth = torch.topk(z, sampler.top_k, dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    logp = torch.log_softmax(z, dim=-1)
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


@dataclass
class Scores:
    """Per scored window: `logp[:, s]` = log P_S(span | context) in nats for sampler s (−inf =
    probability 0), and `loss` = mean next-token cross-entropy over the whole window (nats/token,
    the training loss ℓ(θ, z) of `training.data.per_example_loss`, from the same
    `training.data.token_nll`). Shapes (n, S) and (n,)."""

    logp: np.ndarray
    loss: np.ndarray


def score_windows(model, windows: Sequence[np.ndarray], span_starts: Sequence[int], samplers: Sequence[Sampler], *,
                  pad_id: int, batch_size: int = 16, want_logp: bool = True, label: str = "score") -> Scores:
    """Teacher-forced scores of token windows under `model` (batched, right-padded).

    Args:
        windows: int64 token arrays (BOS first when the tokenizer has one), each ≥ 2 tokens.
        span_starts: index in each window of the span's first token (1 ≤ start < len); the span
            runs to the end of the window and everything before it is the context.
        samplers: the attack decodings (`want_logp=False` skips them: the calibration model only
            needs the loss).
    Returns `Scores`. Raises ValueError for a window shorter than 2 or a start outside [1, len)."""
    import torch

    from repoguard.training.scoring import evaluating, teacher_forced

    n = len(windows)
    for w, s in zip(windows, span_starts):
        if len(w) < 2 or not 1 <= s < len(w):
            raise ValueError(f"span start {s} outside [1, {len(w)}) of a window")
    logp = np.zeros((n, len(samplers)), dtype=np.float64)
    loss = np.zeros(n, dtype=np.float64)
    with evaluating(model):
        for b in teacher_forced(model, windows, pad_id=pad_id, batch_size=batch_size, label=label):
            idx = b.rows
            loss[idx] = (b.nll.sum(1) / b.valid.sum(1).clamp(min=1)).double().cpu().numpy()
            if want_logp and samplers:
                # target position p predicts token p + 1: the span [s, len) is targets [s-1, len-1)
                starts = torch.tensor([span_starts[i] - 1 for i in idx], device=b.valid.device)
                pos = torch.arange(b.valid.shape[1], device=b.valid.device)
                in_span = b.valid & (pos[None, :] >= starts[:, None])
                for j, smp in enumerate(samplers):
                    lp = sampler_log_probs(b.logits, b.targets, smp).double()
                    lp = torch.where(in_span, lp, torch.zeros_like(lp))
                    logp[idx, j] = lp.sum(1).cpu().numpy()
    return Scores(logp=logp, loss=loss)
