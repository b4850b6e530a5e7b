"""Evidence rows → the sparse example × secret incidence matrix E, with its explanation table.

E[i, j] is True when example i carries secret j (Hush §3.2: "E_j", the set of examples that
contain secret j). Analyzers tie *files* to secrets (`Evidence.path`); every example cut from a
file inherits that file's secrets, unless the evidence carries a byte `span` (a credential, a
codename mention in the text): then only the file's examples overlapping it. An example
deduplicated against another file's chunk carries the secrets of every file it stands for
(corpus.Corpus.file_examples).

On disk (`OUT/incidence/`, format version 1):
    secrets.json      [{"id", "kind", "p", "r", "description"}] in column order
    incidence.npz     scipy CSR: data/indices/indptr/shape, plus example_ids (column 0 of rows)
    evidence.parquet  path, secret_id, analyzer, reason, chain (list<string>), span_start/span_end
                      (int64, null when the evidence covers the whole file)
    summary.json      counts per analyzer, timings, config digest
"""
from __future__ import annotations

import json
import zipfile
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from typing import TYPE_CHECKING

from repoguard.core.artefacts import FORMAT_VERSION, atomic_dir, atomic_write_json, read_json
from repoguard.core.errors import InputError

if TYPE_CHECKING:  # numpy/scipy load lazily: the pre-commit hook imports this module for its types
    import numpy as np
    import scipy.sparse as sp


@dataclass(frozen=True)
class Secret:
    """A secret to protect: `kind` is "declared" (from repoguard.toml) or "credential";
    (p, r) as in Hush Def. 3.1."""

    id: str
    kind: str
    p: float
    r: float
    description: str = ""


@dataclass(frozen=True)
class Evidence:
    """Why a file carries a secret. `analyzer` is the name of a registered analyzer (registry.py);
    `reason` is one readable line ("imports trading.alpha.signals at line 12"); `chain` lists the hops for transitive ties;
    `span`, when set (a credential's byte range), narrows the tie to the examples whose text
    overlaps it instead of every example of the file. `selector`, when set, is the declared
    selector that made the tie, as written in repoguard.toml (the codename of a `codenames` row),
    so code never has to parse `reason`."""

    path: str
    secret_id: str
    analyzer: str
    reason: str
    chain: tuple[str, ...] = ()
    span: tuple[int, int] | None = None  # bytes [start, end) of the file holding the secret; None: all of it
    selector: str | None = None


@dataclass
class Incidence:
    """`matrix` is a boolean CSR of shape (len(example_ids), len(secrets))."""

    example_ids: list[str]
    secrets: list[Secret]
    matrix: sp.csr_matrix
    evidence: list[Evidence] = field(default_factory=list)
    summary: dict = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, int]:
        """(examples, secrets): the shape of `matrix`."""
        return self.matrix.shape

    def secret_index(self) -> dict[str, int]:
        """{secret id: column index} in `secrets`' order."""
        return {s.id: j for j, s in enumerate(self.secrets)}

    def examples_of(self, secret_id: str) -> np.ndarray:
        """Row indices of the examples carrying `secret_id` (E_j)."""
        j = self.secret_index()[secret_id]  # raises KeyError for an unknown id
        return self.matrix.tocsc()[:, j].nonzero()[0]


def tied_rows(ev: Evidence, file_examples: Mapping[str, Sequence[int]], examples: Sequence | None = None
              ) -> list[int]:
    """The example rows `ev` ties: every example of its file, or with a `span` (and `examples`
    given) those of the file's own examples whose bytes overlap it, plus any deduplicated from
    another file (build_incidence)."""
    out = []
    for i in file_examples.get(ev.path, ()):
        if ev.span is not None and examples is not None:
            ex = examples[i]
            if ex.path == ev.path and not (ex.start_byte < ev.span[1] and ev.span[0] < ex.end_byte):
                continue
        out.append(i)
    return out


