"""Generic findings need a value in one token alphabet (credentials.alphabet, issue 27): a value
mixing standard and URL-safe base64, or holding `~` outside an Azure client secret's shape, is
hand-typed or mangled, not a generated key. Vendor rules and password rules are not affected."""
from __future__ import annotations

import pytest

from repoguard.credentials.alphabet import mixed_alphabet
from repoguard.credentials.engine import Engine
from repoguard.credentials.rules import load_rules


@pytest.fixture(scope="module")
def engine():
    return Engine.build(load_rules())


def _ids(engine, text: str) -> list[str]:
    return [f.rule_id for f in engine.scan(text.encode(), "app/settings.py")]


@pytest.mark.parametrize("value,mixed", [
    (b"Zq8/vT2m+Wx4Lp9RkQ3nB7cD", False),          # standard base64
    (b"Zq8-vT2m_Wx4Lp9RkQ3nB7cD", False),          # URL-safe base64
    (b"0f1e2d3c4b5a69788796a5b4c3d2e1f0", False),  # hex
    (b"Zq8/vT2m_Wx4Lp9RkQ3nB7cD", True),           # both alphabets
    (b"Zq8+vT2m-Wx4Lp9RkQ3nB7cD", True),
    (b"Tq8~vZ2mWx4Lp9RkQ3nB7cD", True),            # `~`: in no RFC 4648 alphabet
    (b"Xy_8Q~Zq8vT2m.Wx4Lp9RkQ3nB7cD-a1b2c3d4e5", False),  # an Azure client secret's shape
    (b"signature_method=SIGNATURE_HMAC_SHA256", True),      # a keyword argument, not a token
    (b"Zq8vT2mWx4Lp9RkQ3nB7cD==", False),                   # base64 padding
])
def test_mixed_alphabet(value, mixed):
    assert mixed_alphabet(value) is mixed


@pytest.mark.parametrize("text", [
    '[DEBUG] Using Acme Key=Tq8~vZ2mWx4Lp9RkQ3nB7cD',
    'API_KEY = "Zq8/vT2m_Wx4Lp9RkQ3nB7cD"',
    '{"provider": "acme", "secret": "Zq8+vT2m-Wx4Lp9RkQ3nB7cD"}',
])
def test_generic_rules_skip_mixed_alphabets(engine, text):
    assert _ids(engine, text) == []


@pytest.mark.parametrize("text", [
    'API_KEY = "Zq8/vT2m+Wx4Lp9RkQ3nB7cD"',
    'API_KEY = "Zq8-vT2m_Wx4Lp9RkQ3nB7cD"',
    'password = "Tq8~vZ2m-Wx4/Lp9"',                # a password may mix anything
])
def test_one_alphabet_and_passwords_still_found(engine, text):
    assert _ids(engine, text)


@pytest.mark.parametrize("value,mashed", [
    (b"sdf0o9823sjdfsdf", True),            # requests-oauthlib's sample OAuth token
    (b"asdfoiw37850234lkjsdfsdf", True),
    (b"hfdp7dh39dks9884", False),           # 8 of 9 letters: below the 10^-3 bar
    (b"deadbeefdeadbeefadda", False),       # hex: letters a-f only
    (b"Zq8vT2mWx4Lp9RkQ3nB7cD", False),
])
def test_home_row_mash(value, mashed):
    from repoguard.credentials.structural.placeholders import home_row_mash
    assert home_row_mash(value) is mashed


def test_home_row_mash_spares_generated_values():
    """Uniform base62 values of key lengths: the mash test drops well under 2 in 1,000 (the bar
    is a binomial tail of 10^-3 per value). Test data from a seeded generator."""
    import random
    import string
    from repoguard.credentials.structural.placeholders import home_row_mash
    rng = random.Random(27)
    values = ["".join(rng.choice(string.ascii_letters + string.digits) for _ in range(rng.choice((16, 24, 32, 40))))
              for _ in range(20_000)]
    assert sum(home_row_mash(v.encode()) for v in values) < 40


def test_long_values_are_read_without_overflow(engine):
    """A 2 000-character value after a secret's name: the mash test's binomial tail (coefficients
    past a float's range) is summed in log space; the value is still read and reported."""
    import random
    import string
    rng = random.Random(13)
    v = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(2000))
    assert "generic-keyword-context" in _ids(engine, f"secret_token = {v}\n")
    from repoguard.credentials.structural.placeholders import home_row_mash
    assert home_row_mash(b"asdfghjkl" * 200) and not home_row_mash(v.encode())
