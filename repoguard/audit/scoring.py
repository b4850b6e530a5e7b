"""Scoring texts under a trained causal LM: log-perplexity (bits) and greedy continuations."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def encode(texts: Sequence[str], tokenizer) -> list[list[int]]:
    """Token ids per text with BOS prepended when the tokenizer has one (as `training.data.tokenize`
    does for training examples, so a canary is scored in the context it was trained in)."""
    bos = tokenizer.bos_token_id
    enc = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    return [([bos] if bos is not None else []) + list(ids) for ids in enc]


def log_perplexity(model, tokenizer, texts: Sequence[str], *, batch_size: int = 512) -> np.ndarray:
    """Px(text) = −log2 Pr(tokens after BOS | BOS) under `model`, in bits: shape (len(texts),).

    [Carlini et al. 2019 §4, the log-perplexity of a candidate sequence.] Batched with right
    padding (a causal model's outputs on real tokens do not depend on right padding)."""
    from repoguard.training.scoring import evaluating, teacher_forced

    ids = encode(texts, tokenizer)
    out = np.empty(len(ids), dtype=np.float64)
    with evaluating(model):
        for b in teacher_forced(model, ids, pad_id=tokenizer.pad_token_id, batch_size=batch_size, label="score"):
            out[b.rows] = (b.nll.sum(dim=1) / math.log(2)).double().cpu().numpy()
    return out


def greedy_continuations(model, prefixes: np.ndarray, *, m: int, pad_id: int, batch_size: int = 64) -> np.ndarray:
    """Greedy (argmax) continuation of `m` tokens for each prefix: (n, k) int → (n, m) int.

    All prefixes have the same length, so batches need no padding. EOS is not allowed to stop a
    continuation early (`min_new_tokens = m`)."""
    import torch

    from repoguard.core.progress import progress
    from repoguard.training.scoring import evaluating

    device = next(model.parameters()).device
    prefixes = np.asarray(prefixes, dtype=np.int64)
    out = np.empty((prefixes.shape[0], m), dtype=np.int64)
    with evaluating(model), progress("greedy decoding", total=prefixes.shape[0]) as advance:
        for k in range(0, prefixes.shape[0], batch_size):
            x = torch.from_numpy(prefixes[k:k + batch_size]).to(device)
            gen = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=m,
                                 min_new_tokens=m, do_sample=False, pad_token_id=pad_id)
            out[k:k + x.shape[0]] = gen[:, x.shape[1]:].cpu().numpy()
            advance(x.shape[0])
    return out
