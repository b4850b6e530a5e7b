"""Sensitivity for reviewers. Takes the analysis (which files carry which secret) and writes the
committed manifest `.repoguard/sensitive.toml` (kept by the pre-commit tag hook) and candidate
secrets for `repoguard.toml` (`suggest`); hands nothing downstream: people read it.

    tag               the manifest and the hook that reports files whose sensitivity changed
    suggest           codenames and silos ranked from the analysis, with their evidence
    suggest_lexicon   the offline word lists that keep ordinary words out of `suggest`
"""
