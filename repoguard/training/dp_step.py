"""One DP-SGD step over LoRA parameters [Hush Alg. 2 lines 8–11; Abadi et al. 2016 Alg. 1]:

    g̃ = ( Σ_{i ∈ batch} clip_C(∇ℓ_i) + N(0, σ²C²·I) ) / B,      clip_C(g) = g · min(1, C/‖g‖₂)

ℓ_i is example i's per-sequence loss (mean next-token cross-entropy over its tokens), ∇ is over
every trainable (LoRA) parameter and ‖·‖₂ over all of them together: the privacy unit is the
example. B is the plan's expected batch size, a public constant; dividing by the realised batch
size would make the step depend on it and break the accounting (Hush §4 analyses the sum).

Per-example gradients come from Opacus `GradSampleModule` hooks, which work on peft's LoRA
`nn.Linear` layers unchanged (checked against a per-example loop in tests/test_dp_step.py). We
prefer them to `torch.func.vmap(grad(...))`: a Hugging Face forward builds masks and caches with
data-dependent control flow that vmap does not trace reliably across architectures, while the
hooks only touch the few LoRA Linear layers and cost one einsum per layer (n·r·d values).

Under gradient checkpointing or bf16 autocast the per-example gradients come instead from
`lora_grads.LoraGradSampler` (tensor hooks; `per_example="hooks"`), which survives the
recomputed forward pass and upcasts to fp32 before the outer products (see that module).
`precision="bf16"` runs the forward under bf16 autocast (`precision.autocast`); the norms,
clipping, sum, noise and division by B stay fp32 whatever the precision.

A logical batch is processed as physical micro-batches (`accumulate` once per micro-batch), which
bounds memory; noise is drawn once in `finish`. Like Opacus's optimizer refusing to reuse a
gradient, `DPStep` is a small state machine that raises `PrivacyInvariantError` when a step would
draw noise twice, skip it, or reach the optimizer without it.
"""
from __future__ import annotations

import warnings
from typing import Sequence

import torch

from repoguard.core.errors import InputError, PolicyError
from repoguard.training.data import per_example_loss
from repoguard.training.ddp import Dist

_N_STATS = 4   # loss_sum, n_examples, n_tokens, noise_draws: reduced with the gradient, one collective


class PrivacyInvariantError(PolicyError):
    """A DP-SGD invariant would be violated (noise twice or never, wrong normaliser, ρ > 1…)."""


