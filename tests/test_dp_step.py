"""DP-SGD step (Hush Alg. 2 lines 8–11) on a real tiny Llama + peft LoRA + Opacus hooks."""
from __future__ import annotations

import pytest
import torch
from scipy import stats

from repoguard.training.data import collate, per_example_loss, tokenize
from repoguard.training.dp_step import DPStep, PrivacyInvariantError, flat_params
from repoguard.training.model import TinyConfig, apply_lora, build_tiny_model

TINY = TinyConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4,
                  max_position=64)
TEXTS = [f"def f{i}(x):\n    return x * {i} + {i * i}  # line {i}\n" * (1 + i % 3) for i in range(12)]


def tiny_lora(seed: int = 0, *, nonzero_b: bool = True):
    model, tok = build_tiny_model(TEXTS, seed=seed, size=TINY)
    peft_model = apply_lora(model, r=4, alpha=8, dropout=0.0, targets=(), seed=seed)
    if nonzero_b:   # LoRA B starts at 0, which would zero every gradient of A
        g = torch.Generator().manual_seed(seed + 1)
        with torch.no_grad():
            for n, p in peft_model.named_parameters():
                if "lora_B" in n:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return peft_model, tok


def loop_grads(model, seq, params):
    """Gradient of one example's loss, computed alone (no padding, no hooks involved)."""
    batch = collate([seq], pad_id=0)
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False)
    loss = per_example_loss(out.logits, batch["labels"])[0]
    return torch.autograd.grad(loss, params)


@pytest.mark.parametrize("clip_norm", [1e-3, 0.05, 1e3])   # all clipped / mixed / none clipped
def test_clipped_per_example_grads_match_a_per_example_loop(clip_norm):
    model, tok = tiny_lora()
    seqs = tokenize(TEXTS[:6], tok, max_length=32)
    assert len({len(s) for s in seqs}) > 1          # padding is exercised
    params = [p for p in model.parameters() if p.requires_grad]
    expected = []
    for s in seqs:
        g = loop_grads(model, s, params)
        norm = torch.sqrt(sum((x ** 2).sum() for x in g))
        f = min(1.0, clip_norm / (norm.item() + 1e-6))
        expected.append(torch.cat([x.reshape(-1) for x in g]) * f)
    dp = DPStep(model, clip_norm=clip_norm, noise_multiplier=1.0, batch_size=4.0,
                noise_generator=torch.Generator().manual_seed(0))
    _, clipped = dp.clipped_per_example(collate(seqs, pad_id=tok.pad_token_id))
    got = torch.cat([c.reshape(len(seqs), -1) for c in clipped], dim=1)
    for i, e in enumerate(expected):
        rel = ((got[i] - e).norm() / e.norm()).item()
        assert rel <= 1e-5, f"example {i}: relative error {rel:.2e}"
        assert got[i].norm().item() <= clip_norm * (1 + 1e-5)
    dp.close()


def test_noise_has_std_sigma_c_over_b_per_coordinate():
    """Zero data: the step's gradient is pure noise N(0, (σC/B)²) per coordinate. With ~40k
    coordinates the sample std is within ±1.2% of σC/B w.p. > 0.999 (χ² on the variance), and
    the KS test against N(0, σC/B) holds at level 0.001 with this fixed seed."""
    sigma, c, b = 1.7, 0.5, 6.0
    model, _ = tiny_lora()
    dp = DPStep(model, clip_norm=c, noise_multiplier=sigma, batch_size=b,
                noise_generator=torch.Generator().manual_seed(1234))
    opt = torch.optim.SGD(dp.params, lr=0.0)
    draws = []
    for _ in range(40):
        dp.begin()                                  # an empty logical batch
        dp.finish()
        draws.append(torch.cat([p.grad.reshape(-1) for p in dp.params]).clone())
        dp.apply(opt, public_batch_size=b)
    x = torch.cat(draws).double().numpy()
    target = sigma * c / b
    n = x.size
    chi2 = (x ** 2).sum() / target ** 2                # ~ χ²(n) when the std is `target`
    p_var = 2 * min(stats.chi2.cdf(chi2, n), stats.chi2.sf(chi2, n))
    assert p_var > 1e-3, f"std {x.std():.5f} vs σC/B {target:.5f} (p={p_var:.1e})"
    assert stats.kstest(x / target, "norm").pvalue > 1e-3
    # The same statistic rejects normalising by a realised batch size of 5 instead of B = 6.
    chi2_wrong = (x ** 2).sum() / (sigma * c / 5.0) ** 2
    assert stats.chi2.cdf(chi2_wrong, n) < 1e-6
    dp.close()


