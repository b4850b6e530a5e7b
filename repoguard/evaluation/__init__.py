"""Takes the plan, the corpus and trained models; writes held-out metrics and `OUT/compare/`;
hands them to `report`.

What the fine-tuned model learned, measured on examples it never saw.

Modules, in the order data flows through them:
    metrics    token cross-entropy, perplexity, top-1 accuracy, line-completion exact match
    periodic   the held-out evaluation every `eval_every` steps during training
    protection every compare arm planned at equal protection (targets, floor, ledger snapshot)
    compare    the `repoguard compare` arms (hush, hush-kl, hush-gdp, uniform, drop-dp, drop, no-dp, two-phase…)

(The split itself is `source.split`: planning gives held-out examples ρ = 0 before any training.)

The held-out metrics are computed from private text (secret-tied test examples included): they
are operator-facing numbers about the model, not covered by the per-secret DP bound, and are
never written into the adapter.
"""
