"""The ledger around a training run: refuse a plan the ledger has overtaken, record what was spent.

`repoguard plan` calibrates σ so that every secret's *cumulative* bound (the ledger's earlier runs
plus this plan) stays ≤ r_j. Before a private run starts, the trainer checks two things:

1. the ledger head the plan was made against (`plan.extra["ledger_head"]`, the last entry hash or
   the genesis hash) is still the head, apart from entries of the run being resumed; a plan
   without the field is taken as made against an empty ledger;
2. independently, the cumulative bound recomputed from the ledger (every other run's last entry,
   `repoguard.accounting.ledger` semantics) plus this plan's divergences stays ≤ r_j for every
   secret [Hush Lemma 3.2, KL and Rényi divergences adding across runs];
3. no secret is exposed by an earlier run's public (clear) phase without the user's
   acknowledgement, and every such run in the ledger was covered by the plan's exposure check
   (`repoguard.accounting.clear_exposures.guard_problem`).

Any failure is a PolicyError naming the secrets. The check is repeated where it matters, at each
append: `record` passes the head `check` accepted to the ledger, which compare-and-swaps it under
its lock (`ledger.append_entry`), so a run recorded in between (another `train` on the same ledger)
makes this one's records refused and its adapter unpublished (issue 32 A). Entries are appended with
`repoguard.accounting.ledger.record_run`; the last entry of a run id is what counts, so a run
records "running" at each checkpoint, "interrupted"/"failed" when it stops and "completed" before
its adapter is published; a resume continues under the same run id.
"""
from __future__ import annotations

import math
from pathlib import Path

from repoguard.core.errors import PolicyError

HEAD_KEY = "ledger_head"
_GENESIS = "0" * 64
_TOL = 1e-6          # relative slack for re-deriving the plan's own bound (bisection tolerance)


class LedgerGuard:
    """Checks a plan against the ledger at `path` and appends runs to it (rank 0 only).

    A two-phase run (`training.phases`) sets `clear_example_ids` (the examples its public phase
    trained on without noise) and `phases` (its phase-1 record and the undetected-secret floor
    after both phases); every entry the run appends carries them."""

    def __init__(self, path: str | Path, *, clear_example_ids=(), phases: dict | None = None) -> None:
        self.path = Path(path)
        from repoguard.accounting.clear_ids import normalise

        # sorted once here: every checkpoint record of the run then skips the sort (1 M ids: ~2 s)
        self.clear_example_ids = tuple(normalise(clear_example_ids))
        self.phases = phases
        self.base_head: str | None = None     # the head `check` accepted: records compare-and-swap it
        self.head: str | None = None          # hash of the last entry this guard appended

    @staticmethod
    def _module():
        from repoguard.accounting import ledger  # lazy: keeps `repoguard --help` light

        return ledger

    def recorded_steps(self, run_id: str) -> int:
        """steps_completed of `run_id`'s last entry (0 when absent)."""
        last = [e for e in self._module().read_entries(self.path) if e.get("run_id") == run_id]
        return int(last[-1].get("steps_completed", 0)) if last else 0

    def check(self, plan, *, own_run: str | None = None) -> None:
        """Refuse (PolicyError) a plan the ledger has overtaken or whose cumulative bound would
        exceed some r_j; `own_run` is the run being resumed (its entries are not "other runs")."""
        mod = self._module()
        status = mod.verify(self.path)
        if not status["ok"]:
            raise PolicyError(f"{self.path}: ledger fails verification ({status['problems'][0]}); "
                              "refusing to train against it")
        entries = mod.read_entries(self.path)
        head = plan.extra.get(HEAD_KEY)
        hashes = [e.get("hash") for e in entries]
        if HEAD_KEY not in plan.extra:
            after = []          # no head recorded: rely on the cumulative recomputation below
        elif head in (None, _GENESIS):
            after = entries
        elif head in hashes:
            after = entries[hashes.index(head) + 1:]
        else:
            raise PolicyError(f"{self.path}: the ledger head this plan was made against "
                              f"({str(head)[:12]}…) is not in the ledger; re-run `repoguard plan`")
        # Appends re-check this head under the ledger's lock (compare-and-swap, `ledger.append_entry`):
        # a run recorded between this check and the append makes the plan stale.
        self.base_head = (head or _GENESIS) if HEAD_KEY in plan.extra else (status["last_hash"] or _GENESIS)
        foreign = [e for e in after if e.get("run_id") != own_run]
        if foreign:
            ids = ", ".join(sorted({str(e.get("run_id")) for e in foreign})[:3])
            raise PolicyError(f"{self.path}: {len(foreign)} ledger entr(ies) of other runs ({ids}) were "
                              "recorded after this plan was made; its σ no longer keeps every secret's "
                              "cumulative bound ≤ r. Re-run `repoguard plan` (or --resume an "
                              "interrupted run of this plan)")
        from repoguard.accounting.clear_exposures import guard_problem

        problem = guard_problem(plan, self.path, own_run=own_run)
        if problem:
            raise PolicyError(f"{self.path}: {problem}; refusing to train")
        from repoguard.accounting.spending import Spent

        over = exceeded(plan, Spent(*mod.spending(self.path, skip_run=own_run)))
        if over:
            desc = ", ".join(f"{sid} (bound {b:.3g} > r {r:.3g})" for sid, b, r in over[:5])
            raise PolicyError(f"{self.path}: this run would exceed the privacy ledger for "
                              f"{len(over)} secret(s): {desc}. Re-run `repoguard plan`")

    def record(self, plan, *, run_id: str, steps_completed: int, status: str,
               randomness: str | None = None, clear_example_ids=()) -> None:
        """Append an entry for `run_id` (cumulative steps of the run); `randomness` is the run's
        mode (`training.randomness`: "os-entropy", or "insecure-reproducible" for a test run);
        `clear_example_ids` the examples a public phase trained on without noise (`record_run`).
        Compare-and-swap against the head `check` accepted (or the plan's "ledger_head"): PolicyError
        when another run was recorded since. Sets `self.head` to the new entry's hash."""
        base = self.base_head or plan.extra.get(HEAD_KEY)
        entry = self._module().record_run(self.path, plan, run_id=run_id, steps_completed=steps_completed,
                                          status=status, randomness=randomness,
                                          clear_example_ids=tuple(clear_example_ids) or self.clear_example_ids,
                                          phases=self.phases, base_head=base)
        self.head = entry["hash"]


