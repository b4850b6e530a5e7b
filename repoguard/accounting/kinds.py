"""The named choices of the accountant, as enums: the adjacency (what neighbouring datasets
differ by) and the accountant (which bound certifies a secret). Each member *is* its string
(`Adjacency.ZERO_OUT == "zero-out"`, `str()` and `format()` give the value, JSON writes the
value), so plan.json, the ledger and the config keep the strings they always had; `parse` turns
a string from a file or a flag into a member and names the known ones when it is not.
"""
from __future__ import annotations

from enum import Enum


class NamedChoice(str, Enum):
    """A str-valued enum whose `str()`/`format()` are the value (Python 3.11's `StrEnum`, which
    3.10 lacks)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @classmethod
    def parse(cls, value, what: str | None = None):
        """The member whose value is `value` (a member passes through). Raises ValueError
        "unknown <what> 'x' (known: a, b)" for any other value."""
        try:
            return cls(value)
        except ValueError:
            name = what or cls.__name__.lower()
            raise ValueError(f"unknown {name} {value!r} (known: {', '.join(m.value for m in cls)})") from None


class Adjacency(NamedChoice):
    """Neighbouring datasets [Hush §4]: "zero-out" removes (zeroes) the secret's examples'
    gradients, sensitivity s = 1 per example; "replace" swaps them for others, s = 2."""

    ZERO_OUT = "zero-out"
    REPLACE = "replace"

    @property
    def sensitivity(self) -> float:
        """s, in units of the clip norm C: the shift of one example's clipped gradient."""
        return 2.0 if self is Adjacency.REPLACE else 1.0


class Accountant(NamedChoice):
    """Which bound certifies a secret's posterior [Hush Lemma 3.2]: "kl" (binary-KL inversion),
    "renyi" (the best Rényi order), or "best" (the smallest of those and the Neyman–Pearson bound
    of the privacy-loss distribution, `pld.py`)."""

    BEST = "best"
    KL = "kl"
    RENYI = "renyi"


class Cap(NamedChoice):
    """The per-secret budget the weighting LP caps Σ_{i∈E_j} w_i by (`planning.weighting`): "kl"
    μ_j = kl(r_j‖p_j) [Hush eq. 1] or "gdp" η_j = Φ⁻¹(1−p_j) − Φ⁻¹(1−r_j) [SecPE eq. 6]; "none"
    labels a plan made without the LP (the no-noise baselines, a two-phase run's phase 1)."""

    KL = "kl"
    GDP = "gdp"
    NONE = "none"
