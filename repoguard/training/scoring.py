"""Teacher-forced scoring of token sequences under a causal LM, batched without gradients.

The forward pass that held-out metrics (`evaluation.metrics`), canary log-perplexity
(`audit.scoring`) and the at-risk ranking (`audit.lazy`) share: sequences sorted by length,
right-padded by `training.data.collate`, and the per-token loss of `training.data.token_nll` — the
one definition of the next-token cross-entropy, also behind the trainer's `per_example_loss`. Each
consumer only reduces it differently (token sums, a sum in bits, a window mean).
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np


@dataclass
class Scored:
    """One batch of `teacher_forced`: `rows` (b,) indices into the scored sequences; `logits`
    (b, L-1, V) float32, the predictions for positions 1..L-1; `targets` (b, L-1) int64, the next
    tokens with padding replaced by 0 (safe to gather, mask with `valid`); `valid` (b, L-1) bool;
    `nll` (b, L-1) float32 nats/token, 0 at padding (`training.data.token_nll`). Tensors on the
    model's device."""

    rows: np.ndarray
    logits: object
    targets: object
    valid: object
    nll: object


@contextmanager
def evaluating(model):
    """Eval mode and no gradient for the block; the model's training flag is restored after."""
    import torch

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        model.train(was_training)


def teacher_forced(model, seqs: Sequence[np.ndarray], *, pad_id: int, batch_size: int,
                   label: str | None = None) -> Iterator[Scored]:
    """Batched teacher-forced forward passes over token sequences, shortest first (similar lengths
    share a batch, so little padding), right-padded with `pad_id`.

    Args:
        seqs: int token arrays (BOS first when the tokenizer has one), any lengths ≥ 1.
        batch_size: sequences per forward pass.
        label: a progress-bar label (None: no bar).
    Yields `Scored` per batch; every sequence's row appears once. Call inside `evaluating(model)`
    (or `torch.no_grad()`) unless gradients are wanted."""
    from repoguard.core.progress import progress
    from repoguard.training.data import collate, token_nll

    device = next(model.parameters()).device
    order = np.argsort([len(s) for s in seqs], kind="stable")
    bar = progress(label, total=len(order)) if label else nullcontext(lambda n=1: None)
    with bar as advance:
        for k in range(0, len(order), batch_size):
            idx = order[k:k + batch_size]
            batch = collate([np.asarray(seqs[i], dtype=np.int64) for i in idx], pad_id=pad_id)
            labels = batch["labels"].to(device)
            logits = model(input_ids=batch["input_ids"].to(device),
                           attention_mask=batch["attention_mask"].to(device), use_cache=False).logits
            nll, valid = token_nll(logits, labels)
            yield Scored(rows=idx, logits=logits[:, :-1].float(), targets=labels[:, 1:].clamp(min=0),
                         valid=valid, nll=nll)
            advance(len(idx))
