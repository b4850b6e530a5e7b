"""Codename mentions: the whole text of every file (identifiers included, split), paths and commit
messages."""
from __future__ import annotations

import dataclasses

import pytest
from analyzer_helpers import commit, make_repo

from repoguard.analyzers import codenames
from repoguard.core.config import parse_config
from repoguard.core.errors import InputError
from repoguard.source.corpus import build_corpus
from repoguard.source.gitrepo import GitRepo

CONFIG = """
[[secret]]
id = "alpha"
codenames = ["Bluefin", "Project Kestrel", "Harbor", "signal", "Osprey"]
[analyzers]
codename_stoplist = ["osprey"]
"""


def test_split_identifiers():
    assert codenames.split_identifiers("bluefin_signal BluefinModel trading.bluefin/x") == \
        "bluefin signal Bluefin Model trading bluefin x"


def test_matches_whole_text_and_respects_stoplist(tmp_path):
    root = tmp_path / "r"
    make_repo(root, {
        "a.py": 'import os\n\n\ndef f():\n    """Scores for the BLUEFIN desk."""\n    return 1\n',
        "b.py": "x = 1\n# see bluefin_v2.model\n",
        "c.py": "bluefin = 1  # the variable name alone ties the file (issue 32 B)\n",
        "d.ts": "// nothing here\nconst s = `project kestrel rollout`;\n",
        "e.go": 'package e\n\nvar s = "Project Kestrel"\n',
        "f.java": "class F { /* safe harbor, lower case: an ordinary word */ }\n",
        "g.rs": "// Harbor launch\nfn main() {}\n",
        "h.md": "# Notes\n\nThe bluefins are fish.\n",
        "docs/i.md": "Line one\nBluefin roadmap\n",
        "j.py": "# a signal handler\n",
        "l.py": "# the osprey is a bird\n",
        "m.py": "'''Osprey v2'''\n",
    })
    commit(root, {"k.py": "K = 1\n"}, "Tune the Bluefin thresholds")
    repo = GitRepo(root)
    cfg = parse_config(CONFIG)
    ev = list(codenames.analyze(repo, build_corpus(repo, cfg.corpus), cfg))
    assert [(e.path, e.reason) for e in ev] == [
        ("a.py", "mentions codename 'Bluefin' at line 5"),
        ("b.py", "mentions codename 'Bluefin' at line 2"),
        ("c.py", "mentions codename 'Bluefin' at line 1"),
        ("d.ts", "mentions codename 'Project Kestrel' at line 2"),
        ("docs/i.md", "mentions codename 'Bluefin' at line 2"),
        ("e.go", "mentions codename 'Project Kestrel' at line 3"),
        ("g.rs", "mentions codename 'Harbor' at line 1"),
        ("m.py", "mentions codename 'Osprey' at line 1"),
        ("k.py", f"commit {_head(root)[:10]} touching it mentions codename 'Bluefin'"),
    ]


def test_cache_reuses_per_blob_results(tmp_path):
    root = tmp_path / "r"
    make_repo(root, {"a.py": "# Bluefin\n", "b.py": "# nothing\n"})
    repo = GitRepo(root)
    cfg = parse_config(CONFIG)
    corpus = build_corpus(repo, cfg.corpus)
    cache: dict = {}
    first = list(codenames.analyze(repo, corpus, cfg, cache=cache))
    assert len(cache) == 2
    # poison the cache entry for a.py: a second run must use it, proving no re-parse
    key = next(k for k, v in cache.items() if v)
    cache[key] = [["alpha", "Bluefin", 99]]
    second = list(codenames.analyze(repo, corpus, cfg, cache=cache))
    assert [e.reason for e in first] == ["mentions codename 'Bluefin' at line 1"]
    assert [e.reason for e in second] == ["mentions codename 'Bluefin' at line 99"]


def test_commit_messages_tie_only_focused_commits(tmp_path):
    """A codename in the message of a commit over `codename_max_changeset` files is a passing
    mention: it ties none of the commit's files; a commit at the bound ties all of them."""
    root = tmp_path / "r"
    make_repo(root, {"seed.py": "S = 1\n"})
    commit(root, {f"bulk/f{i}.py": f"X = {i}\n" for i in range(4)}, "Rename helpers\n\nNothing left in bluefin")
    commit(root, {f"small/g{i}.py": f"Y = {i}\n" for i in range(3)}, "Bluefin: tune thresholds")
    repo = GitRepo(root)
    cfg = parse_config(CONFIG + "codename_max_changeset = 3\n")
    assert cfg.analyzers.codename_max_changeset == 3
    ev = list(codenames.analyze(repo, build_corpus(repo, cfg.corpus), cfg))
    assert sorted(e.path for e in ev) == ["small/g0.py", "small/g1.py", "small/g2.py"]
    wide = parse_config(CONFIG + "codename_max_changeset = 4\n")
    assert len(list(codenames.analyze(repo, build_corpus(repo, wide.corpus), wide))) == 7


def test_codename_max_changeset_must_be_positive():
    with pytest.raises(InputError, match=r"analyzers\.codename_max_changeset: must be > 0, not 0"):
        parse_config(CONFIG + "codename_max_changeset = 0\n")


def _head(root):
    import subprocess
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()


def test_unmatched_reads_the_codename_of_each_row_not_its_reason(tmp_path):
    """Two codenames of one secret, each mentioned only in the message of a different commit
    touching the same file: each gets its own evidence row carrying the codename as `selector`,
    so neither is reported unmatched (a row per (file, secret) kept only the first codename, and
    the second was warned about as "mentioned in no commit message")."""
    from repoguard.analyzers.unmatched import unmatched

    root = tmp_path / "r"
    make_repo(root, {"seed.py": "S = 1\n"})
    commit(root, {"x.py": "X = 1\n"}, "Bluefin: tune thresholds")
    commit(root, {"x.py": "X = 2\n"}, "Harbor launch prep")
    repo = GitRepo(root)
    cfg = parse_config(CONFIG)
    corpus = build_corpus(repo, cfg.corpus)
    ev = list(codenames.analyze(repo, corpus, cfg))
    assert sorted((e.path, e.selector) for e in ev) == [("x.py", "Bluefin"), ("x.py", "Harbor")]
    problems = unmatched(repo, corpus, cfg, ev, ["codenames"])["alpha"]
    assert not any("'Bluefin'" in p or "'Harbor'" in p for p in problems)
    assert any("'Project Kestrel' is mentioned in no file" in p for p in problems)
    # the selector is what counts: the same rows with a reworded reason still match
    reworded = [dataclasses.replace(e, reason="(reworded)") for e in ev]
    assert unmatched(repo, corpus, cfg, reworded, ["codenames"])["alpha"] == problems
    # and the selector survives the incidence artefact
    from repoguard.analyzers.analyze import declared_secrets
    from repoguard.analyzers.incidence import build_incidence, load_incidence, save_incidence

    inc = build_incidence(corpus.example_ids(), corpus.file_examples, declared_secrets(cfg), ev, corpus.examples)
    save_incidence(inc, tmp_path / "out")
    assert sorted(e.selector for e in load_incidence(tmp_path / "out").evidence) == ["Bluefin", "Harbor"]
