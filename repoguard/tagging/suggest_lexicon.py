"""Words that are never codename candidates for `repoguard suggest`, all read offline.

- **dictionary words** (`dictionary_words`): every word of wordfreq 3.1.1's large English list
  (Zipf ≥ 1, i.e. ≥ 1 per 100 M words of English text) and every word of its small lists of the
  other 40 languages (Zipf ≥ 3, ≥ 1 per million words). The lists ship inside the wheel
  (`wordfreq/data/*.msgpack.gz`); nothing is downloaded. They hold ordinary words, months and
  weekdays, language names ("abkhaz", Zipf 1.8 in English), places, vendors ("okta", "mastodon")
  and common first names and surnames of many languages (Speer et al., wordfreq v3.0, 2022,
  doi:10.5281/zenodo.7199437).
- **programming vocabulary** (`stdlib_words`): every word (identifiers split, ≥ 4 letters) that
  occurs in ≥ 2 modules of the Python standard library ("kwargs", "getattr", "docstring"): jargon
  wordfreq does not know.
- **people** (`people_words`): every part of every author's and committer's name and e-mail local
  part in the history, and of names in `Co-authored-by:` / `Signed-off-by:` trailers ("ikarbowiak").
"""
from __future__ import annotations

import hashlib
import os
import re
import sys
import sysconfig
from collections import Counter
from functools import lru_cache

from repoguard.analyzers.codenames import split_identifiers

WORD = re.compile(r"[A-Za-z]{4,}")


def dictionary_words(terms) -> set[str]:
    """The lower-case `terms` that wordfreq knows: in the English large list (any frequency it
    records, Zipf ≥ 1) or in the small list (Zipf ≥ 3) of any other language it ships.

    Reads each list once per call straight from the wheel's data files (~0.6 s for all 41 lists,
    one list in memory at a time). Raises ImportError when wordfreq is not installed."""
    import wordfreq

    terms = set(terms)
    lists = [wordfreq.available_languages("large")["en"]]
    lists += [f for lang, f in sorted(wordfreq.available_languages("small").items()) if lang != "en"]
    found: set[str] = set()
    for filename in lists:
        for bucket in wordfreq.read_cBpack(filename):
            found.update(terms.intersection(bucket))
    return found


@lru_cache(maxsize=1)
def common_english(min_letters: int = 3) -> frozenset[str]:
    """Common English words (wordfreq's small English list: Zipf ≥ 3, ≥ 1 per million words) of
    ≥ `min_letters` ASCII letters, about 25 k words; the pieces `compound_of` splits into."""
    import wordfreq

    return frozenset(w for bucket in wordfreq.read_cBpack(wordfreq.available_languages("small")["en"])
                     for w in bucket if len(w) >= min_letters and w.isascii() and w.isalpha())


def compound_of(term: str) -> list[str] | None:
    """`term` split into common English words (`common_english`) when it is a plain compound of
    them ("restapi" → ["rest", "api"], "postcrash" → ["post", "crash"]), the split with
    the fewest pieces; None when no split exists ("proxito", "kbadge"). Dynamic programming over
    the term's prefixes, O(len(term)²) look-ups."""
    words = common_english()
    best: list[list[str] | None] = [[]] + [None] * len(term)
    for end in range(1, len(term) + 1):
        for start in range(end):
            if best[start] is not None and term[start:end] in words \
                    and (best[end] is None or len(best[start]) + 1 < len(best[end])):
                best[end] = best[start] + [term[start:end]]
    return best[-1] if best[-1] and len(best[-1]) > 1 else None


# Dependency manifests and lock files: not documents; the packages they declare are vendors.
MANIFEST = re.compile(r"(^|/)(requirements[^/]*\.(txt|in)|requirements/[^/]+\.(txt|in)|constraints[^/]*\.txt|"
                      r"pyproject\.toml|setup\.cfg|Pipfile(\.lock)?|[^/]*\.lock|package(-lock)?\.json|"
                      r"pnpm-lock\.yaml|go\.(mod|sum)|Cargo\.toml|Gemfile|composer\.json|pom\.xml|"
                      r"build\.gradle(\.kts)?|\.pre-commit-config\.yaml)$")
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def dependency_names(path: str, text: str) -> set[str]:
    """Lower-case words (≥ 4 letters) of the package names a manifest declares: requirement lines
    (requirements*.txt/.in, constraints), `[project]` dependencies, optional dependencies and
    dependency groups and `[tool.poetry]` dependencies of pyproject.toml, Pipfile and Cargo.toml
    tables, package.json / composer.json dependency maps, go.mod `require` paths. The project's
    own paths and tool settings in the same files are not names. Unparsable files give set()."""
    import json
    try:
        import tomllib
    except ModuleNotFoundError:      # Python < 3.11
        import tomli as tomllib

    name = path.rsplit("/", 1)[-1]
    reqs: list[str] = []
    try:
        if name.endswith((".txt", ".in")):
            reqs = [ln for ln in text.splitlines() if not ln.lstrip().startswith(("-", "#"))]
        elif name in ("pyproject.toml", "Pipfile", "Cargo.toml"):
            doc = tomllib.loads(text)
            proj, poetry = doc.get("project", {}), doc.get("tool", {}).get("poetry", {})
            reqs = list(proj.get("dependencies", []))
            for group in list(proj.get("optional-dependencies", {}).values()) \
                    + list(doc.get("dependency-groups", {}).values()):
                reqs += [r for r in group if isinstance(r, str)]
            for table in ("dependencies", "dev-dependencies", "packages", "dev-packages"):
                reqs += list(doc.get(table, {})) + list(poetry.get(table, {}))
            for group in poetry.get("group", {}).values():
                reqs += list(group.get("dependencies", {}))
        elif name in ("package.json", "composer.json"):
            doc = json.loads(text)
            for table in ("dependencies", "devDependencies", "peerDependencies", "optionalDependencies",
                          "require", "require-dev"):
                reqs += list(doc.get(table, {}))
        elif name == "go.mod":
            reqs = [m.rsplit("/", 1)[-1] for m in re.findall(r"^\s*(?:require\s+)?([\w.-]+\.\w+/\S+)\s+v", text, re.M)]
    except (ValueError, AttributeError, TypeError):
        return set()
    out: set[str] = set()
    for m in (_REQUIREMENT.match(piece) for r in reqs for piece in str(r).lstrip("@").split("/", 1)):
        if m:
            pkg = m.group(1).lower()
            out.update(w for w in re.split(r"[^a-z]+", pkg) if len(w) >= 4)
            out.add(re.sub(r"[^a-z]+", "", pkg))
    return {w for w in out if len(w) >= 4}


