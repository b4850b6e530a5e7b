"""Per-example gradients of LoRA factors from tensor hooks: works with gradient checkpointing.

For a Linear layer y = x Wᵀ (+ b) applied to a batch of sequences, x (n, T, d_in), with the
gradient of the summed loss g = ∂L/∂y (n, T, d_out), example i's gradient is

    ∇W_i = Σ_t g_{i,t} ⊗ x_{i,t}   (d_out × d_in),        ∇b_i = Σ_t g_{i,t}

[Goodfellow 2015, "Efficient per-example gradient computations"; the same identity as Opacus's
Linear grad sampler]. peft's LoRA adds lora_B(lora_A(x))·s: lora_A and lora_B are Linear layers,
so their per-example gradients are r×d_in and d_out×r — a few MB for a 1B model's adapter even
at n = 32, whatever the sequence length. They are materialised whole and clipped exactly; ghost
clipping (norms without materialising) would save nothing here and costs a second backward pass.

Why not Opacus's module hooks: they record activations in forward hooks and pop them in backward
hooks, one per call. Under Hugging Face gradient checkpointing the forward runs twice (once
normally, once recomputed during backward), so activations and backward calls no longer pair up
and Opacus leaves the LoRA parameters without (or with mis-shaped) per-example gradients. Here the
forward hook registers a hook on the *output tensor* of the call it saw, with that call's input in
the closure. Only tensors of the graph that backward traverses fire their hooks:

* non-reentrant checkpointing (`use_reentrant=False`, what `memory.enable_gradient_checkpointing`
  asks for): the original forward's output hooks fire; the recomputed outputs are used only as
  saved tensors and their hooks never fire;
* reentrant checkpointing: the first forward runs without grad (no hook is registered), the
  recomputed forward's outputs are backpropagated and fire once.

Either way each call contributes exactly once. Cost of checkpointing: the input x of every adapted
Linear is kept from the forward (the adapter's A needs it), n·T·d_in values per adapted input;
q/k/v projections of one layer share one input tensor.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from repoguard.core.errors import InputError


class LoraGradSampler:
    """Forward hooks on every module with a trainable parameter that accumulate per-example
    gradients of the summed loss into `param.grad_sample` (n, *param.shape), fp32.

    Args:
        model: a peft model; every trainable parameter must be the weight or bias of an nn.Linear
            (LoRA A/B factors).

    Raises:
        InputError: a trainable parameter outside an nn.Linear (e.g. LoRA on an embedding), naming
            the module and what to do.
    """

    def __init__(self, model) -> None:
        self._handles = []
        self.params: list[torch.Tensor] = []
        for name, module in model.named_modules():
            own = [(pn, p) for pn, p in module.named_parameters(recurse=False) if p.requires_grad]
            if not own:
                continue
            if not isinstance(module, nn.Linear):
                raise InputError(
                    f"model: trainable parameter {name}.{own[0][0]} sits in a {type(module).__name__}; "
                    "per-example gradients are computed for Linear LoRA factors only; drop that module "
                    "from --lora-targets (e.g. keep q_proj,v_proj, c_attn, query_key_value, qkv_proj)")
            self.params.extend(p for _, p in own)
            self._handles.append(module.register_forward_hook(self._forward_hook))

    def _forward_hook(self, module: nn.Linear, inputs, output) -> None:
        if not (torch.is_grad_enabled() and isinstance(output, torch.Tensor) and output.requires_grad):
            return
        x = inputs[0].detach()
        weight, bias = module.weight, module.bias

        def backward_hook(g: torch.Tensor) -> None:
            gf, xf = g.detach().float(), x.float()
            n = gf.shape[0]
            gw = torch.einsum("nto,nti->noi", gf.reshape(n, -1, gf.shape[-1]), xf.reshape(n, -1, xf.shape[-1]))
            _add(weight, gw)
            if bias is not None and bias.requires_grad:
                _add(bias, gf.reshape(n, -1, gf.shape[-1]).sum(dim=1))

        output.register_hook(backward_hook)

    def close(self) -> None:
        """Remove the hooks."""
        for h in self._handles:
            h.remove()
        self._handles = []


def _add(p: torch.Tensor, gs: torch.Tensor) -> None:
    """Accumulate (a module called twice in one forward contributes both calls)."""
    prev = getattr(p, "grad_sample", None)
    p.grad_sample = gs if prev is None else prev + gs
