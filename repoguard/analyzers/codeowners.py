"""CODEOWNERS with GitHub's semantics (docs.github.com, "About code owners").

GitHub reads the first file found of `.github/CODEOWNERS`, `CODEOWNERS`, `docs/CODEOWNERS`. Each
line is a gitignore-style pattern followed by owners (`@user`, `@org/team`, an email). The *last*
matching line wins; a line whose pattern has no owners makes matching files unowned. Unlike
.gitignore (and the `codeowners` package): `!` negation and `[ ]` ranges are not supported
(such a line is invalid and skipped), and `docs/*` matches files directly inside `docs/` only.
Invalid lines are reported with their line number, not raised: GitHub skips them too.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

import pathspec

LOCATIONS = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")
_OWNER = re.compile(r"^(@[A-Za-z0-9][A-Za-z0-9-]*(/[A-Za-z0-9._-]+)?|[^@\s]+@[^@\s]+\.[^@\s]+)$")


@dataclass(frozen=True)
class Rule:
    """One valid CODEOWNERS line: its 1-based `line` number, the gitignore-style `pattern` and its
    `owners` (empty: matching files are explicitly unowned)."""

    line: int
    pattern: str
    owners: tuple[str, ...]


@dataclass
class CodeOwners:
    """Parsed CODEOWNERS: `rules` in file order, `errors` as (line, message)."""

    source: str
    rules: list[Rule] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)

    def match(self, path: str) -> Rule | None:
        """The rule deciding `path`'s owners (the last matching one), None when none matches.
        A returned rule with empty `owners` means "explicitly unowned"."""
        for rule in reversed(self.rules):
            if _matches(rule.pattern, path):
                return rule
        return None

    def owners_of(self, path: str) -> tuple[str, ...]:
        """The owners of `path` by its deciding rule (`match`); () when no rule matches or the rule is
        explicitly unowned."""
        rule = self.match(path)
        return rule.owners if rule else ()


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> tuple[pathspec.GitIgnoreSpec, int | None]:
    spec = pathspec.GitIgnoreSpec.from_lines([pattern])
    # GitHub: "docs/*" matches docs/a.md but not docs/b/c.md — depth is fixed for such patterns.
    depth = None
    body = pattern.lstrip("/")
    if body.endswith("/*") and "**" not in body:
        depth = body.count("/")
    return spec, depth


def _matches(pattern: str, path: str) -> bool:
    spec, depth = _compiled(pattern)
    if depth is not None and path.count("/") != depth:
        return False
    return spec.match_file(path)


def parse(text: str, source: str = "CODEOWNERS") -> CodeOwners:
    """Parse CODEOWNERS `text`; `source` names the file in messages."""
    co = CodeOwners(source=source)
    for n, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = re.split(r"\s+#", line, maxsplit=1)[0]  # trailing comment
        parts = line.split()
        pattern, owners = parts[0], tuple(parts[1:])
        if pattern.startswith("!"):
            co.errors.append((n, f"negation {pattern!r} is not supported by GitHub; line skipped"))
            continue
        if "[" in pattern or "]" in pattern:
            co.errors.append((n, f"character range in {pattern!r} is not supported by GitHub; line skipped"))
            continue
        bad = [o for o in owners if not _OWNER.match(o)]
        if bad:
            co.errors.append((n, f"invalid owner {bad[0]!r} (use @user, @org/team or an email); line skipped"))
            continue
        co.rules.append(Rule(n, pattern, owners))
    return co


def load(repo) -> CodeOwners | None:
    """The repository's CODEOWNERS (first of LOCATIONS that exists), None when there is none."""
    for loc in LOCATIONS:
        try:
            data = repo.read_working_file(loc, links_inside=True)   # a linked CODEOWNERS is common
        except OSError:
            continue
        return parse(data.decode("utf-8", errors="replace"), loc)
    return None
