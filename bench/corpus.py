"""Benchmark: building the corpus of a large real tree (default: this interpreter's site-packages).

Prints files/s and MB/s for repoguard's corpus build (all cores, and one process), against the
I/O floor measured in the same run: reading and UTF-8-decoding the same files with no filtering
or chunking. Ratios are repoguard ÷ floor (1.0 = as fast as just reading the bytes).

    python bench/corpus.py [TREE] [--max-chars 4000]
"""
from __future__ import annotations

import argparse
import os
import sysconfig
import time
from pathlib import Path

from repoguard.core.config import CorpusConfig
from repoguard.source.corpus import build_corpus
from repoguard.source.gitrepo import PlainDir


def read_floor(root: Path, paths: list[str]) -> tuple[float, int]:
    t = time.perf_counter()
    total = 0
    for p in paths:
        try:
            data = (root / p).read_bytes()
        except OSError:
            continue
        total += len(data)
        data.decode("utf-8", errors="ignore")
    return time.perf_counter() - t, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tree", nargs="?", default=sysconfig.get_paths()["purelib"])
    ap.add_argument("--max-chars", type=int, default=4000)
    args = ap.parse_args()
    repo = PlainDir(args.tree)
    files = [f.path for f in repo.tracked_files() if not f.is_symlink]
    cfg = CorpusConfig(example_max_chars=args.max_chars, max_file_bytes=1_000_000)
    # Warm the page cache so every variant reads from memory.
    floor_s, nbytes = read_floor(repo.root, files)
    floor_s, nbytes = read_floor(repo.root, files)
    rows = [("read+decode floor (baseline)", floor_s, len(files), nbytes, None)]
    for jobs in (os.cpu_count() or 1, 1):
        t = time.perf_counter()
        c = build_corpus(repo, cfg, jobs=jobs)
        dt = time.perf_counter() - t
        rows.append((f"repoguard corpus, {jobs} process(es)", dt, len(files), nbytes, c.stats()))
    mb = nbytes / 1e6
    print(f"tree: {repo.root}  files: {len(files)}  size: {mb:.1f} MB  cores: {os.cpu_count()}")
    print(f"{'variant':40s} {'seconds':>8s} {'files/s':>9s} {'MB/s':>7s} {'÷ floor':>8s}")
    for name, dt, n, b, _ in rows:
        print(f"{name:40s} {dt:8.2f} {n / dt:9.0f} {b / 1e6 / dt:7.1f} {floor_s / dt:8.3f}")
    stats = rows[1][4]
    print(f"examples: {stats['examples']}  kept files: {stats['files']}  duplicates: {stats['duplicates']}  "
          f"excluded: {stats['excluded']}")


if __name__ == "__main__":
    main()
