"""Takes `OUT/plan/` (ρ, σ, B, T, C) and the redacted example texts; writes `OUT/train/`
(the LoRA adapter, train_log.jsonl, the privacy report) and a ledger entry; hands the model to
`audit` and `evaluation`.

Weighted-Poisson DP-SGD LoRA fine-tuning (Hush Alg. 2 lines 6–11).

Modules, in the order data flows through them:
    sampler   weighted Poisson sampling: example i joins each logical batch with probability ρ_i
    data      examples → redacted text → token ids (≤ max_length) → padded micro-batches
    model     local Hugging Face causal LM or the embedded tiny Llama + LoRA (peft)
    dp_step   per-example gradients (Opacus hooks), clip to C, sum, noise once, divide by B
    ddp       torchrun / torch.distributed helpers (noise on rank 0, one all-reduce per step)
    guard     the ledger checks around a run (refuse a stale plan, record what was spent)
    trainer   the loop: progress, train_log.jsonl, atomic checkpoints, exact resume
    phases    two-phase fine-tuning (clear or noised phase 1)

(The `repoguard train` stage that strings these together with held-out evaluation is
`pipeline.train_stage`: it uses `evaluation`, which sits above this package.)
"""
