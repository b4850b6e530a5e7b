"""The analysis. Takes the examples (`source`), the findings (`credentials`) and the secrets of
`repoguard.toml`; writes `OUT/incidence/` (the incidence E: examples × secrets, with evidence);
hands it to `planning` (and to `tagging`, `explain`).

Evidence sources: each analyzer ties files to secrets and says why.

An analyzer is an object of the `Analyzer` protocol (protocol.py): a `name`, whether it keeps a
`cache` (a dict persisted by `repoguard analyze`, keyed by blob SHA, to skip unchanged files on a
re-run), and `run(repo, corpus, config, *, cache) -> (evidence, secrets)`, where `secrets` are
the ones it discovered itself (credentials; empty for the others). Adding an analyzer is adding
a module that defines `ANALYZER` and one line to `registry.ANALYZERS`, which sets the order they
run in.
"""
