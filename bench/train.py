"""Throughput of DP-SGD vs the `--no-dp` baseline: same model, same LoRA, same sampler and batches.

    python bench/train.py                          # tiny Llama on CPU (the embedded default size)
    python bench/train.py --model-config llama-1b  # ~1.1 B Llama from its config, bf16, on CUDA

Both modes run the trainer's inner loop (weighted Poisson sampler → micro-batches → DPStep →
AdamW) over the same logical batches (same sampler seed); rounds alternate DP / no-DP so drift in
machine load hits both. Prints tokens/s of each, the ratio DP / no-DP (target ≥ 0.7) and, on
CUDA, peak GPU memory. Token ids are random (throughput does not depend on the text).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch

from repoguard.training.data import collate
from repoguard.training.dp_step import DPStep
from repoguard.training.model import TinyConfig, apply_lora
from repoguard.training.sampler import PoissonSampler, micro_batches

CONFIGS = {
    # Llama-3.2-1B-like shape (≈1.2 B parameters with a 128 k vocab; 32 k here ≈ 1.0 B).
    "llama-1b": dict(vocab_size=32000, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                     num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=4096),
}


def build(args, device):
    from transformers import LlamaConfig, LlamaForCausalLM

    if args.model_config:
        kw = CONFIGS.get(args.model_config)
        if kw is None:
            with open(args.model_config, encoding="utf-8") as fh:
                kw = json.load(fh)
    else:
        t = TinyConfig()
        kw = dict(vocab_size=t.vocab_size, hidden_size=t.hidden_size, intermediate_size=t.intermediate_size,
                  num_hidden_layers=t.num_layers, num_attention_heads=t.num_heads,
                  num_key_value_heads=t.num_heads, max_position_embeddings=max(t.max_position, args.max_length))
    cfg = LlamaConfig(**kw)
    cfg._attn_implementation = "sdpa" if device.type == "cuda" else "eager"
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    with torch.device(device):
        model = LlamaForCausalLM(cfg).to(dtype)
    model = apply_lora(model, r=args.lora_r, alpha=2 * args.lora_r, dropout=0.0, seed=0)
    n_all = sum(p.numel() for p in model.parameters())
    n_lora = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return model, cfg.vocab_size, n_all, n_lora


def run_steps(dp: DPStep, opt, sampler, seqs, lengths, args, steps: int) -> tuple[int, float, float]:
    """Runs `steps` logical steps; returns (tokens, wall seconds, process CPU seconds)."""
    tokens = 0
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        dp.begin()
        for mb in micro_batches(sampler.sample(), args.micro_batch_size, lengths):
            batch = collate([seqs[i] for i in mb], pad_id=0)
            tokens += int(batch["attention_mask"].sum())
            dp.accumulate(batch)
        dp.finish()
        dp.apply(opt, public_batch_size=args.batch_size)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return tokens, time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-config", default=None, help="llama-1b or a JSON file of LlamaConfig kwargs")
    ap.add_argument("--examples", type=int, default=512)
    ap.add_argument("--batch-size", type=float, default=32.0, help="expected batch size B")
    ap.add_argument("--micro-batch-size", type=int, default=16)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--lora-r", type=int, default=8)
    ap.add_argument("--steps", type=int, default=4, help="steps per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    model, vocab, n_all, n_lora = build(args, device)
    rng = np.random.default_rng(0)
    lengths = rng.integers(args.max_length // 2, args.max_length + 1, size=args.examples)
    seqs = [rng.integers(3, vocab, size=n).astype(np.int64) for n in lengths]
    w = rng.uniform(0.2, 1.0, size=args.examples)
    rho = args.batch_size * w / w.sum()

    results = {"dp": [], "no_dp": []}
    ratios, cpu_ratios = [], []
    for rnd in range(args.rounds + 1):
        order = ("dp", "no_dp") if rnd % 2 else ("no_dp", "dp")    # alternate who goes first
        tps, cps = {}, {}
        for mode in order:
            sampler = PoissonSampler(rho, seed=rnd)  # same batches for both modes in a round
            private = mode == "dp"
            gen = torch.Generator(device=device).manual_seed(1) if private else None
            dp = DPStep(model, clip_norm=1.0, noise_multiplier=1.0, batch_size=args.batch_size,
                        noise_generator=gen, private=private)
            opt = torch.optim.AdamW(dp.params, lr=1e-4)
            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
            tok, sec, cpu = run_steps(dp, opt, sampler, seqs, lengths, args, 1 if rnd == 0 else args.steps)
            dp.close()
            tps[mode], cps[mode] = tok / sec, tok / cpu
            mem = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None
            if rnd > 0:                                # round 0 is warm-up
                results[mode].append((tok / sec, mem))
        if rnd > 0:
            ratios.append(tps["dp"] / tps["no_dp"])
            cpu_ratios.append(cps["dp"] / cps["no_dp"])
    dp_tps = statistics.median(r[0] for r in results["dp"])
    base_tps = statistics.median(r[0] for r in results["no_dp"])
    out = {
        "device": str(device), "model_config": args.model_config or "tiny (embedded default)",
        "parameters": n_all, "lora_parameters": n_lora, "B": args.batch_size,
        "micro_batch_size": args.micro_batch_size, "max_length": args.max_length,
        "dp_tokens_per_s": round(dp_tps, 1), "no_dp_tokens_per_s": round(base_tps, 1),
        "ratio_dp_over_no_dp": round(statistics.median(ratios), 3),   # median of per-round ratios
        "ratio_per_round": [round(r, 3) for r in ratios], "target_ratio": 0.7,
        # CPU-time ratio: robust when other processes share the cores (wall time is not).
        "ratio_cpu_time": round(statistics.median(cpu_ratios), 3),
        "threads": torch.get_num_threads(),
    }
    if torch.cuda.is_available():
        out["peak_gpu_memory_gib"] = {"dp": round(max(r[1] for r in results["dp"]), 2),
                                      "no_dp": round(max(r[1] for r in results["no_dp"]), 2)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
