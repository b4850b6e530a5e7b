"""The one next-token cross-entropy (`training.data.token_nll`) and its consumers on a real tiny
Llama: every batched, right-padded score equals an unbatched, unpadded log-softmax reference."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from repoguard.audit.lazy import Sampler, score_windows
from repoguard.audit.scoring import encode, log_perplexity
from repoguard.evaluation.metrics import build_eval_set, evaluate
from repoguard.training.data import collate, per_example_loss, token_nll, tokenize
from repoguard.training.model import TinyConfig, build_tiny_model
from repoguard.training.scoring import evaluating, teacher_forced

TINY = TinyConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4,
                  max_position=96)
TEXTS = [f"def f_{i}(x):\n" + "    x += 1\n" * (i % 5) + f"    return x * {i}\n" for i in range(9)]


@pytest.fixture(scope="module")
def tiny():
    model, tok = build_tiny_model(TEXTS, seed=5, size=TINY)
    with torch.no_grad():                       # away from the uniform initial distribution
        model.lm_head.weight.mul_(30.0)
    return model, tok


def _reference(model, seq) -> np.ndarray:
    """−log p(x_{t+1} | x_≤t) per target of one unpadded sequence, in float64 nats."""
    with torch.no_grad():
        logits = model(input_ids=torch.as_tensor(np.asarray(seq)[None])).logits[0, :-1].double()
    return -torch.log_softmax(logits, -1).gather(-1, torch.as_tensor(np.asarray(seq[1:]))[:, None])[:, 0].numpy()


def test_token_nll_masks_padding_and_matches_unpadded_sequences(tiny):
    model, tok = tiny
    seqs = tokenize(TEXTS, tok, max_length=40)
    assert len({len(s) for s in seqs}) > 2                           # real padding in the batch
    b = collate(seqs, pad_id=tok.pad_token_id)
    with torch.no_grad():
        nll, valid = token_nll(model(**{k: b[k] for k in ("input_ids", "attention_mask")}).logits, b["labels"])
    assert nll.shape == valid.shape == (len(seqs), b["labels"].shape[1] - 1) and nll.dtype == torch.float32
    for i, s in enumerate(seqs):
        ref = _reference(model, s)
        assert int(valid[i].sum()) == len(s) - 1 and not valid[i, len(s) - 1:].any()
        assert torch.all(nll[i, len(s) - 1:] == 0)                 # padding contributes exactly 0
        np.testing.assert_allclose(nll[i, :len(s) - 1].numpy(), ref, rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        mean = per_example_loss(model(**{k: b[k] for k in ("input_ids", "attention_mask")}).logits, b["labels"])
    np.testing.assert_allclose(mean.numpy(), [_reference(model, s).mean() for s in seqs], rtol=1e-5)


def test_per_example_loss_keeps_its_gradient_and_zero_for_one_token(tiny):
    model, tok = tiny
    b = collate([np.array([tok.bos_token_id]), tokenize(TEXTS[:1], tok, max_length=40)[0]], pad_id=tok.pad_token_id)
    loss = per_example_loss(model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits, b["labels"])
    assert float(loss[0].detach()) == 0.0 and float(loss[1].detach()) > 0
    loss.sum().backward()
    assert model.lm_head.weight.grad.abs().sum() > 0
    model.zero_grad()


def test_every_consumer_reduces_the_same_per_token_loss(tiny):
    model, tok = tiny
    seqs = tokenize(TEXTS, tok, max_length=40)
    refs = [_reference(model, s) for s in seqs]
    model.train()
    # at-risk audit: the window's mean; canaries: the sum in bits (sequences as `encode` makes them)
    got = score_windows(model, seqs, [1] * len(seqs), [Sampler()], pad_id=tok.pad_token_id, batch_size=4)
    np.testing.assert_allclose(got.loss, [r.mean() for r in refs], rtol=1e-5)
    np.testing.assert_allclose(got.logp[:, 0], [-r.sum() for r in refs], rtol=1e-5)
    bits = log_perplexity(model, tok, TEXTS, batch_size=4)
    np.testing.assert_allclose(bits, [_reference(model, s).sum() / math.log(2) for s in encode(TEXTS, tok)], rtol=1e-5)
    # held-out metrics: the token-weighted mean over the slice
    es = build_eval_set({"public": np.arange(len(seqs))}, TEXTS, seqs, tok, max_length=40, max_lines=0)
    res = evaluate(model, es, pad_id=tok.pad_token_id, tokenizer=tok, micro_batch_size=4)["public"]
    assert res["loss"] == pytest.approx(np.concatenate(refs).mean(), rel=1e-5)
    assert res["tokens"] == sum(len(s) - 1 for s in seqs)
    assert model.training                                           # every consumer restored the mode


def test_teacher_forced_yields_every_row_once_and_no_gradient_inside_evaluating(tiny):
    model, tok = tiny
    seqs = tokenize(TEXTS, tok, max_length=40)
    with evaluating(model):
        batches = list(teacher_forced(model, seqs, pad_id=tok.pad_token_id, batch_size=4))
        assert not batches[0].nll.requires_grad
    assert sorted(int(r) for b in batches for r in b.rows) == list(range(len(seqs)))
    for b in batches:
        assert torch.all(b.targets >= 0) and b.logits.shape[:2] == b.valid.shape == b.nll.shape
        lengths = [len(seqs[r]) for r in b.rows]
        assert lengths == sorted(lengths)
