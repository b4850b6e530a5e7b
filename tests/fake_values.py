"""Fake credential values for tests: drawn from a seeded generator, never a real credential."""
from __future__ import annotations

import random
import string

ALNUM = string.ascii_letters + string.digits


def random_key(rng: random.Random, n: int = 32, alphabet: str = ALNUM) -> str:
    """`n` characters of `alphabet` from `rng`, with at least one digit and one letter (the
    generic detectors' first test of a generated key)."""
    while True:
        v = "".join(rng.choice(alphabet) for _ in range(n))
        if any(c.isdigit() for c in v) and any(c.isalpha() for c in v):
            return v
