"""A name-only vendor's key with the vendor's tag in front (issue 43: Kingfisher's example set
misses `scp-live-…`, `k_…`). Vendors mark their keys with a short tag (`sk_live_`, `ghp_`,
`xoxb-`); where the table knows a vendor only by its name, a tag and a tail of a common key shape
next to that name is the vendor's key, reported under its row, not vetoed to low confidence.
Values are drawn here (tests/fake_values.py)."""
from __future__ import annotations

import random

import pytest

from fake_values import random_key
from repoguard.credentials.engine import Engine
from repoguard.credentials.rules import load_rules
from repoguard.credentials.vendor_table import default_vendor_table

_RNG = random.Random(4344)
_HEX = "0123456789abcdef"


@pytest.fixture(scope="module")
def engine():
    return Engine.build(load_rules())


def _findings(engine, text: str):
    return [(f.rule_id, f.confidence) for f in engine.scan(text.encode(), "src/settings.txt")]


def test_the_vendors_used_here_are_name_only():
    rows = {r.id: r for r in default_vendor_table()}
    assert rows["scrapfly"].generic and rows["mailsac"].generic


@pytest.mark.parametrize("text, rule", [
    ("scrapfly SECRET_KEY scp-live-" + random_key(_RNG, 32, _HEX), "scrapfly-keyword"),
    ("scrapfly_key = 'scp-test-" + random_key(_RNG, 32, _HEX) + "'", "scrapfly-keyword"),
    ("mailsac TOKEN k_" + random_key(_RNG, 44, "abcdefghijklmnopqrstuvwxyz0123456789"), "mailsac-keyword"),
], ids=["scp-live", "scp-test", "k_"])
def test_tagged_key_next_to_a_name_only_vendor_is_reported(engine, text, rule):
    assert (rule, "high") in _findings(engine, text)


@pytest.mark.parametrize("text", [
    # the tail is no common key shape (33 characters): no key of a vendor known by name only
    "scrapfly SECRET_KEY scp-live-" + random_key(_RNG, 33, _HEX),
    # a tag before a placeholder
    "scrapfly SECRET_KEY scp-live-" + "0123456789abcdef" * 2,
    # more than a short tag: a path-like name before the value
    "mailsac TOKEN releases/2024/k_" + random_key(_RNG, 44, "abcdefghijklmnopqrstuvwxyz0123456789"),
], ids=["tail-33", "tail-placeholder", "path"])
def test_other_tagged_values_are_not_reported(engine, text):
    assert [r for r, c in _findings(engine, text) if c != "low"] == []
