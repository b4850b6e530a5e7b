"""GPU tests (issue #16): run with `pytest -m gpu` on a CUDA machine; skipped without CUDA.

bf16 DP step against fp32 on the same weights, checkpoint/resume with the CUDA noise generator's
state bit-identical, and the auto micro-batch size fitting in the memory it was chosen for."""
from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (pytest -m gpu on a GPU)")]


def _llama(*, hidden=128, layers=2, positions=1024, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    from repoguard.training.model import apply_lora

    cfg = LlamaConfig(vocab_size=512, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=positions)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(seed)
    model = apply_lora(LlamaForCausalLM(cfg).eval(), r=8, alpha=16, dropout=0.0, seed=seed)
    with torch.no_grad():
        g = torch.Generator().manual_seed(seed + 1)
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return model.cuda()


def _seqs(lengths, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    return [rng.integers(3, 512, size=n).astype(np.int64) for n in lengths]


def test_bf16_dp_step_matches_fp32_on_cuda():
    from repoguard.training.data import collate
    from repoguard.training.dp_step import DPStep
    from repoguard.training.precision import prepare_model, resolve_precision

    assert resolve_precision("auto", "cuda") == "bf16"
    batch = collate(_seqs((300, 512, 128, 400)), pad_id=0)
    grads = {}
    for precision in ("fp32", "bf16"):
        model = prepare_model(_llama(), precision)
        dp = DPStep(model, clip_norm=0.1, noise_multiplier=0.5, batch_size=4.0, precision=precision,
                    noise_generator=torch.Generator(device="cuda").manual_seed(5))
        _, clipped = dp.clipped_per_example(batch)
        assert all(c.dtype == torch.float32 for c in clipped)
        for p in dp.params:
            p.grad = None
        dp.begin()
        dp.accumulate(batch)
        dp.finish()
        grads[precision] = (torch.cat([c.reshape(4, -1) for c in clipped], dim=1),
                            torch.cat([p.grad.reshape(-1) for p in dp.params]))
        assert grads[precision][1].dtype == torch.float32
        dp.close()
    per_ex = ((grads["bf16"][0] - grads["fp32"][0]).norm(dim=1) / grads["fp32"][0].norm(dim=1)).max().item()
    assert per_ex <= 5e-2, f"bf16 vs fp32 clipped per-example gradients: relative error {per_ex:.3g}"
    # same noise generator seed: the noised step gradients agree closely (the noise dominates)
    step = ((grads["bf16"][1] - grads["fp32"][1]).norm() / grads["fp32"][1].norm()).item()
    assert step <= 1e-2, f"noised step gradient: relative error {step:.3g}"


def test_resume_with_the_cuda_noise_generator_is_bit_identical(tmp_path):
    from test_train import SETTINGS, TEXTS, lora_params, make_plan, tiny

    from repoguard.training.data import tokenize
    from repoguard.training.dp_step import flat_params
    from repoguard.training.trainer import latest_checkpoint, train

    plan = make_plan()
    model, tok = tiny()
    model.cuda()
    seqs = tokenize(TEXTS, tok, max_length=32)
    train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=tmp_path / "a",
          settings=SETTINGS, ledger=None, publish=False, show_progress=False)
    uninterrupted = flat_params(lora_params(model))

    model_b, _ = tiny()
    model_b.cuda()

    def crash(step):
        if step == 3:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        train(model=model_b, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=tmp_path / "b",
              settings=SETTINGS, ledger=None, publish=False, on_step=crash, show_progress=False)
    ck = latest_checkpoint(tmp_path / "b" / "checkpoints")
    assert torch.load(ck / "rng.pt", weights_only=False)["noise_device"] == "cuda"
    model_c, _ = tiny()
    model_c.cuda()
    train(model=model_c, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=tmp_path / "b",
          settings=SETTINGS, ledger=None, resume=True, publish=False, show_progress=False)
    assert torch.equal(flat_params(lora_params(model_c)), uninterrupted)
    assert not (tmp_path / "b" / "checkpoints").exists()       # secret material retired at completion


@pytest.mark.parametrize("checkpointing", [False, True])
def test_auto_micro_batch_fits(checkpointing):
    from repoguard.training.data import collate
    from repoguard.training.dp_step import DPStep
    from repoguard.training.memory import enable_gradient_checkpointing, probe_micro_batch
    from repoguard.training.precision import prepare_model

    model = prepare_model(_llama(hidden=512, layers=4, positions=2048), "bf16")
    if checkpointing:
        enable_gradient_checkpointing(model)
    dp = DPStep(model, clip_norm=1.0, noise_multiplier=1.0, batch_size=512.0, precision="bf16",
                noise_generator=torch.Generator(device="cuda").manual_seed(0))
    seq = _seqs((2048,))[0]

    def run_one(n):
        dp.clipped_per_example(collate([seq] * n, pad_id=0))
        for p in dp.params:
            p.grad = None
    n = probe_micro_batch(run_one, device=torch.device("cuda"), cap=64)
    assert n >= 2
    free, _ = torch.cuda.mem_get_info()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    run_one(n)                                   # must not raise OutOfMemoryError
    torch.cuda.synchronize()
    assert torch.cuda.max_memory_allocated() - before <= free + torch.cuda.memory_reserved()
    dp.close()
