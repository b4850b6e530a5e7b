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
