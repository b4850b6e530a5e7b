"""Questions asked of the incidence (grimp-style): which secrets does this file carry and why;
which files and examples carry this secret and why. Every answer carries its evidence chain.

Both answers are plain dicts ready for `--json`:
    secrets_of(inc, path)   → {"path", "secrets": [{"secret", "evidence": [{"analyzer", "reason", "chain"}]}]}
    examples_of(inc, id)    → {"secret", "examples": [{"path", "example_ids", "evidence": [...]}]}
"""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from repoguard.core.errors import InputError
from repoguard.analyzers.incidence import Evidence, Incidence


def _ev(e: Evidence, corpus=None) -> dict:
    """One evidence row; with `corpus`, a row narrowed to some chunks (a byte span: a credential,
    a codename mention, an import and the uses of its names) lists them as "chunks": [{"id",
    "lines": [first, last]}], so the reader sees which names tied which chunk."""
    out = {"analyzer": e.analyzer, "reason": e.reason, "chain": list(e.chain)}
    if corpus is not None and e.span is not None:
        from repoguard.analyzers.incidence import tied_rows

        ex = corpus.examples
        out["chunks"] = [{"id": ex[i].id, "lines": [ex[i].start_line, ex[i].end_line]}
                         for i in tied_rows(e, corpus.file_examples, ex)]
    return out


_NUMBER = re.compile(r"(\d+)")


def natural_key(text: str) -> list:
    """Sort key reading runs of digits as numbers: "line 14" before "line 110"."""
    return [int(t) if k % 2 else t for k, t in enumerate(_NUMBER.split(text))]


def _order(rows: list[Evidence]) -> list[Evidence]:
    """By analyzer (registry order), then by reason with its line numbers compared as numbers."""
    from repoguard.analyzers.registry import REGISTRY

    rank = {name: i for i, name in enumerate(REGISTRY)}
    return sorted(rows, key=lambda e: (rank.get(e.analyzer, 99), natural_key(e.reason)))


def secrets_of(inc: Incidence, path: str, corpus=None) -> dict:
    """The secrets tied to `path` (repo-relative POSIX), each with its evidence; [] when none.
    `corpus` (source.corpus.Corpus of the same analysis), when given, adds each narrowed row's
    chunks (`_ev`)."""
    by_secret: dict[str, list[Evidence]] = defaultdict(list)
    for e in inc.evidence:
        if e.path == path:
            by_secret[e.secret_id].append(e)
    order = [s.id for s in inc.secrets]
    return {"path": path, "secrets": [
        {"secret": sid, "evidence": [_ev(e, corpus) for e in _order(by_secret[sid])]}
        for sid in order if sid in by_secret]}


def examples_of(inc: Incidence, secret_id: str, *, example_paths: list[str] | None = None) -> dict:
    """The files tied to `secret_id`, with the ids of their examples and their evidence.
    Raises InputError for an unknown secret id. `example_paths[i]` is example i's path (from the
    corpus) for listing example ids; omitted → ids are taken from the id's `path#` prefix."""
    if secret_id not in inc.secret_index():
        known = ", ".join(s.id for s in inc.secrets) or "none"
        raise InputError(f"unknown secret {secret_id!r} (known: {known})")
    rows = inc.examples_of(secret_id)
    ids_by_path: dict[str, list[str]] = defaultdict(list)
    for i in rows:
        eid = inc.example_ids[i]
        p = example_paths[i] if example_paths else eid.rsplit("#", 1)[0]
        ids_by_path[p].append(eid)
    by_path: dict[str, list[Evidence]] = defaultdict(list)
    for e in inc.evidence:
        if e.secret_id == secret_id:
            by_path[e.path].append(e)
    # Every tied example is listed, so the count is `analyze`'s |E_j| (issue 41 item 17: 71 against
    # 72). An example whose text several files share is stored once under its first file's path;
    # when only another of those files carries the evidence, that path is listed with no evidence
    # of its own and says why.
    out = []
    for p in sorted(set(by_path) | set(ids_by_path)):
        own = by_path.get(p, [])
        row = {"path": p, "example_ids": ids_by_path.get(p, []), "evidence": [_ev(e) for e in _order(own)]}
        if not own:
            row["via"] = "identical text (a deduplicated example) in a tied file"
        out.append(row)
    return {"secret": secret_id, "examples": out}


