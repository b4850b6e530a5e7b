"""The plan. Takes `OUT/incidence/` (the incidence: examples × secrets, with each secret's (p, r))
and the ledger's spending (`accounting`); writes `OUT/plan/` (weights w, ρ, σ, B, T, C, c and
every secret's certified bound, the undetected floor's); hands the plan to `training`.

    weighting    the LP of Hush eq. 1 (OR-Tools GLOP/PDLP) and the sweep over c
    batch_rule   the default B and T from the number of untied examples
    undetected   the undetected-secret floor as one more certified target
    plan         weights → ρ → σ from `accounting.calibrate`; plan.json/plan.npz with a digest
    make         the one path `plan` and `run` take: settings, inputs, ledger, targets → plan/
    retention    what the weighting keeps, per secret and per top-level directory
    summary      what `plan` prints and `plan --json` returns
"""
