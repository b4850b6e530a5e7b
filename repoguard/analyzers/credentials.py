"""credentials — a file holding a detected credential carries that credential as a secret.

The scan is the credentials package's (rules/*.toml, Hyperscan/RE2 engine; `[scan]` config).
Each distinct credential (by the keyed hash of its value, HMAC-SHA256 under the repository's
fingerprint key: the same key pasted in three files is one secret) becomes a Secret of kind
"credential" with id `credential:RULE:HMAC12`. Its prior p is
the probability of guessing it, 2^−bits with bits = Shannon entropy per character × length
[Shannon 1948; seed paper 002's "secrecy"], floored at `[defaults] p` (a larger prior is the
conservative side); r is `[defaults] r`. The credential text is redacted from training examples
by the corpus/training stages; the secret makes the plan bound what leaks around it too. Each
Evidence carries the credential's byte span, so the secret ties only the examples (chunks) whose
text held it, not every chunk of the file. Values never appear in evidence: only the redacted
form (`****(N chars)`, no character of the value).
"""
from __future__ import annotations

from typing import Iterator, MutableMapping

from repoguard.analyzers import _files
from repoguard.analyzers.incidence import Evidence, Secret
from repoguard.analyzers.protocol import Found

NAME = "credentials"


def secret_id(finding) -> str:
    """`credential:RULE:H12`, H12 = the first 12 hex digits of the finding's keyed hash (HMAC
    under the repository's fingerprint key, credentials.keys): published in the incidence, plan,
    ledger and `sensitive.toml`, it lets nobody test guesses of the value offline."""
    return f"credential:{finding.rule_id}:{finding.secret_hmac[:12]}"


def guess_bits(finding) -> float:
    """Estimated entropy of the credential in bits: per-character Shannon entropy × length.
    The length is the span of the match (`end − start`, bytes); path-only findings get 0."""
    return max(0.0, float(finding.entropy)) * max(0, finding.end - finding.start)


def prior(finding, floor: float) -> float:
    """p = max(2^−bits, floor)."""
    return max(2.0 ** -guess_bits(finding), floor)


def target(p: float, r: float) -> float:
    """r, or for a guessable credential whose prior p ≥ r (e.g. "1234": p = 2^-8 > r = 1e-3) the
    additive lift p + r·(1 − p): no training can push success below the prior, so the promise
    becomes "the model raises it by at most r" (keeps 0 < p < r < 1 for the calibration)."""
    return r if p < r else p + r * (1.0 - p)


def _span(finding) -> tuple[int, int] | None:
    """The finding's byte range in its file (ties only the examples holding it), or None for a
    path-only finding (a `.p12` file: every example of the file)."""
    return (finding.start, finding.end) if finding.end > finding.start else None


def scan(repo, paths, config, *, names: bool = False):
    """Findings of the credential scan over `paths` (working tree), sorted by (path, line).
    `names`: also the file names' credentials, and paths shown redacted (for display, as
    `suggest` lists them); False (`analyze`): contents only, under the real paths the incidence
    ties (a path's credential is in no training text; the example ids redact it)."""
    from repoguard.credentials.keys import repo_key
    from repoguard.credentials.redact import scan_ruleset
    from repoguard.credentials.scan import Scanner

    scanner = Scanner(scan_ruleset(repo.root, config.scan), max_file_bytes=config.scan.max_file_bytes,
                      key=repo_key(repo.root))
    return scanner.scan_files(str(repo.root), sorted(paths), names=names).findings


def scan_blobs(repo, files, config) -> Iterator[Evidence]:
    """Evidence for `files` (path → blob SHA) scanned from their blobs (the index's content, as
    the pre-commit hook needs), one process, no pool."""
    from repoguard.credentials.engine import Engine
    from repoguard.credentials.keys import repo_key
    from repoguard.credentials.redact import scan_ruleset

    engine = Engine.build(scan_ruleset(repo.root, config.scan), key=repo_key(repo.root))
    for path, data in _files.read_sources(repo, files):
        if engine.path_allowed(path) or b"\0" in data[:8000]:
            continue  # allowlisted path, or binary (git's test), as the file scan does
        for f in sorted(engine.scan(data[:config.scan.max_file_bytes], path), key=lambda f: (f.line, f.rule_id)):
            yield Evidence(path, secret_id(f), NAME, f"{f.rule_id} credential {f.redacted} at line {f.line}",
                           span=_span(f))


def analyze(repo, corpus, config) -> Found:
    """Evidence for every credential the scan finds in the corpus files' contents (one row per
    finding, with its byte span), and one Secret per distinct credential in first-seen order:
    p = `prior` (floored at `[defaults] p`), r = `target(p, [defaults] r)`."""
    found: dict[str, Secret] = {}
    evidence: list[Evidence] = []
    for f in scan(repo, _files.corpus_files(corpus), config):
        sid = secret_id(f)
        if sid not in found:
            p = prior(f, config.defaults.p)
            found[sid] = Secret(sid, "credential", p, target(p, config.defaults.r),
                                f"{f.rule_id} credential {f.redacted} (~{guess_bits(f):.0f} bits)")
        evidence.append(Evidence(f.path, sid, NAME, f"{f.rule_id} credential {f.redacted} at line {f.line}",
                                 span=_span(f)))
    return Found(evidence, list(found.values()))


class CredentialAnalyzer:
    """The `Analyzer` of detected credentials: it discovers its secrets (`analyze`); it keeps no
    cache in OUT/cache/analyzers.json, so every run scans every corpus file."""

    name = NAME
    cached = False

    def run(self, repo, corpus, config, *, cache: MutableMapping | None = None) -> Found:
        """`analyze(repo, corpus, config)`; `cache` is unused."""
        return analyze(repo, corpus, config)


ANALYZER = CredentialAnalyzer()
