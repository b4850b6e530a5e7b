"""The stage runner behind `repoguard run`. Takes a checkout, its config and the run's settings;
calls each stage in order (credentials → analyzers → planning → training → audit → report),
skipping what is unchanged; writes `OUT/run_state.json` (and `OUT/runs/*` for scheduled runs);
hands the run's summary to `commands`.

    registry      the stages as registered objects, in pipeline order
    context       RunSettings, the Context every stage sees, input digests, run_state.json
    stages        the six stages as inputs/execute/outputs/describe
    train_stage   the train stage: plan + corpus → model, LoRA, trainer (+ held-out evaluation) → OUT/train/
    runner        run_pipeline: the order, the skips, re-planning when the ledger moved
    scheduled     scheduled runs: the run lock, one directory per night, the budget fraction
"""
