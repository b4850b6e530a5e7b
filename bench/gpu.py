"""The GPU path measured: DP-SGD against `--no-dp` on a ~1B-parameter code model, bf16.

    python bench/gpu.py                     # CUDA: ~1.3 B DeepSeek-Coder-1.3B-shaped Llama, L = 2,048 and 512
    python bench/gpu.py --lengths 2048 --gradient-checkpointing
    python bench/gpu.py --smoke             # tiny config on the CPU: exercises the code, measures nothing

The model is built from its config with random weights (nothing downloads); base weights bf16,
LoRA (r = 16 on q/k/v/o) fp32 master copies, forward under bf16 autocast
(`repoguard.training.precision`). For each sequence length every example is that long, the
micro-batch is the largest that fits (`repoguard.training.memory.probe_micro_batch`, probed in DP
mode, used by both arms), and the DP and no-DP arms run the same weighted Poisson batches (same
sampler seed) in one process, alternating rounds. Printed per length: tokens/s of each arm and
their ratio (target: DP ≥ 0.8× at 2,048), peak GPU memory, and the mean per-step time of
forward, backward, clipping (per-example gradients, norms, clipped sum), noise, optimizer, timed
with CUDA events. Without CUDA (and without --smoke) it exits with one line.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np
import torch

PHASES = ("data", "forward", "backward", "clipping", "noise", "optimizer")
CONFIGS = {
    # DeepSeek-Coder-1.3B's shape (Llama architecture): ≈1.35 B parameters.
    "deepseek-coder-1.3b": dict(vocab_size=32256, hidden_size=2048, intermediate_size=5504, num_hidden_layers=24,
                                num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=4096),
    "smoke": dict(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128),
}


class PhaseTimer:
    """`timer(phase)` charges the time since the previous mark to `phase`: CUDA events on a GPU
    (read once per step, after a synchronise), perf_counter on the CPU."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.totals = dict.fromkeys(PHASES, 0.0)
        self._marks: list[tuple[str, object]] = []

    def _now(self):
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def start(self) -> None:
        self._marks = [("", self._now())]

    def __call__(self, phase: str) -> None:
        self._marks.append((phase, self._now()))

    def flush(self) -> None:
        """Add the marks since `start` to the totals (seconds)."""
        if self.cuda:
            torch.cuda.synchronize()
        for (_, a), (phase, b) in zip(self._marks, self._marks[1:]):
            self.totals[phase] += a.elapsed_time(b) / 1e3 if self.cuda else b - a
        self._marks = []


def build(name: str, *, device, lora_r: int, precision: str, checkpointing: bool):
    from transformers import LlamaConfig, LlamaForCausalLM

    from repoguard.training.memory import enable_gradient_checkpointing
    from repoguard.training.model import apply_lora
    from repoguard.training.precision import prepare_model

    cfg = LlamaConfig(**CONFIGS[name])
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16 if precision == "bf16" else torch.float32)
    model = apply_lora(model.eval(), r=lora_r, alpha=2 * lora_r, dropout=0.0,
                       targets=("q_proj", "k_proj", "v_proj", "o_proj"), seed=0)
    prepare_model(model, precision)
    if checkpointing:
        enable_gradient_checkpointing(model)
    return model, cfg.vocab_size


def run_arm(model, *, private: bool, sampler, seqs, micro: int, batch_size: float, steps: int, precision: str,
            device, timer: PhaseTimer | None) -> tuple[int, float, float | None]:
    """`steps` logical steps of one arm → (tokens, seconds, peak GiB or None)."""
    from repoguard.training.data import collate
    from repoguard.training.dp_step import DPStep
    from repoguard.training.sampler import micro_batches

    cuda = device.type == "cuda"
    gen = torch.Generator(device=device).manual_seed(1) if private else None
    dp = DPStep(model, clip_norm=1.0, noise_multiplier=1.0, batch_size=batch_size, noise_generator=gen,
                private=private, precision=precision)
    dp.timer = timer
    opt = torch.optim.AdamW(dp.params, lr=1e-5)
    lengths = np.array([len(s) for s in seqs])
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    tokens, t0 = 0, time.perf_counter()
    try:
        for _ in range(steps):
            if timer is not None:
                timer.start()
            dp.begin()
            for mb in micro_batches(sampler.sample(), micro, lengths):
                batch = collate([seqs[i] for i in mb], pad_id=0)
                tokens += int(batch["attention_mask"].sum())
                if timer is not None:
                    timer("data")
                dp.accumulate(batch)
            dp.finish()
            dp.apply(opt, public_batch_size=batch_size)
            if timer is not None:
                timer.flush()
        if cuda:
            torch.cuda.synchronize()
    finally:
        dp.close()
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
    return tokens, time.perf_counter() - t0, peak


def pick_micro(model, *, seq, batch_size: float, precision: str, device, fixed: int) -> int:
    """The largest micro-batch that fits (CUDA probe in DP mode), else `fixed`."""
    from repoguard.training.data import collate
    from repoguard.training.dp_step import DPStep
    from repoguard.training.memory import batch_cap, probe_micro_batch

    if fixed > 0 or device.type != "cuda":
        return fixed if fixed > 0 else 4
    dp = DPStep(model, clip_norm=1.0, noise_multiplier=1.0, batch_size=batch_size,
                noise_generator=torch.Generator(device=device), precision=precision)
    try:
        def run_one(n: int) -> None:
            dp.clipped_per_example(collate([seq] * n, pad_id=0))
            for p in dp.params:
                p.grad = None
        return probe_micro_batch(run_one, device=device, cap=batch_cap(batch_size))
    finally:
        dp.close()


