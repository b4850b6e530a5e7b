"""The types every credential-rule format loads into (`Rule`, `Allowlist`, `RuleSet`) and the
regex helpers they share. Rule loading runs one way: these types ← formats (`np_rules`: YAML
packs; `rules`: gitleaks TOML, and the loader) ← `engine`."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import re2

from repoguard.credentials.priority import default_priority

DEFAULT_WINDOW = 1024


@functools.lru_cache(maxsize=None)
def compile_re2(pattern: str, as_bytes: bool = True):
    """RE2-compiled `pattern` (on bytes by default), cached: validation and the engine share it."""
    return re2.compile(pattern.encode() if as_bytes else pattern)


def max_width(pattern: str) -> int | None:
    """The longest match of `pattern` in characters, from Python's regex parser after translating
    the RE2-only syntax (inline flags, `\\z`, `[[:alnum:]]`); None when unbounded or unparsable.
    The engine's Hyperscan windows and the keyword-context detector's windows use it: a window
    that reaches back this far from a match end holds the whole match."""
    try:
        try:
            from re import _parser as sre_parse
        except ImportError:  # pragma: no cover - Python 3.10
            import sre_parse  # type: ignore[no-redef]
        p = re.sub(r"\(\?-?[ims]+\)", "", pattern)
        p = re.sub(r"\(\?-?[ims]+:", "(?:", p).replace(r"\z", "$").replace("[[:alnum:]]", "[A-Za-z0-9]")
        hi = sre_parse.parse(p).getwidth()[1]
    except Exception:  # syntax Python does not know
        return None
    return None if hi >= sre_parse.MAXREPEAT else hi


@dataclass(frozen=True)
class Allowlist:
    """Conditions under which a candidate finding is not reported (gitleaks semantics): with
    `condition` OR any one listed check suffices, with AND every listed check must hold."""

    description: str = ""
    condition: str = "OR"
    regex_target: str = "secret"
    regexes: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    stopwords: tuple[str, ...] = ()
    commits: tuple[str, ...] = ()
    target_rules: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rule:
    """One detector. `regex` is RE2 syntax; the secret is group `secret_group` (0: the first
    non-empty group, or the whole match when the regex has no groups, as in gitleaks).
    `priority`: which finding wins when rules overlap (`credentials.priority`: 0 vendor,
    1 structural, 2 generic, 3 keyword context; lower wins); None → `default_priority(id, source)`."""

    id: str
    description: str
    regex: str | None
    secret_group: int = 0
    entropy: float | None = None
    keywords: tuple[str, ...] = ()
    path: str | None = None
    tags: tuple[str, ...] = ()
    allowlists: tuple[Allowlist, ...] = ()
    window: int = DEFAULT_WINDOW
    tps: tuple[str, ...] = ()
    fps: tuple[str, ...] = ()
    source: str = ""
    checksum: str = ""
    priority: int | None = None
    placeholder: bool = False  # reject values `placeholders.is_placeholder` calls placeholders

    def __post_init__(self) -> None:
        if self.priority is None:
            object.__setattr__(self, "priority", default_priority(self.id, self.source))


@dataclass(frozen=True)
class RuleSet:
    """The rules an engine runs, the global allowlists, and the files they were read from (`sources`)."""

    rules: tuple[Rule, ...]
    allowlists: tuple[Allowlist, ...] = ()
    sources: tuple[str, ...] = field(default_factory=tuple)

    def by_id(self) -> dict[str, Rule]:
        """{rule id: rule}; a later rule of the same id wins."""
        return {r.id: r for r in self.rules}


_LEAD = re.compile(r"^(?:\\b)?(?:\(\?:\^\|\[[^\]]*\]\))?\(?")
_ALT = re.compile(r"\(\?:([0-9A-Za-z_~|-]+)\)")


def _literal(regex: str, i: int) -> tuple[str, int]:
    out = []
    while i < len(regex):
        ch = regex[i]
        if ch == "\\" and i + 1 < len(regex) and regex[i + 1] in ".-_/+=:@#%~":
            out.append(regex[i + 1])
            i += 2
            continue
        if not (ch.isalnum() or ch in "_-:@#%~=/"):
            break
        out.append(ch)
        i += 1
    if i < len(regex) and regex[i] in "?*{" and out:  # the last literal is optional or repeated
        out.pop()
    return "".join(out), i


def literal_prefixes(regex: str) -> list[str]:
    """The literal strings a regex's match must start with (after `\\b`, a leading boundary group
    such as `(?:^|[^A-Za-z])` and an opening capture group), e.g. ["ghp_"] for
    `\\b(ghp_[0-9A-Za-z]{36})` and ["sk_live_", "rk_live_"] for `\\b((?:sk|rk)_live_...)`;
    [] when it starts with a class or a flag."""
    i = _LEAD.match(regex).end()
    m = _ALT.match(regex, i)
    if m and (i + len(m.group(0)) >= len(regex) or regex[m.end()] not in "?*{"):
        rest, _ = _literal(regex, m.end())
        return [alt + rest for alt in m.group(1).split("|")]
    lit, _ = _literal(regex, i)
    return [lit] if lit else []
