"""Which chunks of an importing file carry a secret: the chunk holding the import, and the chunks
that use the names it binds (issue 44), as codename and credential ties already are per chunk.

An importer is tied at `hops` ≤ `propagate.imports` (imports.carriers); its *carrying* imports are
those of a file that is itself within `propagate.imports − 1` hops of the secret (a secret's own
file at 0), or in the same small import cycle. For each carrying import, uses.import_uses gives the
statement's lines and every use of its names; each run of consecutive such lines that falls in the
same chunks becomes one evidence row with their byte span (incidence.tied_rows reads it), its
reason naming the import and the names used there: "imports moto/sfn/models.py at line 5 (from
moto.sfn.models import sfn_backends); uses sfn_backends at lines 40, 52".

The whole file stays tied (one row, no span) when the file's language is not read by `uses` (C and
C++ includes, Rust `use`), the file does not parse, or an import binds names nobody can list
(`from x import *`, a Java wildcard, a dynamic import, a Go import unused under its guessed name).
Files under a secret's declared paths are `declared`'s, tied whole.
"""
from __future__ import annotations

from typing import Iterator

from repoguard.analyzers.imports_lang import RawImport
from repoguard.analyzers.incidence import Evidence
from repoguard.analyzers.uses import ImportUse

NAME = "imports"


def chain_text(first: str, hops: int, chain: list[str]) -> str:
    """`first` ("imports X at line 9 (spec)") plus how the chain goes on to the secret's file."""
    text = first
    if len(chain) > 2:
        text += f", which imports {' → '.join(chain[2:])} ({len(chain) - 1} hops)"
    if hops < len(chain) - 1:
        text += f" — an import cycle shortens this to {hops} hop{'s' if hops != 1 else ''}"
    return text


def line_starts(data: bytes) -> list[int]:
    """Byte offset of the start of each line (1-based line k starts at [k − 1]), then len + 1."""
    starts = [0]
    at = data.find(b"\n")
    while at >= 0:
        starts.append(at + 1)
        at = data.find(b"\n", at + 1)
    starts.append(len(data) + 1)
    return starts


def _lines(lines: list[int]) -> str:
    lines = sorted(set(lines))
    if len(lines) == 1:
        return f"line {lines[0]}"
    head = ", ".join(str(n) for n in lines[:3])
    return f"lines {head}" + (f" and {len(lines) - 3} more" if len(lines) > 3 else "")


def chunk_rows(path: str, secret_id: str, imports: list[tuple[str, RawImport, str, list[str], int]],
               uses: dict | None, data: bytes, chunks: list[tuple[int, int]]) -> Iterator[Evidence]:
    """Evidence rows tying `path` to `secret_id` per chunk (module doc).

    `imports`: the file's carrying imports as (target file, import, readable spec, chain from
    `path` to the secret's file, hops of `path`); `uses`: uses.import_uses of the file (None: not
    readable); `data`: the file's bytes; `chunks`: byte ranges of the file's own examples."""
    per: list[tuple[tuple[str, RawImport, str, list[str], int], ImportUse]] = []
    for item in imports:
        raw = item[1]
        u = None if uses is None else uses.get((raw.line, raw.target, raw.level))
        if u is None or u.names is None:
            target, raw, spec, chain, hops = item
            yield Evidence(path, secret_id, NAME, chain_text(f"imports {target} at line {raw.line} ({spec})",
                                                            hops, chain), tuple(chain))
            return                                     # the whole file: nothing narrower to add
        per.append((item, u))
    starts = line_starts(data)

    def span(first: int, last: int) -> tuple[int, int]:
        first = max(1, min(first, len(starts) - 1))
        last = max(first, min(last, len(starts) - 1))
        return starts[first - 1], max(starts[first - 1], starts[last] - 1)

    def key(sp: tuple[int, int]) -> tuple[int, ...]:
        return tuple(k for k, (a, b) in enumerate(chunks) if a < sp[1] and sp[0] < b)

    for (target, raw, spec, chain, hops), u in per:
        head = chain_text(f"imports {target} at line {raw.line} ({spec})", hops, chain)
        marks = [(u.first, u.last, None)] + [(a, b, n) for n, spans in u.uses.items() for a, b in spans]
        marks.sort(key=lambda m: (m[0], m[1], m[2] or ""))
        run: list = []
        for m in marks:
            if run and key(span(m[0], m[1])) != key(span(run[-1][0], run[-1][1])):
                yield _row(path, secret_id, head, chain, run, span)
                run = []
            run.append(m)
        if run:
            yield _row(path, secret_id, head, chain, run, span)


def _row(path, secret_id, head, chain, run, span) -> Evidence:
    sp = (min(span(a, b)[0] for a, b, _ in run), max(span(a, b)[1] for a, b, _ in run))
    names = sorted({n for _, _, n in run if n})
    text = head
    if names:
        text += f"; uses {', '.join(names)} at {_lines([a for a, _, n in run if n])}"
    return Evidence(path, secret_id, NAME, text, tuple(chain), span=sp)
