"""The held-out split: a deterministic choice of *files* whose examples are never trained on.

A file is held out when its salted path hash ranks among the lowest `n_test` of all files:
n_test = max(⌈fraction · n_files⌉, min_files), at most a quarter of the files. Every example
of a held-out file is a test example: the plan gives it w = 0 and ρ = 0 and leaves it out of the
LP (`plan.build_plan(holdout=…)`), the trainer refuses a batch that holds one
(`trainer.train`), and every `compare` arm is evaluated on exactly these examples. Splitting by
file, not by example, keeps a test file's other chunks out of training too (chunks of one file
share names, imports and idioms; a split by example would leak them).

An example's file is the path of its id (`path#chunk@blob`, corpus.py); a chunk deduplicated
across files belongs to the file its id names. Changing the salt, the fraction or the minimum
changes the split; its digest (`Split.digest`) is recorded in `plan.json` so two runs can show
they were evaluated on the same examples.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from repoguard.core.errors import InputError

DEFAULT_FRACTION = 0.05
DEFAULT_MIN_FILES = 8
DEFAULT_SALT = "repoguard-holdout-v1"


@dataclass(frozen=True)
class Split:
    """`test`: bool (n_examples,), True for held-out examples (plan row order). `files`: the
    held-out paths, sorted. `digest`: SHA-256 over salt, fraction, minimum and the held-out ids."""

    test: np.ndarray
    files: tuple[str, ...]
    fraction: float
    min_files: int
    salt: str
    digest: str

    @property
    def n_test(self) -> int:
        """How many examples are held out."""
        return int(self.test.sum())

    def record(self) -> dict:
        """The JSON-able summary stored in `plan.json` under `extra["holdout"]`."""
        return {"fraction": self.fraction, "min_files": self.min_files, "salt": self.salt,
                "digest": self.digest, "n_files": len(self.files), "n_examples": self.n_test}


def example_path(example_id: str) -> str:
    """The file an example id names: `path#chunk@blob` → `path` (ids without '#' stand for
    themselves, as in synthetic incidences)."""
    head, sep, tail = example_id.rpartition("#")
    return head if sep and "@" in tail else example_id


def holdout_split(example_ids: Sequence[str], *, fraction: float = DEFAULT_FRACTION,
                  min_files: int = DEFAULT_MIN_FILES, salt: str = DEFAULT_SALT) -> Split:
    """Choose the held-out files of `example_ids` (see the module docstring).

    Args:
        example_ids: the plan's example ids, in row order.
        fraction: share of files held out, in [0, 0.5]; 0 = no split (nothing held out).
        min_files: at least this many files are held out (when fraction > 0), capped at a quarter
            of the files so training keeps most of the corpus.
        salt: mixed into the hash so a user can draw another split.

    Raises InputError for a fraction outside [0, 0.5] or a negative minimum."""
    if not 0 <= fraction <= 0.5:
        raise InputError(f"holdout: fraction must be in [0, 0.5], got {fraction!r}")
    if min_files < 0:
        raise InputError(f"holdout: minimum number of files must be ≥ 0, got {min_files!r}")
    paths = [example_path(e) for e in example_ids]
    files = sorted(set(paths))
    n_test = 0
    if fraction > 0 and files:
        n_test = min(max(math.ceil(fraction * len(files)), min_files), len(files) // 4)
    rank = sorted(files, key=lambda f: hashlib.sha256(f"{salt}\0{f}".encode()).hexdigest())
    chosen = set(rank[:n_test])
    test = np.fromiter((p in chosen for p in paths), dtype=bool, count=len(paths))
    h = hashlib.sha256(f"{salt}\0{fraction!r}\0{min_files}".encode())
    for i in np.flatnonzero(test):
        h.update(b"\0" + example_ids[i].encode())
    return Split(test=test, files=tuple(sorted(chosen)), fraction=float(fraction), min_files=int(min_files),
                 salt=salt, digest=h.hexdigest())


def slices(incidence, test: np.ndarray) -> dict[str, np.ndarray]:
    """Evaluation slices over the held-out examples, as row indices into the plan/incidence:
    `public` (tied to no secret), `secret-tied` (tied to any secret), and `secret:<id>` for each
    secret with at least one held-out example. Empty slices other than the first two are left
    out."""
    m = incidence.matrix.tocsr()
    tied = m.getnnz(axis=1) > 0
    idx = np.flatnonzero(test)
    out = {"public": idx[~tied[idx]], "secret-tied": idx[tied[idx]]}
    csc = m.tocsc()
    for j, s in enumerate(incidence.secrets):
        rows = csc.indices[csc.indptr[j]:csc.indptr[j + 1]]
        rows = np.sort(rows[test[rows]])
        if rows.size:
            out[f"secret:{s.id}"] = rows
    return out


def split_from_config(example_ids: Sequence[str], plan_config) -> Split:
    """`holdout_split` with the `[plan]` settings `holdout_fraction`, `holdout_min_files` and
    `holdout_salt` (config.PlanConfig)."""
    return holdout_split(example_ids, fraction=plan_config.holdout_fraction,
                         min_files=plan_config.holdout_min_files, salt=plan_config.holdout_salt)
