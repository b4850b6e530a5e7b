"""SecPE synthetic data [SecPE Alg. 1–3, Thm. 2]: a corpus whose declared secrets keep their
per-secret (p, r) guarantee, made by a generator that never sees private text.

Public examples (tied to no secret, not held out, credentials redacted) form K-means anchors in
the clear (`anchors.py`); private examples (tied to a secret) move them only through noisy
statistics ñ_k = n_k + m_k + N(0, σ²) and noisy sums (`clustering.py`) whose σ per round comes from
the LP with GDP caps and the accountant (`noise.py`); each round the generator's candidates vote
by nearest noisy anchor and the top N_syn survive with L variations each (`rounds.py`). The
generator and embedding backends are in `generators.py` and `embedding.py`; the stage behind
`repoguard synth` in `synthesize.py`.
"""
