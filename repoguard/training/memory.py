"""GPU memory: the micro-batch size chosen from free memory, and gradient checkpointing.

**Micro-batch size.** A DP step's logical batch (Poisson, mean B) is processed in physical
micro-batches; their size only trades memory for speed, never privacy (noise is added once to
the whole clipped sum, `dp_step.DPStep`). `[training] micro_batch_size = "auto"` (or 0) picks it
on CUDA by probing: one forward + backward (with per-example gradients and clipping) of a
micro-batch of 1 and one of 2 sequences of the run's longest length, with
`torch.cuda.max_memory_allocated` read after each. Memory is affine in the micro-batch size n,

    peak(n) ≈ fixed + n · per_example,    per_example = peak(2) − peak(1),  fixed = peak(1) − per_example,

(activations, logits and per-example gradients scale with n; the gradient buffer, the adapter's
`.grad` and allocator slack do not), so the largest n with fixed + n · per_example ≤ headroom ·
budget is taken, where budget is the memory free for the step (`torch.cuda.mem_get_info` plus what
torch's allocator has cached but not used). `micro_batch_from_probe` is that arithmetic, a pure
function; `probe_micro_batch` measures. On the CPU "auto" means `CPU_DEFAULT`.

**Gradient checkpointing.** `[training] gradient_checkpointing = true` stores only each decoder
layer's input during the forward pass and recomputes the layer during backward (Chen et al. 2016,
"Training deep nets with sublinear memory cost"), via Hugging Face's
`activation_checkpointing_enable(use_reentrant=False)`. Per-example gradients then come from
`lora_grads.LoraGradSampler` (Opacus's module hooks do not survive the recomputation).
"""
from __future__ import annotations

import math

from repoguard.core.errors import InputError

CPU_DEFAULT = 8          # "auto" on the CPU
HEADROOM = 0.85          # fraction of the budget a micro-batch may use (fragmentation, allocator slack)


def micro_batch_from_probe(*, budget_bytes: int, peak_one: int, peak_two: int, headroom: float = HEADROOM,
                           cap: int = 1024) -> int:
    """Largest micro-batch size n with fixed + n·per_example ≤ headroom·budget_bytes, in [1, cap].

    Args:
        budget_bytes: memory available to a step's transient tensors (free device memory plus
            allocator cache not in use), measured before the probes.
        peak_one, peak_two: peak bytes allocated above the pre-probe level by a micro-batch of 1
            and of 2 sequences of the longest length.
        headroom: fraction of the budget to use, in (0, 1].
        cap: upper bound (e.g. a few standard deviations above the expected batch size B).

    Raises:
        ValueError: negative sizes or a headroom outside (0, 1].
        InputError: not even a micro-batch of 1 fits (names the sizes and what to do).
    """
    if min(budget_bytes, peak_one, peak_two) < 0 or not 0 < headroom <= 1 or cap < 1:
        raise ValueError("micro_batch_from_probe: sizes must be ≥ 0, 0 < headroom ≤ 1, cap ≥ 1")
    per_example = max(peak_two - peak_one, 1)
    fixed = max(peak_one - per_example, 0)
    usable = headroom * budget_bytes
    if fixed + per_example > usable:
        raise InputError(f"GPU memory: one example needs ~{(fixed + per_example) / 2**30:.2f} GiB but "
                         f"{usable / 2**30:.2f} GiB is usable; set [training] gradient_checkpointing = true "
                         "or lower max_length")
    return int(max(1, min(cap, math.floor((usable - fixed) / per_example))))


def batch_cap(expected_batch_size: float) -> int:
    """A micro-batch larger than the logical batch buys nothing: the Poisson batch's size has mean
    B and variance ≤ B, so B + 4√B + 1 covers it but for a tail of < 1e-4."""
    b = max(float(expected_batch_size), 1.0)
    return int(math.ceil(b + 4 * math.sqrt(b) + 1))


def probe_micro_batch(run_one, *, device, cap: int, headroom: float = HEADROOM) -> int:
    """Measure and pick the micro-batch size on a CUDA device.

    Args:
        run_one: `run_one(n)` runs one forward + backward + per-example clipping of a micro-batch
            of n longest sequences and discards the result (no optimizer step, no noise).
        device: the CUDA device. cap, headroom: see `micro_batch_from_probe`.

    Raises InputError when not even one example fits (also on a CUDA out-of-memory error)."""
    import torch

    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info(device)
    budget = free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    peaks = []
    for n in (1, 2):
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        try:
            run_one(n)
        except torch.cuda.OutOfMemoryError:
            raise InputError(f"GPU memory: a micro-batch of {n} longest sequence(s) does not fit; set "
                             "[training] gradient_checkpointing = true or lower max_length") from None
        torch.cuda.synchronize(device)
        peaks.append(torch.cuda.max_memory_allocated(device) - base)
        torch.cuda.empty_cache()
    return micro_batch_from_probe(budget_bytes=budget, peak_one=peaks[0], peak_two=peaks[1],
                                  headroom=headroom, cap=cap)


def enable_gradient_checkpointing(model) -> None:
    """Turn on Hugging Face activation checkpointing (non-reentrant) on `model`'s base model.

    Raises InputError when the architecture does not support it."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    if not getattr(base, "supports_gradient_checkpointing", False):
        raise InputError(f"model: {type(base).__name__} does not support gradient checkpointing; "
                         "set [training] gradient_checkpointing = false")
    kwargs = {"use_reentrant": False}
    if hasattr(base, "activation_checkpointing_enable"):
        base.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:   # transformers < 5
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def uses_gradient_checkpointing(model) -> bool:
    """True when some module of `model` has Hugging Face checkpointing switched on."""
    return any(getattr(m, "gradient_checkpointing", False) is True for m in model.modules())


def arm_gradient_checkpointing(model) -> None:
    """Hugging Face checkpoints a layer only while `layer.training` is True; the trainer may run
    the model in eval mode (dropout off). Set `training` on the checkpointed layers alone (not
    recursively), so checkpointing happens while every dropout keeps its mode."""
    for m in model.modules():
        if getattr(m, "gradient_checkpointing", False) is True:
            m.training = True