def relative_path(repo_root: Path, target: str) -> str:
    """`target` (absolute, relative to the cwd, or already repo-relative) as a repo-relative POSIX
    path. Raises InputError when it lies outside the repository."""
    p = Path(target)
    if not p.is_absolute():
        cwd_rel = (Path.cwd() / p).resolve()
        if cwd_rel.exists() or not (repo_root / p).exists():
            p = cwd_rel
        else:
            p = repo_root / p
    try:
        return p.resolve().relative_to(repo_root.resolve()).as_posix()
    except ValueError:
        raise InputError(f"{target}: not inside the repository {repo_root}") from None


def check_in_corpus(out_dir: Path, repo, path: str) -> None:
    """Raise InputError (exit 2) when repo-relative `path` is not a file of the corpus that
    `repoguard analyze` wrote to `out_dir/corpus/`, saying why: left out with its reason from
    `excluded.json`, present but not tracked by git, tracked but newer than the analysis, or
    absent. Returns None when the path has examples."""
    import pyarrow.parquet as pq

    from repoguard.core.artefacts import read_json

    d = Path(out_dir) / "corpus"
    meta = read_json(d / "excluded.json", what="corpus (run `repoguard analyze`)")
    try:
        files = set(pq.read_table(d / "file_examples.parquet", columns=["path"]).column("path").to_pylist())
    except (OSError, ValueError) as exc:
        raise InputError(f"{d}: corrupt corpus ({exc})") from None
    if path in files:
        return
    for e in meta.get("excluded", []):
        if e.get("path") == path:
            detail = f": {e['detail']}" if e.get("detail") else ""
            raise InputError(f"{path}: not in the corpus: left out as {e['reason']}{detail}")
    full = Path(repo.root) / path
    if full.is_dir():
        raise InputError(f"{path}: a directory; give a file (or use --secret ID)")
    if not full.exists() and not full.is_symlink():
        raise InputError(f"{path}: no such file in {repo.root}")
    tracked = {f.path for f in repo.tracked_files()} if getattr(repo, "is_git", False) else {path}
    if path not in tracked:
        raise InputError(f"{path}: not in the corpus: not tracked by git")
    raise InputError(f"{path}: not in the corpus of the last analysis (added since; run `repoguard analyze`)")


def render_file(answer: dict) -> str:
    """The text of `explain FILE` from `secrets_of`'s answer: each secret the file carries, with its
    evidence rows, transitive chains and, for a narrowed row, the chunks (lines) it ties."""
    if not answer["secrets"]:
        return f"{answer['path']}: carries no secret"
    lines = [f"{answer['path']} carries {len(answer['secrets'])} secret(s):"]
    for s in answer["secrets"]:
        lines.append(f"  {s['secret']}")
        for e in s["evidence"]:
            lines.append(f"    {e['analyzer']:<11} {e['reason']}")
            if len(e["chain"]) > 2:
                lines.append(f"    {'':<11} chain: {' → '.join(e['chain'])}")
            if e.get("chunks"):
                lines.append(f"    {'':<11} ties only: " + ", ".join(
                    f"{c['id']} (lines {c['lines'][0]}–{c['lines'][1]})" for c in e["chunks"]))
    return "\n".join(lines)


def render_secret(answer: dict) -> str:
    """The text of `explain --secret ID` from `examples_of`'s answer: the files carrying the secret,
    each with its number of examples and its evidence rows."""
    ex = answer["examples"]
    n = sum(len(x["example_ids"]) for x in ex)
    lines = [f"{answer['secret']}: {len(ex)} file(s), {n} example(s)"]
    for x in ex:
        lines.append(f"  {x['path']} ({len(x['example_ids'])} example(s))")
        if x.get("via"):
            lines.append(f"    {x['via']}")
        for e in x["evidence"]:
            lines.append(f"    {e['analyzer']:<11} {e['reason']}")
    return "\n".join(lines)
