"""Takes a trained model (or trains measurement models in memory) and the plan; writes
`OUT/audit/`; hands the figures to `report`.

What the trained model memorised: canary exposure and k-extractable memorisation.

Modules, in the order data flows through them:
    canary_exposure  the maths: exposure from a rank, the sampled rank, the skew-normal
                     extrapolation, and the DP tail bound P[exposure ≥ e] ≤ r(2^-e)
                     (Carlini et al. 2019; Hush Lemma 3.2)
    runs             a DP run and a --no-dp run with identical settings (the training stage's
                     functions), kept in memory: audit models are measurements, never published
    scoring          log-perplexity of texts and greedy continuations under a trained model
    canaries         canary format, insertion into a secret's examples, the exposure audit
    extraction       k-extractable memorisation per secret (Carlini et al. 2023; Hush §5.2)
"""
