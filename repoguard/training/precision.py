"""Numeric precision of a training run: fp32, or bf16 autocast with fp32 master LoRA weights.

`[training] precision`:

* `fp32` — every weight and every operation in fp32 (the CPU default);
* `bf16` — the frozen base weights are stored in bf16, the trainable LoRA factors stay fp32
  ("master" copies that AdamW updates), and the forward pass runs under
  `torch.autocast(dtype=torch.bfloat16)`, so matrix products read bf16 operands and accumulate in
  fp32 [Micikevicius et al. 2018, "Mixed precision training", §3; bf16 needs no loss scaling
  because it has fp32's exponent range]. Everything the privacy analysis rests on stays fp32:
  the per-example gradients are upcast before their norms are taken, clipping, the clipped sum,
  the Gaussian noise N(0, σ²C²) and the division by B are fp32 (`dp_step.DPStep`);
* `auto` — bf16 on a CUDA device that supports it (`torch.cuda.is_bf16_supported()`), else fp32.

bf16 also works on the CPU (torch's CPU autocast), which is how the tests exercise this path.
"""
from __future__ import annotations

import contextlib

from repoguard.core.errors import InputError

PRECISIONS = ("auto", "fp32", "bf16")


def resolve_precision(spec: str, device) -> str:
    """`auto` → "bf16" on a bf16-capable CUDA device, else "fp32"; "fp32"/"bf16" pass through.

    Raises InputError for an unknown value, or "bf16" asked on a CUDA device without bf16."""
    import torch

    if spec not in PRECISIONS:
        raise InputError(f"[training] precision: must be one of {', '.join(PRECISIONS)}, not {spec!r}")
    dev = torch.device(device)
    cuda_bf16 = dev.type == "cuda" and torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if spec == "auto":
        return "bf16" if cuda_bf16 else "fp32"
    if spec == "bf16" and dev.type == "cuda" and not cuda_bf16:
        raise InputError("[training] precision: bf16 requested but this GPU does not support bfloat16; "
                         "use fp32")
    return spec


def autocast(precision: str, device):
    """The forward pass's context: `torch.autocast(device_type, dtype=bfloat16)` for "bf16", a
    no-op for "fp32"."""
    import torch

    if precision == "bf16":
        return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def prepare_model(model, precision: str):
    """Cast `model` (a peft model) for `precision` in place and return it.

    "bf16": frozen parameters → bf16, trainable (LoRA) parameters → fp32 master copies. peft's
    cast of each LoRA layer's input to the adapter dtype stays on: under autocast it costs an fp32
    copy of the adapted layers' inputs, but without it the held-out evaluation and the audits,
    which run the model outside autocast, would multiply bf16 inputs by fp32 adapters and fail.
    "fp32": every parameter fp32. Buffers are left as they are (rotary tables stay fp32)."""
    import torch

    with torch.no_grad():
        for p in model.parameters():
            want = torch.float32 if (p.requires_grad or precision == "fp32") else torch.bfloat16
            if p.dtype != want:
                p.data = p.data.to(want)
    return model


def check_fp32_master(params) -> None:
    """Raise InputError when a trainable parameter is not fp32 (AdamW on bf16 weights would round
    small updates away; the DP noise must be added in fp32)."""
    import torch

    bad = [tuple(p.shape) for p in params if p.dtype != torch.float32]
    if bad:
        raise InputError(f"model: {len(bad)} trainable parameter(s) are not fp32 (shape {bad[0]}); "
                         "LoRA weights must be fp32 master copies")