def bench_length(model, vocab: int, length: int, args, device, precision: str) -> dict:
    from repoguard.training.sampler import PoissonSampler

    rng = np.random.default_rng(length)
    seqs = [rng.integers(3, vocab, size=length).astype(np.int64) for _ in range(args.examples)]
    w = rng.uniform(0.2, 1.0, size=args.examples)
    rho = args.batch_size * w / w.sum()
    micro = pick_micro(model, seq=seqs[0], batch_size=args.batch_size, precision=precision, device=device,
                       fixed=args.micro_batch_size)
    cuda = device.type == "cuda"
    res = {arm: {"tokens": 0, "seconds": 0.0, "peak": 0.0, "steps": 0} for arm in ("dp", "no_dp")}
    timers = {arm: PhaseTimer(cuda) for arm in res}
    ratios = []
    for rnd in range(args.rounds + 1):                 # round 0 warms up (kernels, allocator)
        order = ("dp", "no_dp") if rnd % 2 else ("no_dp", "dp")
        tps = {}
        for arm in order:
            sampler = PoissonSampler(rho, seed=rnd)    # the same batches for both arms
            steps = 1 if rnd == 0 else args.steps
            tok, sec, peak = run_arm(model, private=arm == "dp", sampler=sampler, seqs=seqs, micro=micro,
                                     batch_size=args.batch_size, steps=steps, precision=precision,
                                     device=device, timer=timers[arm] if rnd else None)
            tps[arm] = tok / sec
            if rnd:
                r = res[arm]
                r["tokens"] += tok
                r["seconds"] += sec
                r["steps"] += steps
                r["peak"] = max(r["peak"], peak or 0.0)
        if rnd:
            ratios.append(tps["dp"] / tps["no_dp"])
    out = {"length": length, "micro_batch_size": micro}
    for arm, r in res.items():
        out[arm] = {"tokens_per_s": round(r["tokens"] / r["seconds"], 1),
                    "peak_gpu_gib": round(r["peak"], 2) if cuda else None,
                    "ms_per_step": {k: round(1e3 * v / r["steps"], 2) for k, v in timers[arm].totals.items()}}
    out["ratio_dp_over_no_dp"] = round(statistics.median(ratios), 3)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="tiny config on the CPU (exercise the code path)")
    ap.add_argument("--config", default="deepseek-coder-1.3b", choices=sorted(CONFIGS))
    ap.add_argument("--lengths", default=None, help="comma-separated sequence lengths (default 2048,512)")
    ap.add_argument("--batch-size", type=float, default=64.0, help="expected batch size B")
    ap.add_argument("--micro-batch-size", type=int, default=0, help="0 = largest that fits (probed)")
    ap.add_argument("--examples", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=3, help="logical steps per arm per round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--gradient-checkpointing", action="store_true")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    args = ap.parse_args(argv)
    if args.smoke:
        args.config, args.batch_size, args.examples = "smoke", 6.0, 24
        args.lengths = args.lengths or "64,32"
        args.steps, args.rounds, args.lora_r = 1, 1, 4
        args.micro_batch_size = args.micro_batch_size or 4
        device, precision = torch.device("cpu"), "bf16"     # CPU autocast: the same code path
    elif not torch.cuda.is_available():
        print("bench/gpu.py: CUDA is not available; run it on a GPU machine (or pass --smoke to "
              "exercise it on the CPU)", file=sys.stderr)
        return 2
    else:
        from repoguard.training.precision import resolve_precision

        device = torch.device("cuda")
        precision = resolve_precision("auto", device)
    args.lengths = args.lengths or "2048,512"
    model, vocab = build(args.config, device=device, lora_r=args.lora_r, precision=precision,
                         checkpointing=args.gradient_checkpointing)
    head = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (smoke)",
            "config": args.config, "parameters": sum(p.numel() for p in model.parameters()),
            "lora_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
            "precision": precision, "gradient_checkpointing": args.gradient_checkpointing,
            "B": args.batch_size, "target_ratio_at_2048": 0.8}
    rows = [bench_length(model, vocab, int(n), args, device, precision) for n in args.lengths.split(",")]
    print(f"{head['device']}: {args.config} ({head['parameters'] / 1e9:.2f} B params, "
          f"{head['lora_parameters'] / 1e6:.2f} M LoRA), {precision}, B = {args.batch_size:g}, "
          f"checkpointing {'on' if args.gradient_checkpointing else 'off'}")
    print(f"{'L':>5} {'mb':>3} {'DP tok/s':>10} {'no-DP tok/s':>11} {'ratio':>6} {'DP GiB':>7} {'noDP GiB':>8}  "
          "DP ms/step: " + " ".join(f"{p}" for p in PHASES))
    for r in rows:
        gib = [r[a]["peak_gpu_gib"] for a in ("dp", "no_dp")]
        print(f"{r['length']:>5} {r['micro_batch_size']:>3} {r['dp']['tokens_per_s']:>10.1f} "
              f"{r['no_dp']['tokens_per_s']:>11.1f} {r['ratio_dp_over_no_dp']:>6.3f} "
              f"{'-' if gib[0] is None else gib[0]:>7} {'-' if gib[1] is None else gib[1]:>8}  "
              + " ".join(f"{r['dp']['ms_per_step'][p]:.1f}" for p in PHASES))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({**head, "rows": rows}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
