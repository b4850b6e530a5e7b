"""The GPU path exercised on the CPU (issue #16): bf16 autocast with fp32 master LoRA weights and
fp32 clipping/noise, per-example gradients under gradient checkpointing, the micro-batch size
from a memory probe, the noise generator's device in checkpoints, and the config keys."""
from __future__ import annotations

import pytest
import torch
from test_architectures import FAMILIES, _lora, _seqs

from repoguard.core.config import parse_config
from repoguard.core.errors import InputError
from repoguard.training.data import collate, per_example_loss
from repoguard.training.dp_step import DPStep
from repoguard.training.memory import (batch_cap, enable_gradient_checkpointing, micro_batch_from_probe,
                                       uses_gradient_checkpointing)
from repoguard.training.precision import autocast, prepare_model, resolve_precision


def _loop(model, seqs, clip, *, precision="fp32"):
    """Clipped gradients of each example computed alone (no padding, no hooks), fp32 vectors."""
    params = [p for p in model.parameters() if p.requires_grad]
    out_all = []
    for s in seqs:
        b = collate([s], pad_id=0)
        with autocast(precision, "cpu"):
            out = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], use_cache=False)
        g = torch.autograd.grad(per_example_loss(out.logits, b["labels"])[0], params)
        flat = torch.cat([x.float().reshape(-1) for x in g])
        out_all.append(flat * min(1.0, clip / (flat.norm().item() + 1e-6)))
    return out_all


def _batched(model, seqs, clip, **kw):
    dp = DPStep(model, clip_norm=clip, noise_multiplier=1.0, batch_size=4.0,
                noise_generator=torch.Generator().manual_seed(0), **kw)
    try:
        _, clipped = dp.clipped_per_example(collate(seqs, pad_id=0))
    finally:
        dp.close()
    return dp, clipped


def _max_rel(got, expected):
    flat = torch.cat([c.reshape(len(expected), -1) for c in got], dim=1)
    return max(((flat[i] - e).norm() / e.norm()).item() for i, e in enumerate(expected))


@pytest.mark.parametrize("clip", [0.05, 1e3])     # clipped / not clipped
def test_bf16_per_example_grads_match_a_bf16_loop_and_stay_fp32(clip):
    model = prepare_model(_lora("llama"), "bf16")
    frozen = [p for p in model.parameters() if not p.requires_grad]
    assert frozen and all(p.dtype == torch.bfloat16 for p in frozen)
    assert all(p.dtype == torch.float32 for p in model.parameters() if p.requires_grad)
    seqs = _seqs()
    expected = _loop(model, seqs, clip, precision="bf16")
    dp, clipped = _batched(model, seqs, clip, precision="bf16")
    assert dp.per_example == "hooks"
    assert all(c.dtype == torch.float32 for c in clipped)
    # bf16 has an 8-bit mantissa (relative rounding 2^-9 ≈ 2e-3 per operand); padding changes the
    # shapes and so the summation order of the batched products.
    assert _max_rel(clipped, expected) <= 2e-2
    norms = torch.cat([c.reshape(len(seqs), -1) for c in clipped], dim=1).norm(dim=1)
    assert (norms <= clip * (1 + 1e-5)).all()
    # and the bf16 gradients are close to the fp32 ones of the same weights (not a different function)
    fp32 = _lora("llama")
    assert _max_rel(clipped, _loop(fp32, seqs, clip)) <= 5e-2


def test_bf16_step_noises_and_normalises_in_fp32():
    model = prepare_model(_lora("llama"), "bf16")
    dp = DPStep(model, clip_norm=0.5, noise_multiplier=2.0, batch_size=4.0,
                noise_generator=torch.Generator().manual_seed(3), precision="bf16")
    opt = torch.optim.SGD(dp.params, lr=0.0)
    dp.begin()
    dp.accumulate(collate(_seqs(), pad_id=0))
    dp.finish()
    assert dp._flat.dtype == torch.float32
    grads = [p.grad for p in dp.params]
    assert all(g.dtype == torch.float32 for g in grads)
    # the noise std σC/B = 0.25 dominates the clipped sum (≤ 4·0.5/4 in norm): values are not bf16-rounded
    flat = torch.cat([g.reshape(-1) for g in grads])
    assert 0.2 < flat.std().item() < 0.3
    assert not torch.equal(flat, flat.bfloat16().float())
    dp.apply(opt, public_batch_size=4.0)
    dp.close()


