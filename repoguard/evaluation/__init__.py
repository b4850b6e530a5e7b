"""What the fine-tuned model learned, measured on examples it never saw.

Modules, in the order data flows through them:
    split      the held-out split by file (salted path hash): ρ = 0, never in a batch; slices
    metrics    token cross-entropy, perplexity, top-1 accuracy, line-completion exact match
    compare    the `repoguard compare` arms (hush, hush-kl, hush-gdp, uniform, drop, no-dp)

The held-out metrics are computed from private text (secret-tied test examples included): they
are operator-facing numbers about the model, not covered by the per-secret DP bound, and are
never written into the adapter.
"""