_STDLIB_CACHE_VERSION = 1     # bump when WORD, split_identifiers or the counting change


def _stdlib_files(root: str) -> list[str]:
    """The stdlib's .py files (site-packages, dist-packages and __pycache__ skipped), sorted."""
    out = []
    for d, dirs, names in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in ("site-packages", "dist-packages", "__pycache__"))
        out.extend(os.path.join(d, n) for n in sorted(names) if n.endswith(".py"))
    return out


def _stdlib_digest(root: str, files: list[str], min_modules: int) -> str:
    """Cache key: interpreter version, stdlib root, and every file's path, size and mtime (cheap:
    stat only, no reads); any change to the stdlib or the interpreter makes a new key."""
    h = hashlib.sha256(repr((_STDLIB_CACHE_VERSION, sys.version, sys.implementation.cache_tag, root,
                             min_modules)).encode())
    for f in files:
        try:
            st = os.stat(f)
        except OSError:
            continue
        h.update(f"{os.path.relpath(f, root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:24]


@lru_cache(maxsize=1)
def stdlib_words(min_modules: int = 2) -> frozenset[str]:
    """Lower-cased words (≥ 4 letters, identifiers split) in ≥ `min_modules` standard-library
    modules; empty when the stdlib directory cannot be read.

    Reading the stdlib takes seconds, so the result is cached across runs in
    `artefacts.user_cache_dir()` (`$REPOGUARD_CACHE_DIR`, default `~/.cache/repoguard`) as
    `stdlib-words-KEY.txt`, KEY the digest of the interpreter version and the stdlib's file
    list, sizes and mtimes (`_stdlib_digest`); written atomically, rebuilt when missing or
    unreadable, never required (a read-only home only costs the rescan)."""
    from repoguard.core.artefacts import atomic_write_text, user_cache_dir

    root = sysconfig.get_paths().get("stdlib")
    if not root or not os.path.isdir(root):
        return frozenset()
    files = _stdlib_files(root)
    path = user_cache_dir() / f"stdlib-words-{_stdlib_digest(root, files, min_modules)}.txt"
    try:
        return frozenset(path.read_text(encoding="utf-8").split())
    except (OSError, UnicodeDecodeError):
        pass
    df: Counter = Counter()
    for f in files:
        try:
            with open(f, encoding="utf-8", errors="ignore") as fh:
                text = fh.read(200_000)
        except OSError:
            continue
        df.update({w.lower() for w in WORD.findall(split_identifiers(text))})
    words = frozenset(w for w, n in df.items() if n >= min_modules)
    try:
        atomic_write_text(path, "\n".join(sorted(words)) + "\n")
    except OSError:
        pass
    return words


def name_parts(text: str) -> set[str]:
    """Lower-cased parts of a person's name or e-mail address: `Priya Raman <priya.raman@x>` →
    {priya, raman}; the domain is dropped; parts shorter than 3 letters are dropped."""
    local = text.split("@", 1)[0] if "@" in text and " " not in text.strip() else text
    return {w.lower() for w in re.split(r"[^A-Za-zÀ-ÿ]+", split_identifiers(local)) if len(w) >= 3}


def people_words(repo) -> frozenset[str]:
    """Name parts of every author and committer in `repo`'s history and of trailer names, from the
    history `analyzers.history.load_history` reads once (one streamed `git log`, shared with the
    silo and codename candidates). Empty for a plain directory or an unborn HEAD."""
    from repoguard.analyzers.history import load_history

    out: set[str] = set()
    for ident in load_history(repo).identities:
        out |= name_parts(ident)
    return frozenset(out)
