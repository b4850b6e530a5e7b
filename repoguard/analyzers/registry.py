"""The analyzers `repoguard analyze` runs, as objects, in the order it runs them: a name that
names nothing fails at import, not when a run first asks for it.

Adding an analyzer is a module defining an `ANALYZER` (protocol.Analyzer) and one line in
`ANALYZERS` below. Imported only where analyzers run (analyze.py, explain.py): importing every
analyzer module costs the pre-commit hook, which loads only the ones it needs.
"""
from __future__ import annotations

from repoguard.analyzers import cochange, codenames, credentials, declared, imports, ownership
from repoguard.analyzers.protocol import Analyzer

# Run in this order: declared first (the others propagate from its files). The order is also the
# order of the evidence rows in OUT/incidence/ and of an explanation's rows (explain.py).
ANALYZERS: tuple[Analyzer, ...] = (
    declared.ANALYZER,
    imports.ANALYZER,
    ownership.ANALYZER,
    cochange.ANALYZER,
    codenames.ANALYZER,
    credentials.ANALYZER,
)

REGISTRY: dict[str, Analyzer] = {a.name: a for a in ANALYZERS}
if len(REGISTRY) != len(ANALYZERS):  # two analyzers of one name would write indistinguishable rows
    raise RuntimeError(f"analyzer names are not unique: {[a.name for a in ANALYZERS]}")
