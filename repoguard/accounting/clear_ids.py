"""What a public phase trained in the clear: the ids of its examples, as content-addressed Parquet
side files of the ledger (`ledger.py` chains their digests).

A two-phase run [Shi et al. 2022, "Just Fine-tune Twice" §3] first trains without noise on the
examples tied to no secret. That is sound only for the secrets known at the time: an example a
later analysis ties to a secret (a newly declared secret, a new credential rule, a changed import
resolution) was seen in the clear, so that secret's bound from the earlier run is 1
(`clear_exposures.py`). The ledger therefore remembers those ids.

File `clear-<h>.parquet` in the ledger's side directory, one column `example_id` (string, the
sorted distinct ids, zstd, no dictionary), where h is the first 32 hex digits of the SHA-256 of the ids joined
by "\\n" (UTF-8): the name is the content's address, so the entries of one run (started,
checkpoints, completed), and later runs whose public phase used the same examples, share one file.
The entry stores {"file", "sha256" (of the file's bytes), "n" (distinct ids)}.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Iterable, Sequence

from repoguard.accounting.ledger_state import file_digest   # one digest for every side file
from repoguard.core.errors import InputError, PolicyError

COLUMN = "example_id"
PREFIX = "clear-"


def normalise(ids: Iterable[str]) -> list[str]:
    """The sorted distinct ids as strings. Already-normalised input (every record of one run: the
    guard normalises once) is checked in O(n) instead of sorted again."""
    out = [str(x) for x in ids]
    if all(a < b for a, b in zip(out, out[1:])):
        return out
    return sorted(set(out))


def content_name(ids: Sequence[str]) -> str:
    """`clear-<h>.parquet` for the normalised ids (module docstring)."""
    h = hashlib.sha256("\n".join(ids).encode("utf-8")).hexdigest()[:32]
    return f"{PREFIX}{h}.parquet"


def write_ids(path: Path, ids: Sequence[str]) -> str:
    """Write normalised `ids` atomically (temp file, fsync, rename); returns the file's SHA-256."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(pa.table({COLUMN: pa.array(list(ids), pa.string())}), tmp, compression="zstd",
                   use_dictionary=False)
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    os.chmod(tmp, 0o600)                       # owner-only, like the ledger
    digest = file_digest(tmp)
    os.replace(tmp, path)
    return digest


def read_ids(path: Path) -> list[str]:
    """The ids stored in `path` (sorted, distinct). Raises OSError/ValueError (pyarrow's
    ArrowInvalid is a ValueError) for an unreadable file."""
    import pyarrow.parquet as pq

    return [str(x) for x in pq.read_table(path, columns=[COLUMN]).column(0).to_pylist()]


def content_key(example_id: str) -> str:
    """What an example id says about its *content*, without its path: `#chunk@blob12` of
    `path#chunk@blob12` (the last "#": a path may hold one). Two examples with one key are the
    same span of the same blob (same file content, same cut), wherever the file lies."""
    i = str(example_id).rfind("#")
    return str(example_id)[i:] if i >= 0 else str(example_id)


def contains_content(path: Path, candidates: Sequence[str]):
    """bool array (len(candidates),): which candidate ids have the content of an id the file at
    `path` holds (`content_key`: a file renamed or copied since keeps its blob, so its examples
    still match). The file's column is probed in pyarrow (`is_in` against a hash set of the
    keys), so a file of millions of ids is never turned into Python strings; only the matches
    are. Raises OSError/ValueError for an unreadable file."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    if not len(candidates):
        return np.zeros(0, dtype=bool)
    keys = [content_key(c) for c in candidates]
    col = pq.read_table(path, columns=[COLUMN]).column(0)
    stored = pc.replace_substring_regex(col, pattern=r"^.*#", replacement="#")   # greedy: the last "#"
    found = set(stored.filter(pc.is_in(stored, value_set=pa.array(sorted(set(keys)), pa.string()))).to_pylist())
    return np.fromiter((k in found for k in keys), dtype=bool, count=len(keys))


def store(side: Path, ids: Sequence[str], referenced: dict[str, str]) -> dict:
    """Write (or reuse) the side file for `ids` in directory `side`; returns the entry's reference
    {"file", "sha256", "n"}. `referenced` maps file names earlier entries name to their digests:
    an existing file they name is reused when it still matches, and a mismatch is a PolicyError
    (the file was edited: the ledger is never extended past tampering). A file no entry names (an
    append that crashed after writing it) is rewritten."""
    norm = normalise(ids)
    name = content_name(norm)
    f = side / name
    want = referenced.get(name)
    if want is not None and f.is_file():
        if file_digest(f) != want:
            raise PolicyError(f"{f}: clear-phase ids file does not match the digest earlier ledger "
                              "entries recorded (edited or swapped); refusing to append")
        return {"file": name, "sha256": want, "n": len(norm)}
    if want is not None:
        raise PolicyError(f"{f}: clear-phase ids file named by earlier ledger entries is missing; "
                          "refusing to append")
    return {"file": name, "sha256": write_ids(f, norm), "n": len(norm)}


def check_content(path: Path) -> str | None:
    """None when the ids in `path` hash to its name (what `ledger verify --deep` checks), else
    the problem in words."""
    try:
        ids = read_ids(path)
    except (OSError, ValueError) as exc:
        return f"clear-phase ids file {path.name} unreadable ({exc})"
    norm = ids
    if norm != normalise(norm) or content_name(norm) != path.name:
        return f"clear-phase ids file {path.name}: its ids do not hash to its name (rewritten)"
    return None


def check_plan_ids(plan, ids: Sequence[str]) -> None:
    """A public phase trains on the plan's training examples only (never a held-out one).

    Raises InputError naming the count and one offending id."""
    row = {e: i for i, e in enumerate(plan.example_ids)}
    test = plan.test_mask
    foreign = [str(e) for e in ids if str(e) not in row]
    held = [str(e) for e in ids if str(e) in row and test[row[str(e)]]]
    for bad, what in ((foreign, "not examples of the plan"), (held, "held-out examples")):
        if bad:
            raise InputError(f"ledger: {len(bad)} clear-phase example id(s) are {what}, e.g. {bad[0]!r}")