def test_bf16_model_still_runs_outside_autocast():
    """The held-out evaluation and the audits run the model without autocast: a bf16-prepared
    model must still give finite logits there."""
    model = prepare_model(_lora("llama"), "bf16")
    b = collate(_seqs(), pad_id=0)
    with torch.no_grad():
        out = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], use_cache=False)
    assert torch.isfinite(out.logits.float()).all()


def test_bf16_refuses_non_fp32_adapter_weights():
    model = _lora("llama").to(torch.bfloat16)
    with pytest.raises(InputError, match="fp32 master"):
        DPStep(model, clip_norm=1.0, noise_multiplier=1.0, batch_size=4.0,
               noise_generator=torch.Generator(), precision="bf16")


def test_resolve_precision():
    assert resolve_precision("auto", "cpu") == "fp32"
    assert resolve_precision("bf16", "cpu") == "bf16"
    with pytest.raises(InputError, match="precision"):
        resolve_precision("fp16", "cpu")


def _long_seqs(lengths, seed=0):
    from test_architectures import V

    g = torch.Generator().manual_seed(seed)
    return [torch.randint(3, V, (n,), generator=g).tolist() for n in lengths]


@pytest.mark.parametrize("family", FAMILIES)
def test_checkpointed_per_example_grads_match_a_loop(family):
    """Every family: gradient checkpointing on (layers really recomputed: each LoRA factor
    runs twice per step), hooks give the per-example loop's clipped gradients; Opacus
    is refused."""
    model = _lora(family)
    seqs = _long_seqs((60, 37, 52))        # the tiny models have 64 positions
    expected = _loop(model, seqs, 0.5)
    base = model.get_base_model()
    if not base.supports_gradient_checkpointing:
        pytest.skip(f"{family}: no gradient checkpointing in transformers")
    enable_gradient_checkpointing(model)
    assert uses_gradient_checkpointing(model)
    with pytest.raises(InputError, match="gradient_checkpointing"):
        DPStep(model, clip_norm=0.5, noise_multiplier=1.0, batch_size=4.0,
               noise_generator=torch.Generator(), per_example="opacus")
    layer = next(m for n, m in model.named_modules() if n.endswith("lora_A.default"))
    calls = []
    h = layer.register_forward_hook(lambda *a: calls.append(1))
    dp, clipped = _batched(model, seqs, 0.5)
    h.remove()
    assert dp.per_example == "hooks"
    assert len(calls) == 2, f"{family}: lora_A ran {len(calls)}× (checkpointing recomputes it once)"
    assert _max_rel(clipped, expected) <= 1e-4


def test_checkpointed_llama_at_a_long_sequence():
    """A Llama with 1,024 positions, sequences up to 1,000 tokens, bf16-free: checkpointed hooks
    equal the loop, clipping mixed (one clipped, one not)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from repoguard.training.model import apply_lora

    cfg = LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = apply_lora(LlamaForCausalLM(cfg).eval(), r=4, alpha=8, dropout=0.0, seed=0)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.3)
    seqs = _long_seqs((1000, 700))
    unclipped = _loop(model, seqs, 1e9)
    clip = (unclipped[0].norm().item() + unclipped[1].norm().item()) / 2
    expected = _loop(model, seqs, clip)
    enable_gradient_checkpointing(model)
    _, clipped = _batched(model, seqs, clip)
    assert _max_rel(clipped, expected) <= 1e-4


def test_micro_batch_from_probe_arithmetic():
    gib = 2 ** 30
    # peak(1) = 3 GiB, peak(2) = 5 GiB → 2 GiB per example, 1 GiB fixed; 0.85·40 = 34 → (34−1)/2 = 16
    assert micro_batch_from_probe(budget_bytes=40 * gib, peak_one=3 * gib, peak_two=5 * gib) == 16
    assert micro_batch_from_probe(budget_bytes=40 * gib, peak_one=3 * gib, peak_two=5 * gib, cap=10) == 10
    assert micro_batch_from_probe(budget_bytes=40 * gib, peak_one=3 * gib, peak_two=5 * gib, headroom=1.0) == 19
    # per-example cost never taken as ≤ 0 (noisy probes): the cap binds
    assert micro_batch_from_probe(budget_bytes=gib, peak_one=100, peak_two=90, cap=64) == 64
    with pytest.raises(InputError, match="gradient_checkpointing"):
        micro_batch_from_probe(budget_bytes=2 * gib, peak_one=3 * gib, peak_two=5 * gib)
    with pytest.raises(ValueError):
        micro_batch_from_probe(budget_bytes=gib, peak_one=1, peak_two=2, headroom=0.0)


def test_batch_cap_covers_the_poisson_batch():
    assert batch_cap(16) == 16 + 16 + 1
    assert batch_cap(0.5) == 6


def test_checkpoint_records_the_noise_generator_device(tmp_path):
    """rng.pt carries the generator's device type; a resume on another kind of device is refused."""
    import numpy as np

    from repoguard.training.sampler import PoissonSampler
    from repoguard.training.trainer import _load_checkpoint, _save_checkpoint

    model = _lora("llama")
    gen = torch.Generator().manual_seed(7)
    dp = DPStep(model, clip_norm=1.0, noise_multiplier=1.0, batch_size=4.0, noise_generator=gen)
    opt = torch.optim.AdamW(dp.params, lr=1e-3)
    sampler = PoissonSampler(np.full(8, 0.5), seed=1)
    _save_checkpoint(tmp_path, step=1, dp=dp, optimizer=opt, sampler=sampler, gen=gen, state={}, keep=2)
    ck = tmp_path / "step-00000001"
    rng = torch.load(ck / "rng.pt", weights_only=False)
    assert rng["noise_device"] == "cpu"
    assert oct((ck / "rng.pt").stat().st_mode & 0o777) == "0o600"
    expected = torch.empty(5).normal_(generator=gen)
    _load_checkpoint(ck, dp=dp, optimizer=opt, sampler=sampler, gen=gen)
    assert torch.equal(torch.empty(5).normal_(generator=gen), expected)
    rng["noise_device"] = "cuda"
    torch.save(rng, ck / "rng.pt")
    with pytest.raises(InputError, match="same kind of device"):
        _load_checkpoint(ck, dp=dp, optimizer=opt, sampler=sampler, gen=gen)
    dp.close()