class DPStep:
    """Accumulates clipped per-example gradients of `model`'s trainable parameters and turns them
    into a noised, B-normalised gradient once per logical step.

    Args:
        model: a peft model (only LoRA parameters require grad).
        clip_norm: C, L2 bound on each example's whole gradient.
        noise_multiplier: σ; the noise added to the clipped sum has std σ·C per coordinate.
        batch_size: the plan's expected batch size B (public); the sum is divided by it.
        noise_generator: torch.Generator on the parameters' device (checkpointed for resume).
        private: False = the `--no-dp` baseline: plain gradients of the summed per-example
            losses, no clipping, no noise, still divided by B.
        dist: rank/world; rank 0 alone draws noise, one all-reduce per step.
        precision: "fp32" or "bf16" (forward under bf16 autocast; `precision.resolve_precision`).
        per_example: "opacus" (GradSampleModule hooks), "hooks" (`lora_grads`, required with
            gradient checkpointing) or "auto" ("hooks" when bf16 or gradient checkpointing is on,
            else "opacus").

    Use: `begin()`, `accumulate(batch)` per micro-batch, `finish()`, `apply(optimizer)`.
    """

    def __init__(self, model, *, clip_norm: float, noise_multiplier: float, batch_size: float,
                 noise_generator: torch.Generator | None, private: bool = True, dist: Dist = Dist(),
                 precision: str = "fp32", per_example: str = "auto") -> None:
        if private and not (clip_norm > 0 and noise_multiplier > 0):
            raise PrivacyInvariantError("DP step: clip norm C and noise multiplier σ must be > 0")
        if not batch_size > 0:
            raise PrivacyInvariantError("DP step: the public batch size B must be > 0")
        if private and noise_generator is None:
            raise PrivacyInvariantError("DP step: a noise generator is required")
        self.model = model
        self.names, self.params = zip(*[(n, p) for n, p in model.named_parameters() if p.requires_grad])
        if not self.params:
            raise PrivacyInvariantError("DP step: the model has no trainable parameters")
        self.clip_norm = float(clip_norm)
        self.noise_multiplier = float(noise_multiplier)
        self.batch_size = float(batch_size)
        self.private = private
        self.dist = dist
        self._gen = noise_generator
        if precision not in ("fp32", "bf16"):
            raise InputError(f"DP step: precision must be fp32 or bf16, not {precision!r}")
        self.precision = precision
        if precision == "bf16":
            from repoguard.training.precision import check_fp32_master

            check_fp32_master(self.params)
        device = self.params[0].device
        self._n = sum(p.numel() for p in self.params)
        self._flat = torch.zeros(self._n + _N_STATS, dtype=torch.float32, device=device)
        self._views, off = [], 0
        for p in self.params:
            self._views.append(self._flat[off:off + p.numel()].view(p.shape))
            off += p.numel()
        self._stats = self._flat[self._n:]
        from repoguard.training.memory import uses_gradient_checkpointing

        self._ckpt = uses_gradient_checkpointing(model)
        self.per_example = resolve_per_example(per_example, model=model, precision=precision) if private else None
        self._sampler = None
        if self.per_example == "opacus":
            from opacus import GradSampleModule

            check_per_example_support(model)
            self.module = GradSampleModule(model, batch_first=True, loss_reduction="sum")
        else:
            if self.per_example == "hooks":
                from repoguard.training.lora_grads import LoraGradSampler

                self._sampler = LoraGradSampler(model)
            self.module = model
        self._state = "idle"
        self.timer = None     # optional callable(phase): benchmarks time forward/backward/clipping/noise/optimizer
        self.last_divisor: float | None = None
        self.last_noise_draws = 0

    # -- per micro-batch -------------------------------------------------------------------
    def _forward_backward(self, batch) -> torch.Tensor:
        from repoguard.training.memory import arm_gradient_checkpointing
        from repoguard.training.precision import autocast

        dev = self._flat.device
        if self._ckpt:
            arm_gradient_checkpointing(self.model)
        with autocast(self.precision, dev):
            out = self.module(input_ids=batch["input_ids"].to(dev),
                              attention_mask=batch["attention_mask"].to(dev), use_cache=False)
        losses = per_example_loss(out.logits, batch["labels"].to(dev))   # fp32 (logits upcast)
        self._tick("forward")
        with warnings.catch_warnings():
            # Opacus's full backward hooks warn when inputs need no grad (frozen embeddings).
            warnings.simplefilter("ignore", UserWarning)
            losses.sum().backward()
        self._tick("backward")
        return losses.detach()

    def _tick(self, phase: str) -> None:
        if self.timer is not None:
            self.timer(phase)

    def clipped_per_example(self, batch) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Per-example losses (n,) and clipped per-example gradients, one (n, *param.shape) tensor
        per trainable parameter: g_i · min(1, C / (‖g_i‖₂ + 1e-6)), norm over all parameters."""
        if not self.private:
            raise PrivacyInvariantError("DP step: per-example gradients exist only in private mode")
        losses = self._forward_backward(batch)
        samples = []
        for name, p in zip(self.names, self.params):
            gs = p.grad_sample
            # Never clip a wrong gradient: a missing or mis-shaped per-example gradient (a layer the
            # hooks did not see, a tied or re-entered module) stops the run.
            if gs is None or tuple(gs.shape) != (losses.shape[0], *p.shape):
                raise PrivacyInvariantError(
                    f"DP step: no per-example gradient of shape ({losses.shape[0]}, "
                    f"{', '.join(map(str, p.shape))}) for {name} (got "
                    f"{None if gs is None else tuple(gs.shape)}); train only Linear LoRA targets")
            samples.append(gs.float())
            p.grad_sample = None
            p.grad = None
        norms = torch.stack([g.reshape(g.shape[0], -1).norm(2, dim=1) for g in samples], dim=1).norm(2, dim=1)
        factor = (self.clip_norm / (norms + 1e-6)).clamp(max=1.0)
        return losses, [g * factor.view(-1, *([1] * (g.dim() - 1))) for g in samples]

    def begin(self) -> None:
        """Start a logical step. Raises if the previous step's gradient was never applied."""
        if self._state != "idle":
            raise PrivacyInvariantError(f"DP step: begin() while a step is {self._state}")
        self._flat.zero_()
        self._state = "accumulating"

    def accumulate(self, batch) -> None:
        """Add one micro-batch's (clipped, if private) per-example gradient sum to the buffer."""
        if self._state != "accumulating":
            raise PrivacyInvariantError(f"DP step: accumulate() while {self._state}")
        if self.private:
            losses, clipped = self.clipped_per_example(batch)
            for view, g in zip(self._views, clipped):
                view.add_(g.sum(dim=0))
        else:
            losses = self._forward_backward(batch)
            for view, p in zip(self._views, self.params):
                view.add_(p.grad.float())
                p.grad = None
        self._stats[0] += losses.sum()
        self._stats[1] += losses.shape[0]
        self._stats[2] += batch["attention_mask"].sum().to(self._flat.device)
        self._tick("clipping")

    def finish(self) -> dict[str, float]:
        """All-reduce, add N(0, σ²C²) once (rank 0), divide by B, set `.grad`. Returns the step's
        totals over ranks: loss_sum, n_examples (realised batch size), n_tokens."""
        if self._state != "accumulating":
            raise PrivacyInvariantError(f"DP step: finish() while {self._state}; noise would be "
                                        "added twice or to no gradient")
        if self.private and self.dist.is_main:
            std = self.noise_multiplier * self.clip_norm
            noise = torch.empty(self._n, dtype=torch.float32, device=self._flat.device)
            noise.normal_(0.0, std, generator=self._gen)
            self._flat[:self._n].add_(noise)
            self._stats[3] += 1
            self._tick("noise")
        self.dist.all_reduce_sum(self._flat)
        self.last_noise_draws = int(self._stats[3].item())
        expected = 1 if self.private else 0
        if self.last_noise_draws != expected:
            raise PrivacyInvariantError(f"DP step: noise drawn {self.last_noise_draws} times in one "
                                        f"logical step, expected {expected}")
        self._flat[:self._n].div_(self.batch_size)
        self.last_divisor = self.batch_size
        for view, p in zip(self._views, self.params):
            p.grad = view.to(p.dtype) if p.dtype != torch.float32 else view
        self._state = "ready"
        return {"loss_sum": float(self._stats[0]), "n_examples": int(self._stats[1]),
                "n_tokens": int(self._stats[2])}

    def apply(self, optimizer, *, public_batch_size: float) -> None:
        """optimizer.step() on the finished gradient, then mark it used (it cannot be reused).

        `public_batch_size` is the plan's B as the caller knows it; a mismatch with the divisor
        used means the normalisation was not by the public constant."""
        if self._state != "ready":
            raise PrivacyInvariantError(f"DP step: optimizer step while {self._state}; the gradient "
                                        "has no noise yet or was already used")
        if self.last_divisor != float(public_batch_size):
            raise PrivacyInvariantError(f"DP step: gradient divided by {self.last_divisor}, not by "
                                        f"the plan's public B = {public_batch_size}")
        optimizer.step()
        self._tick("optimizer")
        for p in self.params:
            p.grad = None
        self._state = "idle"

    def close(self) -> None:
        """Remove the per-example hooks (the model is then a plain peft model again)."""
        if self.per_example == "opacus":
            self.module._close()
        elif self._sampler is not None:
            self._sampler.close()


