"""Secrets exposed by a public phase: examples a run trained on in the clear that a later analysis
ties to a secret.

A two-phase run [Shi et al. 2022, "Just Fine-tune Twice" §3] trains phase 1 without noise on the
examples tied to no *then known* secret, and records their ids in the ledger (`clear_ids.py`).
When the incidence of a later analysis ties one of those examples to secret j (a newly declared
secret, a new credential rule, an import that now resolves to secret code), run R has released
gradients of an example of E_j with no noise. No f-divergence between the two hypotheses of
Hush Def. 3.1 is then bounded, so the reconstruction bound of Hush Lemma 3.2 is the trivial
one: secret j's bound, from R onwards, is 1 whatever σ later runs use.

An example is the exact text its id names (`path#chunk@blob`), and matching is by its content,
not its path (`clear_ids.content_key`: chunk index and blob SHA): a file moved or copied since
the clear run (`git mv`, then a secret declared over the new path) holds the same examples, so it
is still exposed; a file changed since is a different blob, a different example (a credential
added after the run was not in what it trained on). Every entry of a run that carries a "clear"
reference counts, whatever the run's status (an interrupted run may have trained some of phase 1).

`repoguard plan` and `repoguard run` refuse (PolicyError, exit 1) while a secret is exposed and
not acknowledged in the config, `[ledger] acknowledged_exposures`: an entry "SECRET" acknowledges
every run's exposure of that secret, "SECRET@RUN" one run's. Once acknowledged the plan is made as
usual (σ still keeps this run's and earlier private runs' divergences within r_j, so the new run
adds no more than the target) but the secret's achieved bound is reported as 1 with binding
"exposed"; `SecretPlan.dp_bound` keeps what the divergences alone give, and the plan records the
exposures (`Plan.extra["exposures"]`) and the clear runs it checked (`extra["clear_runs"]`) for
the trainer's guard (`training/guard.py`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from repoguard.core.errors import PolicyError

EXPOSED = "exposed"          # SecretPlan.binding of an exposed secret
SHOWN = 5                    # example ids named per exposure


@dataclass(frozen=True)
class ClearRun:
    """A run with a public phase: its id, the time of its first ledger entry (UTC ISO), and the
    content-addressed side files (`clear_ids.py`) its entries name with the number of ids."""

    run_id: str
    time: str
    files: tuple[str, ...]
    n_examples: int

    def record(self) -> dict:
        """JSON form for `ledger show --json` and plan.json: {"run_id", "time", "n_examples", "files"}."""
        return {"run_id": self.run_id, "time": self.time, "n_examples": self.n_examples,
                "files": list(self.files)}


@dataclass(frozen=True)
class Exposure:
    """Secret `secret` exposed by run `run_id` (at `time`): `n_examples` of the secret's current
    examples E_j were trained on in the clear; `examples` names the first few (sorted ids)."""

    secret: str
    run_id: str
    time: str
    n_examples: int
    examples: tuple[str, ...]
    acknowledged: bool = False

    def record(self) -> dict:
        """The JSON form (plan.json, `plan --json`, `ledger show --json`); "bound" is always 1."""
        return {"secret": self.secret, "run_id": self.run_id, "time": self.time,
                "n_examples": self.n_examples, "examples": list(self.examples), "bound": 1.0,
                "acknowledged": self.acknowledged}


def clear_runs(ledger_path: str | Path) -> list[ClearRun]:
    """The runs of the ledger that trained in the clear, in order of their first entry.

    Reads the entries once and checks every named side file's digest (a deleted or edited file
    would hide an exposure). Raises PolicyError when the chain or a clear-phase file fails
    verification."""
    from repoguard.accounting.ledger import read_entries, verify
    from repoguard.accounting.ledger_io import check_side_file

    path = Path(ledger_path)
    check = verify(path, side_files=False)
    if not check["ok"]:
        raise PolicyError(f"{path}: ledger fails verification ({check['problems'][0]}); refusing to plan against it")
    runs: dict[str, dict] = {}
    checked: set[tuple[str, str]] = set()
    for e in read_entries(path):
        ref = e.get("clear")
        if not isinstance(ref, dict):
            continue
        key = (str(ref.get("file")), str(ref.get("sha256")))
        if key not in checked:
            bad = check_side_file(path, ref, f"{path}:{e.get('seq', 0) + 1}", "clear-phase ids")
            if bad:
                raise PolicyError(f"{bad[0]}; refusing to plan against it")
            checked.add(key)
        r = runs.setdefault(str(e["run_id"]), {"time": str(e.get("time", "")), "files": {}})
        r["files"][key[0]] = int(ref.get("n", 0))
    return [ClearRun(rid, r["time"], tuple(r["files"]), max(r["files"].values()))
            for rid, r in runs.items()]


def is_acknowledged(secret: str, run_id: str, acknowledged: Sequence[str]) -> bool:
    """Whether `acknowledged` (the config's `[ledger] acknowledged_exposures`) holds "SECRET" or
    "SECRET@RUN" for this exposure."""
    return secret in acknowledged or f"{secret}@{run_id}" in acknowledged


def find_exposures(ledger_path: str | Path, incidence, acknowledged: Sequence[str] = (),
                   runs: list[ClearRun] | None = None) -> list[Exposure]:
    """Every (secret, clear run) pair where the run trained in the clear on the content of an
    example that `incidence` (rows = examples, columns = secrets) ties to the secret, whatever
    its path then (module doc); sorted by secret, then run. `runs` defaults to `clear_runs(ledger_path)`. Only tied rows are looked up (pyarrow
    hash set per side file), so the cost is one read of each distinct file.
    Raises PolicyError as `clear_runs` does, and for an unreadable side file."""
    import numpy as np

    from repoguard.accounting.clear_ids import contains_content
    from repoguard.accounting.ledger import side_dir

    runs = clear_runs(ledger_path) if runs is None else runs
    if not runs:
        return []
    csr = incidence.matrix.tocsr()
    tied = np.flatnonzero(csr.getnnz(axis=1) > 0)
    if tied.size == 0:
        return []
    tied_ids = [incidence.example_ids[i] for i in tied]
    hits: dict[str, np.ndarray] = {}
    for f in sorted({f for r in runs for f in r.files}):
        try:
            hits[f] = contains_content(side_dir(ledger_path) / f, tied_ids)
        except (OSError, ValueError) as exc:
            raise PolicyError(f"{side_dir(ledger_path) / f}: clear-phase ids file unreadable ({exc})") from None
    out = []
    for r in runs:
        mask = np.zeros(tied.size, dtype=bool)
        for f in r.files:
            mask |= hits[f]
        if not mask.any():
            continue
        sub = csr[tied[mask]].tocsc()
        for j in np.flatnonzero(sub.getnnz(axis=0) > 0):
            rows = tied[mask][sub.indices[sub.indptr[j]:sub.indptr[j + 1]]]
            ids = sorted(incidence.example_ids[i] for i in rows)
            sid = incidence.secrets[j].id
            out.append(Exposure(sid, r.run_id, r.time, len(ids), tuple(ids[:SHOWN]),
                                is_acknowledged(sid, r.run_id, acknowledged)))
    return sorted(out, key=lambda x: (x.secret, x.time, x.run_id))


def describe(x: Exposure) -> str:
    """One line: "secret 'S' was trained in the clear by run R (time) on 2 of its examples
    (e.g. a, b)"."""
    more = ", …" if x.n_examples > len(x.examples) else ""
    return (f"secret {x.secret!r} was trained in the clear by run {x.run_id} ({x.time}) on "
            f"{x.n_examples} of its example(s) (e.g. {', '.join(x.examples)}{more})")


def print_lines(records: list[dict]) -> list[str]:
    """Human lines for exposure records (`Exposure.record()`), as `plan` prints them."""
    out = []
    for d in records:
        more = ", …" if d["n_examples"] > len(d["examples"]) else ""
        out.append(f"EXPOSED: secret {d['secret']} — run {d['run_id']} ({d['time']}) trained in the clear on "
                   f"{d['n_examples']} of its example(s) (e.g. {', '.join(d['examples'])}{more}); its bound is 1"
                   f"{' (acknowledged)' if d['acknowledged'] else ' (NOT acknowledged)'}")
    return out


def refuse_unacknowledged(exposures: list[Exposure], *, config_path: str | Path | None) -> None:
    """PolicyError (one line) naming the unacknowledged exposures (up to 3, then a count), why
    their bound is 1, and the config entry that acknowledges them; nothing when all are."""
    todo = [x for x in exposures if not x.acknowledged]
    if not todo:
        return
    shown = "; ".join(describe(x) for x in todo[:3])
    more = f"; and {len(todo) - 3} more" if len(todo) > 3 else ""
    keys = ", ".join(f'"{s}"' for s in dict.fromkeys(x.secret for x in todo))
    where = config_path or "repoguard.toml"
    raise PolicyError(f"ledger: {len(todo)} exposure(s) by a public phase: {shown}{more}. A clear phase gives "
                      "no protection, so the bound of each is 1, not its target r; refusing to plan for it. "
                      f"Acknowledge in {where}: [ledger] acknowledged_exposures = [{keys}] "
                      "(or \"SECRET@RUN\" for one run)")


def plan_exposures(ledger_path: str | Path, incidence, acknowledged: Sequence[str], *,
                   config_path: str | Path | None = None) -> tuple[list[Exposure], list[ClearRun]]:
    """What `plan` and `run` call before planning: (exposures, clear runs checked). Raises
    PolicyError for an unacknowledged exposure (`refuse_unacknowledged`) or a ledger/side file
    that fails verification."""
    runs = clear_runs(ledger_path)
    exposures = find_exposures(ledger_path, incidence, acknowledged, runs=runs)
    refuse_unacknowledged(exposures, config_path=config_path)
    return exposures, runs


def mark_plan(plan, exposures: list[Exposure], runs: list[ClearRun]) -> None:
    """Report each exposed secret's bound as 1 (binding "exposed"; `dp_bound` keeps the
    divergences' bound) and record `extra["exposures"]` and `extra["clear_runs"]` (run ids the
    check covered) for the trainer's guard. Mutates `plan`."""
    exposed = {x.secret for x in exposures}
    plan.secrets = [dataclasses.replace(s, achieved_bound=1.0, binding=EXPOSED, dp_bound=s.achieved_bound)
                    if s.id in exposed else s for s in plan.secrets]
    plan.extra["exposures"] = [x.record() for x in exposures]
    plan.extra["clear_runs"] = sorted(r.run_id for r in runs)


def guard_problem(plan, ledger_path: str | Path, *, own_run: str | None) -> str | None:
    """Why training against `plan` must be refused for exposures, or None: an exposure the plan
    recorded unacknowledged, or a run of the ledger that trained in the clear (other than
    `own_run`) which the plan's check did not cover (a plan made before this check, or before
    that run). Raises PolicyError as `clear_runs` does."""
    todo = [x for x in plan.extra.get("exposures", []) if not x.get("acknowledged")]
    if todo:
        return (f"secret {todo[0]['secret']!r} is exposed by run {todo[0]['run_id']} (trained in the clear) "
                "and not acknowledged; its bound is 1. Acknowledge it in [ledger] acknowledged_exposures "
                "and re-run `repoguard plan`")
    covered = set(plan.extra.get("clear_runs", []))
    new = sorted(r.run_id for r in clear_runs(ledger_path) if r.run_id != own_run and r.run_id not in covered)
    if new:
        return (f"run(s) {', '.join(new[:3])} trained in the clear and this plan was not checked against "
                "them for exposed secrets; re-run `repoguard plan`")
    return None


def ledger_exposures(ledger_path: str | Path, out: str | Path, acknowledged: Sequence[str] = ()) -> dict:
    """What `repoguard ledger show` lists: {"clear_runs": [ClearRun.record()], "exposures":
    [Exposure.record()] against the incidence in `out` (None when `out` has none: run
    `repoguard analyze`)}. Raises PolicyError as `clear_runs` does."""
    runs = clear_runs(ledger_path)
    exposures = None
    if (Path(out) / "incidence" / "secrets.json").is_file():
        from repoguard.analyzers.incidence import load_incidence

        exposures = [x.record() for x in find_exposures(ledger_path, load_incidence(out), acknowledged, runs=runs)]
    return {"clear_runs": [r.record() for r in runs], "exposures": exposures}
