"""The checkout as data. Takes a git working tree (or a plain directory) and `[corpus]`; writes
`OUT/corpus/` (examples); hands the examples to `credentials` (what to scan and redact) and to
`analyzers` (what to tie to secrets).

    gitrepo   all git access: tracked files with blob SHAs, one streamed `git log -z`, the staged change
    corpus    files → examples (chunks), filters (binary, huge, generated, vendored), dedup
    split     the held-out split by file (salted path hash): ρ = 0, never in a batch
"""
