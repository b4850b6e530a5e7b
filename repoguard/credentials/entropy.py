"""Shannon entropy of a candidate secret: one definition for the engine's rule filters and the
structural detectors (a leaf module, so detectors need not import the engine)."""
from __future__ import annotations

import math
from collections import Counter


def shannon_entropy(s: bytes) -> float:
    """Shannon entropy in bits per character of `s` (0.0 for empty input)."""
    if not s:
        return 0.0
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


# Password rules' thresholds (bits per character: 2.5, 2.8) go up to this; token rules sit at 3.0+.
PASSWORD_THRESHOLD = 2.8


def entropy_floor(threshold: float, n: int) -> float:
    """The entropy a rule's secret of `n` characters must reach, for a rule whose threshold is
    `threshold`. A string of n characters holds at most log₂ n bits per character, so a fixed
    threshold near log₂ n rejects most random short values: at 2.8 bits, every 8-character password
    with one character twice (2.75 bits; 38 % of random 8-character alphanumerics) would be dropped.
    For password rules (threshold ≤ PASSWORD_THRESHOLD) the floor is therefore capped at
    0.8 · log₂ n: an 8-character value may repeat two characters (2.5 bits), not three or one
    three times (2.25, 2.41 bits), and `aabbccdd` (2.0) stays out. Shorter
    values (whose threshold already says how short a password may be), longer ones and
    vendor-token rules keep their threshold."""
    if threshold > PASSWORD_THRESHOLD or n < 8:
        return threshold
    return min(threshold, 0.8 * math.log2(n))
