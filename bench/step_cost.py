"""CPU seconds per DP-SGD step of the embedded tiny base and of the real base (issue 44 item 8).

    nice -n 10 python bench/step_cost.py                       # tiny and smollm2-135m, B 8, L 64 and 128
    nice -n 10 python bench/step_cost.py --bases tiny --batch-size 16 --lengths 256

Each step is one logical DP-SGD step as the trainer runs it (`DPStep`: per-example gradients of the
LoRA parameters, clipping to C, Gaussian noise, AdamW) on exactly B examples of L tokens (random
ids: the cost does not depend on the text), micro-batches of `--micro-batch-size`. The model is
loaded as `repoguard train` loads it (the embedded base, or `--model smollm2-135m`, which must
have been fetched: `repoguard model fetch smollm2-135m`), LoRA on the same targets, one torch
thread (`limit_cpu_threads`) unless OMP_NUM_THREADS says otherwise. One warm-up step, then
`--steps` timed steps: the median process CPU seconds and wall seconds per step, with the load
average (`os.getloadavg`) before and after — on a shared machine wall time depends on the load,
CPU time much less.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
import torch


def load(base: str, max_length: int):
    from repoguard.training.base_model import embedded_base
    from repoguard.training.model import TINY_LORA_TARGETS, apply_lora, limit_cpu_threads, load_model

    dev = torch.device("cpu")
    limit_cpu_threads(dev)
    if base == "tiny":
        model, tok = embedded_base(max_length=max_length, show_progress=False)
        targets = TINY_LORA_TARGETS
    else:
        model, tok = load_model(base, device=dev, bf16=False)
        targets = ()
    model = apply_lora(model, r=8, alpha=16, dropout=0.0, targets=targets, seed=0)
    return model, tok


def measure(model, vocab: int, *, batch_size: int, length: int, micro: int, steps: int) -> dict:
    from repoguard.training.data import collate
    from repoguard.training.dp_step import DPStep

    rng = np.random.default_rng(0)
    dp = DPStep(model, clip_norm=1.0, noise_multiplier=1.0, batch_size=float(batch_size),
                noise_generator=torch.Generator().manual_seed(0), private=True)
    opt = torch.optim.AdamW(dp.params, lr=1e-4)
    cpu, wall = [], []
    for k in range(steps + 1):
        seqs = [rng.integers(3, vocab, size=length).astype(np.int64) for _ in range(batch_size)]
        c0, t0 = time.process_time(), time.perf_counter()
        dp.begin()
        for i in range(0, batch_size, micro):
            dp.accumulate(collate(seqs[i:i + micro], pad_id=0))
        dp.finish()
        dp.apply(opt, public_batch_size=float(batch_size))
        if k:                                    # step 0 is warm-up
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - t0)
    dp.close()
    return {"B": batch_size, "L": length, "micro_batch_size": micro, "steps": steps,
            "cpu_s_per_step": round(statistics.median(cpu), 3), "wall_s_per_step": round(statistics.median(wall), 3),
            "cpu_s_per_step_all": [round(x, 3) for x in cpu], "per_example": dp.per_example}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bases", default="tiny,smollm2-135m", help="comma-separated: tiny, smollm2-135m or a DIR")
    ap.add_argument("--batch-size", type=int, default=8, help="examples per step (B)")
    ap.add_argument("--lengths", default="64,128", help="comma-separated sequence lengths L (tokens)")
    ap.add_argument("--micro-batch-size", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3, help="timed steps per setting (after one warm-up)")
    args = ap.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    out = {"load_before": [round(x, 2) for x in os.getloadavg()], "threads": None, "runs": []}
    for base in args.bases.split(","):
        c0, t0 = time.process_time(), time.perf_counter()
        model, tok = load(base, max(lengths))
        loaded = {"load_cpu_s": round(time.process_time() - c0, 1), "load_wall_s": round(time.perf_counter() - t0, 1)}
        out["threads"] = torch.get_num_threads()
        n_all = sum(p.numel() for p in model.parameters())
        for L in lengths:
            r = measure(model, len(tok), batch_size=args.batch_size, length=L, micro=args.micro_batch_size,
                        steps=args.steps)
            out["runs"].append({"base": base, "parameters": n_all, **loaded, **r})
            print(json.dumps(out["runs"][-1]), flush=True)
        del model
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