@pytest.mark.parametrize("body, msg", [
    ('precision = "fp16"', "training.precision"),
    ('per_example_grads = "ghost"', "training.per_example_grads"),
    ('gradient_checkpointing = true\nper_example_grads = "opacus"', "training.per_example_grads"),
    ("micro_batch_size = -1", "training.micro_batch_size"),
    ('micro_batch_size = "big"', "training.micro_batch_size"),
])
def test_config_rejects_bad_gpu_settings(body, msg):
    with pytest.raises(InputError, match=msg):
        parse_config("[training]\n" + body + "\n")


def test_config_accepts_auto_micro_batch():
    t = parse_config('[training]\nmicro_batch_size = "auto"\nprecision = "bf16"\ngradient_checkpointing = true\n').training
    assert (t.micro_batch_size, t.precision, t.gradient_checkpointing, t.per_example_grads) == (0, "bf16", True, "auto")



@pytest.mark.slow
def test_train_command_with_bf16_checkpointing_and_auto_micro_batch(tmp_path, capsys):
    """`repoguard train` end to end on the CPU with the GPU-path keys: bf16 autocast, gradient
    checkpointing (tensor-hook per-example gradients), micro_batch_size = "auto" (CPU default)."""
    pytest.importorskip("repoguard.accounting.ledger")
    import json
    import subprocess

    from repoguard.cli import main

    repo = tmp_path / "repo"
    (repo / "src" / "alpha").mkdir(parents=True)
    (repo / "src" / "web").mkdir(parents=True)
    for i in range(12):
        (repo / "src" / "web" / f"m{i}.py").write_text(f"import os\n\ndef web_{i}(x):\n    return x + {i}\n")
    (repo / "src" / "alpha" / "signals.py").write_text("def signal(p):\n    return p * 0.42\n")
    (repo / "repoguard.toml").write_text(
        '[training]\nprecision = "bf16"\ngradient_checkpointing = true\nmicro_batch_size = "auto"\n'
        '[[secret]]\nid = "alpha"\npaths = ["src/alpha/**"]\np = 1e-4\nr = 0.05\n')
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "PATH": "/usr/bin:/bin"}
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True, env=env)
    assert main(["analyze", "-q", str(repo)]) == 0
    assert main(["plan", "-q", "--batch-size", "2", "--steps", "3", "--c", "1", str(repo)]) == 0
    capsys.readouterr()
    assert main(["train", "--json", "-q", "--max-length", "48", str(repo)]) == 0
    report = json.loads(capsys.readouterr().out)
    out = repo / ".repoguard" / "train"
    assert report["private"] and report["steps_completed"] == 3
    assert (out / "adapter" / "adapter_model.safetensors").is_file()
    assert not (out / "checkpoints").exists()
