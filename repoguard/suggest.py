"""Secret discovery: candidate secrets for `repoguard.toml`, each with its evidence.

The Hush paper leaves "what are the secrets" to the user; `repoguard suggest` proposes, the user
reviews and pastes — nothing is declared silently. Three kinds of candidates:

- **ownership silo**: a CODEOWNERS line whose files are changed almost only by people who work
  mostly there. For the files F a line decides, with history (history.py): an author is an
  *insider* when ≥ 50 % of their revisions touch F; `closure` = share of F's revisions made by
  insiders; `fragmentation` = 1 − Σ_a (n_a/n)² over F's revisions (D'Ambros et al. 2009). A silo
  has closure ≥ `min_closure` (0.8), ≥ `min_revisions` (5) revisions, at most `max_authors` (5)
  authors, and is not a catch-all (`*`) line.
- **codename**: a capitalised word that is never written in lower case in prose or commit
  messages (nor as part of a hyphenated name), occurs in ≥ 2 commit messages or files, and whose files concentrate under one folder (≥ 60 % of them). Ordinary
  words (codenames.STOPLIST, spaCy's English stop words) are skipped.
- **credential**: each distinct credential the scanner finds, with the prior p = 2^−bits, bits =
  per-character Shannon entropy × length [Shannon 1948; seed paper 002's "secrecy"].

Candidates already covered by a declared secret are reported with `covered_by` and left out of
the snippet.
"""
from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field

from repoguard.analyzers import _files, codeowners
from repoguard.analyzers.codenames import STOPLIST, prose
from repoguard.analyzers.history import load_history


@dataclass
class Candidate:
    """One proposed secret: `kind` silo | codename | credential; `snippet` is TOML."""

    kind: str
    id: str
    paths: list[str] = field(default_factory=list)
    owners: list[str] = field(default_factory=list)
    codenames: list[str] = field(default_factory=list)
    p: float | None = None
    r: float | None = None
    evidence: list[str] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)
    covered_by: list[str] = field(default_factory=list)


