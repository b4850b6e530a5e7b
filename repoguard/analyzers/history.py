"""The repository's history read once (one streamed `git log`) and shared by the history-based
analyzers (ownership's authorship, cochange, codenames' commit messages).

Paths are followed through renames to their current names (newest-first walk: a commit's
`old → new` rename makes every older mention of `old` count for `new`'s current name). Author
emails are normalised through `.mailmap` and lower-cased. Commits by bots (`[bot]`, dependabot,
renovate) are dropped: they are bulk changes, not knowledge of the code. `identities` keeps every
person's name and e-mail seen in the walk (bots included), for `repoguard suggest`'s people words.
"""
from __future__ import annotations

import logging
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

log = logging.getLogger(__name__)
_BOT = re.compile(r"\[bot\]|dependabot|renovate|github-actions", re.I)
_TRAILER = re.compile(r"^(?:co-authored-by|signed-off-by|reviewed-by|reported-by):\s*(.+?)\s*(?:<([^>]*)>)?\s*$",
                      re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class HistCommit:
    """One commit reachable from HEAD (merges and bots' commits left out): `sha`, the author's
    mailmap-normalised lower-cased email, the message (its first `max_message_chars`), and the
    current names of the files it touched (renames followed)."""

    sha: str
    author: str                # canonical, lower-cased email
    message: str
    paths: tuple[str, ...]     # current names of the files it touched


@dataclass
class History:
    """`revisions[path][author]`: commits by `author` touching `path` (code-maat's revisions)."""

    commits: list[HistCommit] = field(default_factory=list)
    revisions: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    bots_dropped: int = 0
    identities: set[str] = field(default_factory=set)   # names and e-mails: authors, committers, trailers

    def revisions_of(self, paths) -> Counter:
        """author → their revisions summed over `paths` (files without history add nothing)."""
        total: Counter = Counter()
        for p in paths:
            total.update(self.revisions.get(p, {}))
        return total

    def author_totals(self) -> Counter:
        """author → their revisions summed over every file."""
        return self.revisions_of(list(self.revisions))

    def main_developer(self, path: str) -> tuple[str, int, int] | None:
        """(author, their revisions, all revisions) of the author with most revisions of `path`
        (ties: alphabetical), None when the file has no history."""
        c = self.revisions.get(path)
        if not c:
            return None
        author, n = min(c.items(), key=lambda kv: (-kv[1], kv[0]))
        return author, n, sum(c.values())

    def fragmentation(self, path: str) -> float:
        """1 − Σ_a (n_a / n)², the fractal value of D'Ambros et al. 2009 (code-maat
        "fragmentation"): 0 for a single author, → 1 for many equal authors."""
        c = self.revisions.get(path)
        if not c:
            return 0.0
        n = sum(c.values())
        return 1.0 - sum((k / n) ** 2 for k in c.values())


_CACHE: dict[tuple[str, str | None], History] = {}


def _identities(c, mailmap: dict[str, str]) -> set[str]:
    """Author and committer names and e-mails (raw, and the author's .mailmap e-mail) and the
    names and e-mails of Co-authored-by / Signed-off-by / Reviewed-by / Reported-by trailers."""
    out = {c.author_name, c.author_email, mailmap.get(c.author_email, ""), c.committer_name, c.committer_email}
    for m in _TRAILER.finditer(c.message):
        out.update(m.groups(""))
    return {x.strip() for x in out if x and x.strip()}


def _commits(repo) -> list:
    """All non-merge commits with renames detected. Rename detection reads blobs; where some are
    absent (a partial clone, a mirror without its largest files) git fails, and the history is
    read again without rename detection (renamed files then restart their history)."""
    from repoguard.core.errors import InputError

    try:
        return list(repo.iter_commits("HEAD", merges="skip"))
    except InputError as exc:
        log.warning("%s; reading history without rename detection", exc)
        return list(repo.iter_commits("HEAD", merges="skip", renames=False))


def load_history(repo, *, max_message_chars: int = 4000) -> History:
    """History of `repo` at HEAD (merges skipped), memoised per (root, HEAD). An empty History
    for a plain directory or an unborn HEAD."""
    key = (str(repo.root), getattr(repo, "head", None))
    if key in _CACHE:
        return _CACHE[key]
    hist = History()
    if getattr(repo, "is_git", False) and repo.head:
        mailmap = repo.mailmap()
        alias: dict[str, str] = {}
        for c in _commits(repo):
            hist.identities.update(_identities(c, mailmap))
            if _BOT.search(c.author_name) or _BOT.search(c.author_email):
                hist.bots_dropped += 1
                continue
            author = mailmap.get(c.author_email, c.author_email).lower()
            paths = []
            for ch in c.changes:
                current = alias.get(ch.path, ch.path)
                paths.append(current)
                if ch.old_path and ch.status == "R":
                    alias[ch.old_path] = current
            paths = tuple(dict.fromkeys(paths))
            hist.commits.append(HistCommit(c.sha, author, c.message[:max_message_chars], paths))
            for p in paths:
                hist.revisions[p][author] += 1
    _CACHE.clear()  # one repository at a time: keep memory bounded
    _CACHE[key] = hist
    return hist