PER_EXAMPLE = ("auto", "opacus", "hooks")


def resolve_per_example(spec: str, *, model, precision: str) -> str:
    """"auto" → "hooks" when the model uses gradient checkpointing or `precision` is bf16, else
    "opacus". Raises InputError for an unknown value or "opacus" with gradient checkpointing
    (Opacus's module hooks lose track of the recomputed forward: no per-example gradients)."""
    if spec not in PER_EXAMPLE:
        raise InputError(f"[training] per_example_grads: must be one of {', '.join(PER_EXAMPLE)}, not {spec!r}")
    from repoguard.training.memory import uses_gradient_checkpointing

    ckpt = uses_gradient_checkpointing(model)
    if spec == "auto":
        return "hooks" if ckpt or precision == "bf16" else "opacus"
    if spec == "opacus" and ckpt:
        raise InputError("[training] per_example_grads = \"opacus\" does not work with gradient_checkpointing; "
                         "use \"hooks\" (or \"auto\")")
    return spec


def check_per_example_support(model) -> None:
    """Refuse a model whose trainable parameters Opacus's hooks cannot give per-example gradients.

    Every parameter that requires grad must be a direct parameter of a module type with a registered
    grad sampler (`GradSampleModule.GRAD_SAMPLERS`: Linear, Embedding, LayerNorm, RMSNorm, Conv…).
    peft's LoRA adapters are `nn.Linear` and pass; peft's LoRA on an embedding keeps its factors in a
    `ParameterDict` that no sampler handles, and Opacus's functorch fallback silently leaves them
    without a per-example gradient. Raises InputError naming the first such module and what to do.
    """
    from opacus import GradSampleModule

    supported = tuple(GradSampleModule.GRAD_SAMPLERS)
    for mod_name, module in model.named_modules():
        for p_name, p in module.named_parameters(recurse=False):
            if p.requires_grad and not isinstance(module, supported):
                target = mod_name.split(".lora_")[0].rsplit(".", 1)[-1] if ".lora_" in mod_name else mod_name
                raise InputError(
                    f"model: trainable parameter {mod_name}.{p_name} sits in a "
                    f"{type(module).__name__}, for which Opacus computes no per-example gradient; "
                    f"drop {target!r} from --lora-targets (LoRA on Linear layers is supported: "
                    f"e.g. q_proj,v_proj, c_attn, query_key_value, qkv_proj)")


def flat_params(params: Sequence[torch.Tensor]) -> torch.Tensor:
    """All parameters as one detached fp32 vector (for comparisons in tests and checks)."""
    return torch.cat([p.detach().float().reshape(-1) for p in params])
