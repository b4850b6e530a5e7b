"""Generated passwords in configuration files (issue 43: "the sample-password and placeholder
filters must not drop generic passwords in connection strings and config files that look
generated"). A string of n characters holds at most log₂ n bits per character, so the password
rules' fixed 2.8-bit threshold dropped every 8-character value that repeats a character (38 % of
random alphanumerics, 88 % of random hex); the floor is now capped at 0.8 · log₂ n
(credentials.entropy.entropy_floor). An unquoted value may also open with `+`, `=` or `?`.
Values are drawn here (tests/fake_values.py)."""
from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from fake_values import ALNUM, random_key
from repoguard.credentials.engine import Engine
from repoguard.credentials.entropy import shannon_entropy
from repoguard.credentials.rules import load_rules

_RNG = random.Random(4345)


def _with_repeats(counts: list[int], n: int = 8) -> str:
    """A random value of `n` characters whose repeated characters occur `counts` times each
    (the rest once), with a digit and a letter."""
    while True:
        v = random_key(_RNG, n)
        if sorted((c for c in Counter(v).values() if c > 1), reverse=True) == counts:
            return v


ONE_PAIR, TWO_PAIRS = _with_repeats([2]), _with_repeats([2, 2])
FORMS = [("config/app.env", "DB_PASSWORD={p}\n"), ("config/database.yml", "production:\n  password: {p}\n"),
         ("conf/settings.xml", "<server><id>nexus</id><password>{p}</password></server>\n")]


@pytest.fixture(scope="module")
def engine():
    return Engine.build(load_rules())


@pytest.mark.parametrize("value", [ONE_PAIR, TWO_PAIRS], ids=["one-pair", "two-pairs"])
@pytest.mark.parametrize("path,form", FORMS, ids=[p for p, _ in FORMS])
def test_short_generated_password_is_reported(engine, path, form, value):
    assert shannon_entropy(value.encode()) < 2.8  # below the rules' threshold
    found = [f for f in engine.scan(form.format(p=value).encode(), path) if f.confidence != "low"]
    assert found, path


@pytest.mark.parametrize("value", ["aabbccdd", "abababab", "zzzzqqqq"])
@pytest.mark.parametrize("path,form", FORMS, ids=[p for p, _ in FORMS])
def test_low_entropy_eight_characters_stay_out(engine, path, form, value):
    assert [f for f in engine.scan(form.format(p=value).encode(), path) if f.confidence != "low"] == []


def test_floor_only_moves_for_password_rules_and_8_characters_or_more():
    from repoguard.credentials.entropy import entropy_floor
    assert entropy_floor(2.8, 8) == pytest.approx(0.8 * 3)
    assert entropy_floor(2.8, 7) == 2.8 and entropy_floor(2.8, 12) == 2.8
    assert entropy_floor(3.7, 8) == 3.7  # a vendor or generic key rule keeps its threshold
    assert entropy_floor(2.5, 8) == pytest.approx(2.4) and entropy_floor(2.5, 9) == 2.5
    # three characters twice in eight (2.25 bits) stays below the floor
    assert shannon_entropy(b"aabbccde") < entropy_floor(2.8, 8) <= shannon_entropy(b"aabbcdef")
    assert math.isclose(shannon_entropy(ALNUM[:8].encode()), 3.0)


@pytest.mark.parametrize("lead", ["+", "=", "?"])
@pytest.mark.parametrize("path,form", FORMS[:2], ids=[p for p, _ in FORMS[:2]])
def test_generated_password_may_start_with_a_symbol(engine, path, form, lead):
    """`+`, `=` and `?` open no YAML indicator, shell expansion or comment: a generated password
    with symbols starts with one about one time in twenty-five."""
    value = lead + random_key(_RNG, 12)
    assert [f for f in engine.scan(form.format(p=value).encode(), path) if f.confidence != "low"], path


@pytest.mark.parametrize("value", ["!vault |", "&anchor_name", "*alias_name", "#commented", "${DB_PASS}"])
def test_yaml_and_shell_indicators_are_still_not_values(engine, value):
    text = "production:\n  password: " + value + "\n"
    assert [f for f in engine.scan(text.encode(), "config/database.yml") if f.confidence != "low"] == []
