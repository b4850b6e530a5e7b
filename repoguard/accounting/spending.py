"""Typed records of privacy spending, in the spirit of dp_accounting's `DpEvent` (a value that
says which mechanism ran, from which an accountant computes the cost).

* `SpendingEvent` — what ONE run spent on ONE secret (or on the undetected floor's account): its
  divergences over the steps it completed, its dominating pair [Hush §4: the Poisson mixture of
  the secret's examples at a = s/σ, for T steps], σ, T and the training phase. The ledger stores
  `record()` per secret (`ledger.record_run`), so its on-disk form is unchanged.
* `Spent` — what EARLIER runs spent, as the ledger reads it (`ledger.read_spent`): per secret the summed
  divergences and the earlier runs' pair records, and the (σ, T) of runs that recorded nothing on
  the floor's account (`legacy`, counted at ρ = 1 by `planning.undetected.FloorAccount`). A plan
  starts from it (`planning.plan.build_plan(spent=…)`).
* `SpentArrays` — `Spent` aligned with a list of secrets, as the calibrator reads it
  (`calibrate.calibrate(spent=…)`).

Divergences are in nats; Rényi orders are keyed by `f"{α:g}"`. KL and Rényi divergences add
across steps and runs [Hush §4]; the pairs compose by convolving their privacy-loss
distributions (`pld.pld_bound(history=…)`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np


@dataclass(frozen=True)
class SpendingEvent:
    """One run's spending on one secret. `secret` the id (or a floor account such as
    "@undetected:k=1"); `kl` nats; `renyi` {α (str): nats}, finite orders only (a missing order
    counts as +inf); `pair` the run's dominating pair as `pld.pair_record` ({"a", "steps", "m",
    "logw", "n"}) or None when the secret's examples could not be sampled or no step completed;
    `sigma` the noise multiplier σ; `steps` T completed; `phase` the training phase (2 for a
    two-phase run's private phase, None for a single-phase run)."""

    secret: str
    kl: float
    renyi: Mapping[str, float]
    pair: dict | None
    sigma: float
    steps: int
    phase: int | None = None

    @classmethod
    def scaled(cls, secret: str, *, kl: float, renyi: Mapping[str, float], pair: dict | None, sigma: float,
               steps: int, planned_steps: int, phase: int | None = None) -> "SpendingEvent":
        """The event of a run that completed `steps` of the `planned_steps` its plan priced at
        `kl`/`renyi`: divergences scale by steps/planned_steps (they add per step), +inf orders
        are dropped, the pair is re-stamped with the steps completed (None when none)."""
        frac = steps / planned_steps
        p = dict(pair or {}) or None
        if p is not None:
            p["steps"] = int(steps)
        return cls(secret=str(secret), kl=kl * frac,
                   renyi={a: v * frac for a, v in renyi.items() if _finite(v)},
                   pair=p if steps > 0 else None, sigma=float(sigma), steps=int(steps), phase=phase)

    def record(self) -> dict:
        """The ledger's per-secret record {"kl", "renyi", "pair"} (`ledger_state.Run.from_dict`)."""
        return {"kl": self.kl, "renyi": dict(self.renyi), "pair": self.pair}


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


@dataclass(frozen=True)
class SpentArrays:
    """Earlier spending aligned with a list of n secrets: `kl` (n,) nats, `renyi` (n, n_alpha)
    nats (+inf where an order is unknown), `pairs` (n,) per secret a tuple of (Mixture, a, steps)
    of its earlier runs — () when it spent nothing, None when some run's pair is unknown (that
    secret is then certified by divergences alone)."""

    kl: np.ndarray
    renyi: np.ndarray
    pairs: list | None = None

    def plus(self, other: "SpentArrays") -> "SpentArrays":
        """These secrets followed by `other`'s (the floor's account calibrated as one more)."""
        return SpentArrays(np.append(self.kl, other.kl), np.vstack([self.renyi, other.renyi]),
                           list(self.pairs if self.pairs is not None else [None] * len(self.kl))
                           + list(other.pairs if other.pairs is not None else [None] * len(other.kl)))


@dataclass(frozen=True)
class Spent:
    """What earlier runs spent, by secret id (module docstring). `divergences` {id: (kl nats,
    {α (str): nats})} as `ledger.spending`; `pairs` {id: [pair record, …] or None (unknown)};
    `legacy` ((σ, T completed), …) of the runs whose last entry recorded nothing on the floor's
    account."""

    divergences: Mapping[str, tuple[float, Mapping[str, float]]] = field(default_factory=dict)
    pairs: Mapping[str, list | None] = field(default_factory=dict)
    legacy: tuple = ()

    def arrays(self, secrets, alphas) -> SpentArrays:
        """`SpentArrays` aligned with `secrets` (objects with `.id`) and `alphas`. A secret the
        ledger never saw spent nothing; an α the ledger lacks for a secret that spent something
        counts as +inf; pairs become (Mixture, a, steps) (`pld.pair_from_record`), None where
        the ledger spent without recording them."""
        from repoguard.accounting.pld import pair_from_record

        kl = np.zeros(len(secrets))
        ren = np.zeros((len(secrets), len(alphas)))
        hist = []
        for j, s in enumerate(secrets):
            if s.id in self.divergences:
                k, r = self.divergences[s.id]
                kl[j] = k
                ren[j] = [r.get(f"{a:g}", float("inf")) for a in alphas]
            recs = self.pairs.get(s.id, None if s.id in self.divergences else [])
            hist.append(None if recs is None else tuple(pair_from_record(d) for d in recs))
        return SpentArrays(kl, ren, hist)

