"""The training plan: weights w, sampling probabilities ρ, noise multiplier σ and what each
secret is promised (Hush Alg. 2 lines 1–5). Written by `repoguard plan`, read by `repoguard train`.

On disk (`OUT/plan/`, format version 1):
    plan.json   scalars and the per-secret table (below)
    plan.npz    example_ids (str), w (float64), rho (float64), aligned with the incidence rows
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from repoguard.artefacts import FORMAT_VERSION, atomic_dir, atomic_write_json, read_json
from repoguard.errors import InputError


@dataclass(frozen=True)
class SecretPlan:
    """What one secret gets from the plan.

    `achieved_bound`: posterior bound on reconstruction after this run *and* what the ledger says
    was spent before (Hush Lemma 3.2); `binding`: which bound gave it ("kl" or "renyi:α");
    `kl_spent` (nats) and `renyi_spent` ({α: nats}) are this run's divergences, T steps composed;
    `n_examples` = |E_j|, `sum_w` = Σ_{i∈E_j} w_i."""

    id: str
    p: float
    r: float
    achieved_bound: float
    binding: str
    kl_spent: float
    renyi_spent: dict[str, float]
    n_examples: int
    sum_w: float


@dataclass
class Plan:
    """σ is the noise multiplier (noise std = σ·C on the clipped-gradient sum); B the expected
    batch size, a public constant the sum is divided by; T steps; C the clip norm (L2)."""

    sigma: float
    batch_size: float
    steps: int
    clip_norm: float
    c: float
    cap: str
    accountant: str
    adjacency: str
    example_ids: list[str]
    w: np.ndarray
    rho: np.ndarray
    secrets: list[SecretPlan] = field(default_factory=list)
    extra: dict = field(default_factory=dict)      # sweep table, paper-KL σ, solver stats…

    def check(self) -> None:
        """Invariants every consumer relies on; raises InputError when violated."""
        n = len(self.example_ids)
        if self.w.shape != (n,) or self.rho.shape != (n,):
            raise InputError(f"plan: w/ρ shapes {self.w.shape}/{self.rho.shape} do not match {n} examples")
        if np.any(self.rho < 0) or np.any(self.rho > 1):
            raise InputError("plan: every sampling probability ρ must lie in [0, 1]")
        if not (self.sigma > 0 and self.batch_size > 0 and self.steps > 0 and self.clip_norm > 0):
            raise InputError("plan: σ, B, T and C must be positive")


def save_plan(plan: Plan, out_dir: str | Path) -> Path:
    """Write `out_dir/plan/` atomically; returns the directory."""
    plan.check()
    target = Path(out_dir) / "plan"
    with atomic_dir(target) as tmp:
        doc = {
            "format_version": FORMAT_VERSION,
            "sigma": plan.sigma, "batch_size": plan.batch_size, "steps": plan.steps,
            "clip_norm": plan.clip_norm, "c": plan.c, "cap": plan.cap,
            "accountant": plan.accountant, "adjacency": plan.adjacency,
            "n_examples": len(plan.example_ids), "sum_w": float(plan.w.sum()),
            "secrets": [asdict(s) for s in plan.secrets], "extra": plan.extra,
        }
        atomic_write_json(tmp / "plan.json", doc)
        np.savez_compressed(tmp / "plan.npz", example_ids=np.asarray(plan.example_ids, dtype=str),
                            w=plan.w.astype(np.float64), rho=plan.rho.astype(np.float64))
    return target


def load_plan(out_dir: str | Path) -> Plan:
    """Read `out_dir/plan/`. Raises InputError naming the file when missing or corrupt."""
    d = Path(out_dir) / "plan"
    doc = read_json(d / "plan.json", what="plan (run `repoguard plan`)")
    if doc.get("format_version") != FORMAT_VERSION:
        raise InputError(f"{d / 'plan.json'}: format version {doc.get('format_version')} is not {FORMAT_VERSION}")
    try:
        z = np.load(d / "plan.npz", allow_pickle=False)
        plan = Plan(
            sigma=float(doc["sigma"]), batch_size=float(doc["batch_size"]), steps=int(doc["steps"]),
            clip_norm=float(doc["clip_norm"]), c=float(doc["c"]), cap=doc["cap"],
            accountant=doc["accountant"], adjacency=doc["adjacency"],
            example_ids=[str(x) for x in z["example_ids"]], w=z["w"], rho=z["rho"],
            secrets=[SecretPlan(**s) for s in doc["secrets"]], extra=doc.get("extra", {}),
        )
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{d}: corrupt plan ({exc})") from None
    plan.check()
    return plan