def exceeded(plan, prior) -> list[tuple[str, float, float]]:
    """Secrets whose bound after `prior` spending (an `accounting.spending.Spent`: earlier runs'
    divergences and pairs) plus this plan exceeds r: [(id, bound, r)].

    The bound is the minimum of the KL bound and the Rényi bounds over the plan's orders
    [Hush Lemma 3.2], on divergences summed across runs, and, where those miss r and the plan's
    accountant is "best", the Neyman–Pearson bound of the plan's pair composed with the earlier
    runs' pairs (`prior.pairs`; accounting/pld.py)."""
    from repoguard.accounting.bounds import kl_bound, renyi_bound
    from repoguard.accounting.calibrate import PLD_H
    from repoguard.accounting.pld import pair_from_record, pld_bound

    over = []
    for s in plan.secrets:
        kl0, ren0 = prior.divergences.get(s.id, (0.0, {}))
        bound = float(kl_bound(kl0 + s.kl_spent, s.p))
        for a, v in s.renyi_spent.items():
            if not math.isfinite(v) or (s.id in prior.divergences and str(a) not in ren0):
                continue
            bound = min(bound, float(renyi_bound(v + ren0.get(str(a), 0.0), float(a), s.p)))
        hist = prior.pairs.get(s.id, [])
        pair = getattr(s, "pair", None)
        if bound > s.r * (1 + _TOL) and pair is not None and hist is not None and plan.accountant == "best":
            mix, a_run, t_run = pair_from_record(pair)
            history = tuple(pair_from_record(d) for d in hist)
            for h in PLD_H:                            # coarse first; both are upper bounds
                bound = min(bound, float(pld_bound(mix, a_run, t_run, s.p, h=h, history=history)[0][0]))
                if bound <= s.r * (1 + _TOL):
                    break
        if bound > s.r * (1 + _TOL):
            over.append((s.id, bound, s.r))
    return over
