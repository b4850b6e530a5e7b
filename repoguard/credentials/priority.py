"""Finding priority: which finding the engine keeps when several rules or structural detectors
claim overlapping spans of one text (the lowest level wins; equal levels keep the longer, then
the earlier, match, then the smaller rule id).

Levels, from the most to the least specific:
- VENDOR (0): a vendor's token format (`rules/*.toml` outside `generic.toml`, Nosey Parker
  packs): it knows the token's prefix, length and alphabet;
- STRUCTURAL (1): a vendor-independent detector that parses its context (a URL's userinfo, an
  HTTP header, a manifest, a key block: `credentials.structural`);
- GENERIC (2): a keyword rule that accepts any vendor's value (`rules/generic.toml`, ids
  `generic-*` as in gitleaks). A generic candidate starting with a vendor's literal prefix is
  left to that vendor's rule (engine.vendor_prefixes);
- CONTEXT (3): a secret word next to a random-looking value, whatever the syntax
  (`structural.keyword_context`): any other rule or detector claiming its span wins.

Rules and detectors declare their level (`Rule.priority`, `Detector.priority`); a rule loaded
from a file without one gets `default_priority`.
"""
from __future__ import annotations

VENDOR = 0
STRUCTURAL = 1
GENERIC = 2
CONTEXT = 3


def default_priority(rule_id: str, source: str) -> int:
    """The level of a rule that declares none: GENERIC for `generic-*` ids and rules of a
    `generic.toml` file (gitleaks' naming), STRUCTURAL for source "structural", else VENDOR."""
    if rule_id.startswith("generic") or source.endswith("generic.toml"):
        return GENERIC
    return STRUCTURAL if source == "structural" else VENDOR