def test_noise_is_added_once_per_logical_step_whatever_the_micro_batching():
    """Same data split into 1 or 3 micro-batches with the same noise seed: same gradient (noise
    drawn once per logical step, not per micro-batch)."""
    model, tok = tiny_lora()
    seqs = tokenize(TEXTS[:6], tok, max_length=32)
    grads = []
    for split in ([seqs], [seqs[:2], seqs[2:4], seqs[4:]]):
        dp = DPStep(model, clip_norm=0.1, noise_multiplier=2.0, batch_size=5.0,
                    noise_generator=torch.Generator().manual_seed(7))
        dp.begin()
        for part in split:
            dp.accumulate(collate(part, pad_id=tok.pad_token_id))
        stats_ = dp.finish()
        assert stats_["n_examples"] == 6 and dp.last_noise_draws == 1
        grads.append(torch.cat([p.grad.reshape(-1) for p in dp.params]).clone())
        dp.apply(torch.optim.SGD(dp.params, lr=0.0), public_batch_size=5.0)
        dp.close()
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-5, atol=1e-6)


def test_invariants_fail_loudly():
    model, tok = tiny_lora()
    batch = collate(tokenize(TEXTS[:2], tok, max_length=16), pad_id=tok.pad_token_id)
    dp = DPStep(model, clip_norm=1.0, noise_multiplier=1.0, batch_size=4.0,
                noise_generator=torch.Generator().manual_seed(0))
    opt = torch.optim.SGD(dp.params, lr=0.1)
    with pytest.raises(PrivacyInvariantError):
        dp.apply(opt, public_batch_size=4.0)         # no noised gradient yet
    dp.begin()
    dp.accumulate(batch)
    dp.finish()
    with pytest.raises(PrivacyInvariantError, match="twice"):
        dp.finish()                                   # noise would be drawn twice
    with pytest.raises(PrivacyInvariantError, match="public B"):
        dp.apply(opt, public_batch_size=2.0)          # normaliser is not the public B
    before = flat_params(dp.params)
    dp.apply(opt, public_batch_size=4.0)
    assert not torch.equal(before, flat_params(dp.params))
    with pytest.raises(PrivacyInvariantError):
        dp.apply(opt, public_batch_size=4.0)          # a gradient cannot be used twice
    with pytest.raises(PrivacyInvariantError):
        DPStep(model, clip_norm=1.0, noise_multiplier=0.0, batch_size=4.0,
               noise_generator=torch.Generator())
    dp.close()


def test_no_dp_gradient_is_the_plain_sum_divided_by_b():
    model, tok = tiny_lora()
    seqs = tokenize(TEXTS[:4], tok, max_length=32)
    params = [p for p in model.parameters() if p.requires_grad]
    expected = sum(torch.cat([g.reshape(-1) for g in loop_grads(model, s, params)]) for s in seqs) / 8.0
    dp = DPStep(model, clip_norm=1.0, noise_multiplier=1.0, batch_size=8.0, noise_generator=None,
                private=False)
    dp.begin()
    dp.accumulate(collate(seqs, pad_id=tok.pad_token_id))
    dp.finish()
    got = torch.cat([p.grad.reshape(-1) for p in dp.params])
    assert ((got - expected).norm() / expected.norm()).item() < 1e-5
    assert dp.last_noise_draws == 0
