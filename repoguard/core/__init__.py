"""What every stage stands on. Takes nothing from other packages; every package imports it.

    config       the typed `repoguard.toml` (errors name file, line, key), the default (p, r)
    settings     a command's settings resolved once, each with its source (flag, file, default)
    artefacts    atomic writes (temp file, then rename), output directories, the user cache
    errors       InputError (exit 2), PolicyError (exit 1): one line, never a traceback
    progress     rich progress for long loops, silent under -q or without a terminal
    provenance   digests of the config, corpus and incidence a plan was made from
"""