def build_incidence(
    example_ids: Sequence[str],
    file_examples: Mapping[str, Sequence[int]],
    secrets: Sequence[Secret],
    evidence: Iterable[Evidence],
    examples: Sequence | None = None,
) -> Incidence:
    """Assemble E from file-level evidence. Evidence naming a file with no examples (excluded,
    or unknown) is kept in the table but adds no incidence. With `examples` (corpus.Example per
    row, giving `path`, `start_byte`, `end_byte`), evidence carrying a `span` ties only the file's
    examples whose bytes overlap the span; an example deduplicated from another file (its `path`
    differs) is tied anyway (its offsets are the other file's: the conservative side). Raises
    ValueError on an unknown secret id."""
    import numpy as np
    import scipy.sparse as sp

    col = {s.id: j for j, s in enumerate(secrets)}
    rows: list[int] = []
    cols: list[int] = []
    kept: list[Evidence] = []
    for ev in evidence:
        if ev.secret_id not in col:
            raise ValueError(f"evidence for unknown secret {ev.secret_id!r}")
        kept.append(ev)
        for i in tied_rows(ev, file_examples, examples):
            rows.append(i)
            cols.append(col[ev.secret_id])
    m = sp.csr_matrix(
        (np.ones(len(rows), dtype=bool), (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64))),
        shape=(len(example_ids), len(secrets)), dtype=bool,
    )
    m.sum_duplicates()
    m.data[:] = True
    return Incidence(example_ids=list(example_ids), secrets=list(secrets), matrix=m, evidence=kept)


def save_incidence(inc: Incidence, out_dir: str | Path) -> Path:
    """Write `inc` to `out_dir/incidence/` atomically; returns that directory."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    target = Path(out_dir) / "incidence"
    with atomic_dir(target) as tmp:
        atomic_write_json(tmp / "secrets.json", {"format_version": FORMAT_VERSION,
                                                 "secrets": [asdict(s) for s in inc.secrets]})
        m = inc.matrix.tocsr()
        np.savez_compressed(
            tmp / "incidence.npz", data=m.data.astype(bool), indices=m.indices, indptr=m.indptr,
            shape=np.asarray(m.shape), example_ids=np.asarray(inc.example_ids, dtype=object).astype(str),
        )
        table = pa.table({
            "path": [e.path for e in inc.evidence],
            "secret_id": [e.secret_id for e in inc.evidence],
            "analyzer": [e.analyzer for e in inc.evidence],
            "reason": [e.reason for e in inc.evidence],
            "chain": pa.array([list(e.chain) for e in inc.evidence], type=pa.list_(pa.string())),
            "span_start": pa.array([e.span[0] if e.span else None for e in inc.evidence], type=pa.int64()),
            "span_end": pa.array([e.span[1] if e.span else None for e in inc.evidence], type=pa.int64()),
            "selector": pa.array([e.selector for e in inc.evidence], type=pa.string()),
        })
        pq.write_table(table, tmp / "evidence.parquet")
        atomic_write_json(tmp / "summary.json", {"format_version": FORMAT_VERSION, **inc.summary})
    return target


def load_incidence(out_dir: str | Path) -> Incidence:
    """Read `out_dir/incidence/`. Raises InputError naming the file when missing or corrupt."""
    import numpy as np
    import pyarrow.parquet as pq
    import scipy.sparse as sp

    d = Path(out_dir) / "incidence"
    meta = read_json(d / "secrets.json", what="incidence (run `repoguard analyze`)")
    if meta.get("format_version") != FORMAT_VERSION:
        raise InputError(f"{d / 'secrets.json'}: format version {meta.get('format_version')} is not {FORMAT_VERSION}")
    try:
        z = np.load(d / "incidence.npz", allow_pickle=False)
        m = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
        ids = [str(x) for x in z["example_ids"]]
        t = pq.read_table(d / "evidence.parquet").to_pydict()
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        raise InputError(f"{d}: corrupt incidence ({type(exc).__name__}: {exc}); re-run `repoguard analyze`") from None
    n = len(t["path"])
    spans = [None if a is None or b is None else (a, b)  # absent in artefacts written before spans
             for a, b in zip(t.get("span_start", [None] * n), t.get("span_end", [None] * n))]
    selectors = t.get("selector", [None] * n)      # absent in artefacts written before selectors
    evidence = [Evidence(p, s, a, r, tuple(c or ()), sp_, sel) for p, s, a, r, c, sp_, sel in
                zip(t["path"], t["secret_id"], t["analyzer"], t["reason"], t["chain"], spans, selectors)]
    summary = json.loads((d / "summary.json").read_text()) if (d / "summary.json").exists() else {}
    return Incidence(example_ids=ids, secrets=[Secret(**s) for s in meta["secrets"]], matrix=m,
                     evidence=evidence, summary=summary)
