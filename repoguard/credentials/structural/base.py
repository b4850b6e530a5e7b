"""The shapes every structural detector shares: `Hit`, `Detector`, and regex helpers."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, NamedTuple

from repoguard.credentials.priority import STRUCTURAL
from repoguard.credentials.rule_types import Rule


class Hit(NamedTuple):
    """A secret found by a detector: `start`/`end` are byte offsets of the value in the text.
    `rule`: the id of one of the detector's `rules` the hit is reported under ("" for the
    detector's own id). `veto`: not a finding but a span the detector rejected on purpose (a
    vendor-named value of the wrong shape): the engine keeps generic findings overlapping it at low
    confidence (those of `rule` only, when a veto names one): redacted, not reported by default."""

    start: int
    end: int
    secret: bytes
    rule: str = ""
    veto: bool = False


@dataclass(frozen=True)
class Detector:
    """A structural detector (see the module docstring). `priority`: which finding the engine
    keeps when this detector and a rule or another detector claim one span (levels in
    `credentials.priority`; lower wins). `prefilter`: b"" for none, else a regex whose match
    ends `find` takes as its third argument. A detector with a prefilter and no `triggers` runs
    wherever its prefilter matched. `rule_for(id)`: the per-hit rule named by `Hit.rule`, with its
    own id, description, tags and allowlists (the vendor-keyword table: one rule per vendor row)."""

    id: str
    description: str
    triggers: tuple[bytes, ...]
    find: Callable[..., Iterable[Hit]]
    tags: tuple[str, ...] = ("structural",)
    priority: int = STRUCTURAL
    prefilter: bytes = b""
    rule_for: Callable[[str], Rule | None] | None = None


def first_group(m) -> int:
    """Index of the first group of regex match `m` that took part in the match (0 when none):
    detectors whose pattern lists alternative shapes, each capturing the value in its own group."""
    return next((k for k in range(1, (m.lastindex or 0) + 1) if m.group(k) is not None), 0)


def group_hits(rx, data: bytes, ok: Callable[[bytes], bool]) -> Iterator[Hit]:
    """Hits for the first matching group of each `rx` match in `data` whose value `ok` accepts."""
    for m in rx.finditer(data):
        g = first_group(m)
        if g and ok(m.group(g)):
            yield Hit(*m.span(g), m.group(g))
