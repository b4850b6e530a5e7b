"""What `repoguard plan` (and `run`'s plan stage) reports about a plan: the JSON summary, and the
progress bar over σ's calibration."""
from __future__ import annotations


def plan_summary(plan, target) -> dict:
    """The JSON `repoguard plan --json` prints."""
    tight = max(plan.secrets, key=lambda s: (s.achieved_bound if s.dp_bound is None else s.dp_bound) / s.r,
                default=None)   # the secret that sets σ (an exposed secret's bound is 1 whatever σ)
    insecure = plan.extra.get("insecure_runs") or {}    # secrets an insecure-reproducible run trained
    from repoguard.planning.retention import least_retained
    return {
        "plan_dir": str(target), "sigma": plan.sigma, "batch_size": plan.batch_size, "steps": plan.steps,
        "clip_norm": plan.clip_norm, "c": plan.c, "cap": plan.cap, "accountant": plan.accountant,
        "adjacency": plan.adjacency, "n_examples": len(plan.example_ids), "sum_w": float(plan.w.sum()),
        "max_rho": float(plan.rho.max()) if plan.rho.size else 0.0,
        "sigma_paper_kl": plan.extra.get("sigma_paper_kl"),
        "sigma_ratio_kl_over_this": plan.extra.get("sigma_ratio_kl_over_this"),
        "sigma_uniform": plan.extra.get("sigma_uniform"), "noise_reduction": plan.extra.get("noise_reduction"),
        "holdout": plan.extra.get("holdout"), "undetected_floor": plan.extra.get("undetected_floor"),
        "batch_rule": plan.extra.get("batch_rule"), "floor_bought": plan.extra.get("floor_bought"),
        "binding_secret": tight.id if tight else None, "lp": plan.extra.get("lp"),
        "sweep": plan.extra.get("sweep"), "retention": plan.extra.get("retention"),
        "least_retained": least_retained(plan.extra.get("retention")),
        "objective": plan.extra.get("objective", "examples"),
        "exposures": plan.extra.get("exposures", []),
        "insecure_runs": insecure,
        "secrets": [{"id": s.id, "p": s.p, "r": s.r, "achieved_bound": s.achieved_bound,
                     "binding": s.binding, "kl_spent": s.kl_spent, "n_examples": s.n_examples,
                     "sum_w": s.sum_w, "dp_bound": s.dp_bound, "insecure_runs": insecure.get(s.id, [])}
                    for s in plan.secrets],
    }


class CalibrationProgress:
    """rich progress over the calibration's group checks."""

    def __init__(self) -> None:
        from rich.progress import Progress

        self.p = Progress(transient=True)
        self.task = None

    def __call__(self, done: int, total: int) -> None:
        if self.task is None:
            self.p.start()
            self.task = self.p.add_task("calibrating σ", total=total)
        self.p.update(self.task, completed=done, total=total)

    def close(self) -> None:
        """Stop the progress display if it was started."""
        if self.task is not None:
            self.p.stop()