def _slug(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()
    return s or "secret"


def _covered(config, files: list[str]) -> list[str]:
    return sorted({s.id for s in config.secrets for p in _files.secret_files(s, files)}) if files else []


# -- ownership silos --------------------------------------------------------------------------------
def silos(repo, config, files: list[str], *, min_closure: float = 0.8, min_revisions: int = 5,
          max_authors: int = 5) -> list[Candidate]:
    co = codeowners.load(repo)
    if co is None:
        return []
    hist = load_history(repo)
    total_by_author: Counter = Counter()
    for c in hist.revisions.values():
        total_by_author.update(c)
    decided: dict[int, list[str]] = defaultdict(list)
    for path in files:
        rule = co.match(path)
        if rule is not None and rule.owners and rule.pattern not in ("*", "/*", "**", "/**"):
            decided[rule.line].append(path)
    rules = {r.line: r for r in co.rules}
    out = []
    for line, fs in sorted(decided.items()):
        rule = rules[line]
        revs: Counter = Counter()
        for p in fs:
            revs.update(hist.revisions.get(p, {}))
        n = sum(revs.values())
        if n < min_revisions or len(revs) > max_authors:
            continue
        insiders = sorted(a for a, k in revs.items() if k / total_by_author[a] >= 0.5)
        closure = sum(revs[a] for a in insiders) / n
        if closure < min_closure:
            continue
        frag = 1.0 - sum((k / n) ** 2 for k in revs.values())
        pattern = rule.pattern.lstrip("/")
        path_glob = pattern + "**" if pattern.endswith("/") else pattern
        out.append(Candidate(
            kind="silo", id=_slug(rule.owners[0].split("/")[-1]) + "-owned", paths=[path_glob],
            owners=list(rule.owners),
            evidence=[f"{co.source} line {line}: {rule.pattern} → {' '.join(rule.owners)} ({len(fs)} files)",
                      f"{n} revisions, {closure:.0%} by insiders {', '.join(insiders)}; "
                      f"fragmentation {frag:.2f}"],
            metrics={"files": len(fs), "revisions": n, "authors": sorted(revs), "insiders": insiders,
                     "closure": round(closure, 3), "fragmentation": round(frag, 3)},
            covered_by=_covered(config, fs)))
    return sorted(out, key=lambda c: (-c.metrics["closure"], c.metrics["fragmentation"], c.id))


# -- codenames ----------------------------------------------------------------------------------
_WORD = re.compile(r"[A-Za-z][A-Za-z]{3,}")


def codename_candidates(repo, config, files: list[str], *, min_mentions: int = 2,
                        min_concentration: float = 0.6) -> list[Candidate]:
    from spacy.lang.en.stop_words import STOP_WORDS

    ordinary = STOPLIST | {w.lower() for w in STOP_WORDS}
    lower_seen: set[str] = set()
    capital: dict[str, set[str]] = defaultdict(set)   # word → files/commits mentioning it
    where: dict[str, set[str]] = defaultdict(set)     # word → files
    hist = load_history(repo)
    texts: list[tuple[str, list[str], str]] = []
    for c in hist.commits:
        texts.append((f"commit {c.sha[:10]}", [p for p in c.paths if p in set(files)] if len(c.paths) <= 30 else [], c.message))
    for path, data in _files.read_sources(repo, {p: "" for p in files}):
        for _, piece in prose(path, data):
            texts.append((path, [path], piece))
    for source, paths, text in texts:
        for m in _WORD.finditer(text):
            w = m.group(0)
            if w.lower() in ordinary or text[m.start() - 1:m.start()] == "-" or text[m.end():m.end() + 1] == "-":
                continue  # ordinary word, or part of a compound name ("Black-Scholes")
            if w[0].isupper() and w[1:].islower():
                capital[w.lower()].add(source)
                where[w.lower()].update(paths)
            elif w.islower():
                lower_seen.add(w)
    out = []
    for w, sources in capital.items():
        if w in lower_seen or len(sources) < min_mentions or len(where[w]) < 2:
            continue
        dirs = Counter(p.split("/")[0] for p in where[w])
        top, k = dirs.most_common(1)[0]
        conc = k / len(where[w])
        if conc < min_concentration:
            continue
        name = w.capitalize()
        fs = sorted(where[w])
        out.append(Candidate(
            kind="codename", id=_slug(name), codenames=[name],
            evidence=[f"{name!r} in {len(sources)} commit messages/files, never lower-case; "
                      f"{k} of {len(fs)} files under {top}/"] + [f"  {p}" for p in fs[:5]],
            metrics={"mentions": len(sources), "files": fs, "concentration": round(conc, 3), "folder": top},
            covered_by=sorted({s.id for s in config.secrets if any(c.lower() == w for c in s.codenames)})))
    return sorted(out, key=lambda c: (-c.metrics["mentions"], c.id))


# -- credentials ----------------------------------------------------------------------------------
def credential_candidates(repo, config, files: list[str]) -> list[Candidate]:
    from repoguard.analyzers import credentials

    by_secret: dict[str, list] = defaultdict(list)
    for f in credentials.scan(repo, files, config):
        by_secret[credentials.secret_id(f)].append(f)
    out = []
    for sid, fs in sorted(by_secret.items()):
        f = fs[0]
        bits = credentials.guess_bits(f)
        p = max(2.0 ** -bits, 1e-300)
        r = config.defaults.r if p < config.defaults.r else min(0.999, p * 10)
        paths = sorted({x.path for x in fs})
        out.append(Candidate(
            kind="credential", id=_slug(f"{f.rule_id}-{paths[0]}"), paths=paths, p=p, r=r,
            evidence=[f"{x.rule_id} credential {x.redacted} at {x.path}:{x.line}" for x in fs]
            + [f"~{bits:.0f} bits of entropy → p = 2^-{bits:.0f}"],
            metrics={"bits": round(bits, 1), "rule": f.rule_id},
            covered_by=_covered(config, paths)))
    return out


# -- the whole suggestion -------------------------------------------------------------------------
def suggest(repo, config, *, kinds=("silo", "codename", "credential")) -> dict:
    """{"candidates": [Candidate as dict], "toml": snippet of the uncovered candidates}."""
    files = [p for p in _files.tracked_paths(repo) if not p.startswith(".repoguard/")]
    cands: list[Candidate] = []
    if "silo" in kinds:
        cands += silos(repo, config, files)
    if "codename" in kinds:
        cands += codename_candidates(repo, config, files)
    if "credential" in kinds:
        cands += credential_candidates(repo, config, files)
    return {"candidates": [asdict(c) for c in cands], "toml": to_toml(cands, config)}


def _toml_list(xs: list[str]) -> str:
    return "[" + ", ".join(json.dumps(x) for x in xs) + "]"


def to_toml(cands: list[Candidate], config) -> str:
    """A `[[secret]]` block per uncovered candidate, its evidence as comments."""
    lines = ["# Candidate secrets proposed by `repoguard suggest`. Review each, then paste the ones",
             "# you agree with into repoguard.toml (nothing is declared until you do)."]
    taken = {s.id for s in config.secrets}
    for c in cands:
        if c.covered_by:
            continue
        sid, n = c.id, 2
        while sid in taken:
            sid, n = f"{c.id}-{n}", n + 1
        taken.add(sid)
        lines.append("")
        lines += [f"# {c.kind}: {e}" for e in c.evidence]
        lines.append("[[secret]]")
        lines.append(f"id = {json.dumps(sid)}")
        if c.paths:
            lines.append(f"paths = {_toml_list(c.paths)}")
        if c.owners:
            lines.append(f"owners = {_toml_list(c.owners)}")
        if c.codenames:
            lines.append(f"codenames = {_toml_list(c.codenames)}")
        if c.p is not None:
            lines.append(f"p = {c.p:.3g}")
            lines.append(f"r = {c.r:.3g}")
    return "\n".join(lines) + "\n"
