"""Lazy sampling [Stock et al. 2022 §3.2] against exact enumeration on a tiny-vocabulary model.

The model is a real (randomly initialised, sharpened) Llama with a 5-token vocabulary. For each
context and sampler, the reference walks the whole decoding tree one prefix at a time (an
unbatched forward per prefix, Hugging Face's own `TemperatureLogitsWarper`/`TopKLogitsWarper` to
build the sampler's distribution), giving the probability of every one of the 5^3 continuations;
they sum to 1. The lazy value — one batched, right-padded teacher-forced pass — must equal the log
of each, including −inf (probability 0) where a token falls outside the top k.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from repoguard.audit.lazy import Sampler, sampler_log_probs, score_windows

V, M = 5, 3
SAMPLERS = [Sampler(), Sampler(temperature=0.5), Sampler(temperature=1.7), Sampler(top_k=2),
            Sampler(temperature=0.8, top_k=3)]


@pytest.fixture(scope="module")
def tiny():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=V, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32,
                      bos_token_id=0, eos_token_id=1, pad_token_id=4, tie_word_embeddings=False)
    cfg._attn_implementation = "eager"
    torch.manual_seed(3)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(40.0)          # peaked conditionals: top-k really cuts mass
    return model


def _prefix_logits(model, context: list[int]) -> dict[tuple, object]:
    """Raw next-token logits after context + y for every prefix y of length < M (one unbatched,
    unpadded forward per node of the decoding tree)."""
    import torch

    out = {}
    for t in range(M):
        for y in itertools.product(range(V), repeat=t):
            ids = torch.tensor([context + list(y)])
            with torch.no_grad():
                out[y] = (ids, model(input_ids=ids).logits[:, -1].double())
    return out


def _reference(nodes: dict, smp: Sampler) -> dict[tuple, float]:
    """P(decoding emits x) for every x in V^M: product down the tree of HF's warped softmax."""
    import torch
    from transformers import TemperatureLogitsWarper, TopKLogitsWarper

    warpers = []
    if smp.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(smp.temperature))
    if smp.top_k is not None:
        warpers.append(TopKLogitsWarper(smp.top_k))
    dist = {}
    for y, (ids, z) in nodes.items():
        for w in warpers:
            z = w(ids, z)
        dist[y] = torch.softmax(z, dim=-1)[0]
    return {x: math.prod(float(dist[x[:t]][x[t]]) for t in range(M)) for x in itertools.product(range(V), repeat=M)}


def test_lazy_log_probability_equals_exact_enumeration(tiny):
    contexts = [[0], [0, 2, 3], [0, 3, 3, 2, 1, 2]]
    windows, starts, keys = [], [], []
    for c in contexts:
        for x in itertools.product(range(V), repeat=M):
            windows.append(np.array(c + list(x)))
            starts.append(len(c))
            keys.append((tuple(c), x))
    got = score_windows(tiny, windows, starts, SAMPLERS, pad_id=4, batch_size=37)   # mixed lengths per batch
    zeros = 0
    nodes = {tuple(c): _prefix_logits(tiny, c) for c in contexts}
    for j, smp in enumerate(SAMPLERS):
        for c in contexts:
            ref = _reference(nodes[tuple(c)], smp)
            assert sum(ref.values()) == pytest.approx(1.0, abs=1e-9)
            for q, (kc, x) in enumerate(keys):
                if kc != tuple(c):
                    continue
                lazy = got.logp[q, j]
                if ref[x] == 0.0:
                    assert lazy == -math.inf, (smp, c, x)
                    zeros += 1
                else:
                    assert lazy == pytest.approx(math.log(ref[x]), abs=2e-4), (smp, c, x)
    assert zeros > 100          # top-k really removes continuations (the probability-0 case)


def test_top_k_keeps_ties_and_temperature_scales():
    import torch

    z = torch.tensor([[2.0, 1.0, 1.0, 0.0]])
    t = torch.arange(4)
    # top-2 with a tie at the 2nd value keeps three tokens (as HF's TopKLogitsWarper)
    lp = sampler_log_probs(z.expand(4, 4), t, Sampler(top_k=2))
    norm = math.log(math.exp(2) + 2 * math.exp(1))
    assert lp[:3].tolist() == pytest.approx([2 - norm, 1 - norm, 1 - norm], abs=1e-6)
    assert lp[3].item() == -math.inf
    lp = sampler_log_probs(z.expand(4, 4), t, Sampler(temperature=0.5))
    ref = torch.log_softmax(z[0] / 0.5, dim=-1)
    assert lp.tolist() == pytest.approx(ref.tolist(), abs=1e-6)
    with pytest.raises(ValueError):
        Sampler(temperature=0)
    with pytest.raises(ValueError):
        Sampler(top_k=0)


def test_loss_is_the_training_loss(tiny):
    """The window loss equals `training.data.per_example_loss` (ℓ(θ, z) of the trainer)."""
    from repoguard.training.data import collate, per_example_loss

    windows = [np.array([0, 2, 3, 1]), np.array([0, 3]), np.array([0, 1, 2, 3, 2, 2, 1])]
    got = score_windows(tiny, windows, [1, 1, 3], [Sampler()], pad_id=4)
    b = collate(windows, pad_id=4)
    import torch

    with torch.no_grad():
        ref = per_example_loss(tiny(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits, b["labels"])
    assert got.loss == pytest.approx(ref.double().numpy(), abs=1e-5)
    with pytest.raises(ValueError):
        score_windows(tiny, [np.array([0])], [1], [Sampler()], pad_id=4)
