"""Logical coupling with code-maat's definitions, from one streamed git log."""
from __future__ import annotations

from analyzer_helpers import commit, git, make_repo

from repoguard.analyzers import cochange
from repoguard.analyzers.history import load_history
from repoguard.core.config import parse_config
from repoguard.source.corpus import build_corpus
from repoguard.source.gitrepo import GitRepo

CONFIG = """
[[secret]]
id = "alpha"
paths = ["alpha/"]
[secret.propagate]
imports = 0
cochange = true
[analyzers]
cochange_min_revs = {min_revs}
"""


def _history(root):
    make_repo(root, {"alpha/core.py": "0\n", "coupled.py": "0\n", "weak.py": "0\n", "loose.py": "0\n",
                     "renamed_old.py": "0\n"})
    for i in range(6):  # coupled.py and renamed file change with alpha/core.py every time
        commit(root, {"alpha/core.py": f"{i + 1}\n", "coupled.py": f"{i + 1}\n", "renamed_old.py": f"{i + 1}\n"}, f"c{i}")
    for i in range(8):  # loose.py: many changes of its own, 2 shared → below min shared revs
        commit(root, {"loose.py": f"{i + 1}\n", **({"alpha/core.py": f"x{i}\n"} if i < 2 else {})}, f"l{i}")
    # a bulk commit touching 40 files plus the secret: dropped (> 30 files)
    commit(root, {**{f"bulk/f{j}.py": "1\n" for j in range(40)}, "alpha/core.py": "bulk\n", "weak.py": "1\n"}, "bulk")
    git(root, "mv", "renamed_old.py", "renamed_new.py")
    commit(root, {}, "rename")


def test_coupling_degree_thresholds_and_renames(tmp_path):
    root = tmp_path / "r"
    _history(root)
    repo = GitRepo(root)
    hist = load_history(repo)
    th = cochange.Thresholds()
    pairs = {(c.a, c.b): c for c in cochange.couplings(hist, {"alpha/core.py"}, th)}
    assert sorted(pairs) == [("coupled.py", "alpha/core.py"), ("renamed_new.py", "alpha/core.py")]
    c = pairs[("coupled.py", "alpha/core.py")]
    # alpha/core.py: initial + 6 + 2 = 9 revisions (bulk dropped); coupled.py: initial + 6 = 7
    assert (c.revs_a, c.revs_b, c.shared) == (7, 9, 7)
    assert abs(c.degree - 7 / 8) < 1e-12
    # renamed_new.py inherits renamed_old.py's history (initial + 6, then the rename itself)
    assert pairs[("renamed_new.py", "alpha/core.py")].revs_a == 8

    cfg = parse_config(CONFIG.format(min_revs=5))
    ev = list(cochange.analyze(repo, build_corpus(repo, cfg.corpus), cfg))
    assert [(e.path, e.reason) for e in ev] == [
        ("coupled.py", "changed together with alpha/core.py in 7 commits (coupling 88%; revisions 7 and 9)"),
        ("renamed_new.py", "changed together with alpha/core.py in 7 commits (coupling 82%; revisions 8 and 9)"),
    ]
    # thresholds come from the config: a min_revs above every average ties nothing
    cfg = parse_config(CONFIG.format(min_revs=50))
    assert list(cochange.analyze(repo, build_corpus(repo, cfg.corpus), cfg)) == []


def test_fixture_pairs_and_the_bulk_commit(fixture_repo, monorepo_module):
    hist = load_history(GitRepo(fixture_repo))
    for pair in monorepo_module.COCHANGE_PAIRS:
        got = cochange.couplings(hist, {pair["a"]}, cochange.Thresholds())
        assert any(c.a == pair["b"] for c in got) == pair["coupled"], pair
        if "coupled_if_bulk_counted" in pair:
            with_bulk = cochange.couplings(hist, {pair["a"]}, cochange.Thresholds(max_changeset=10_000))
            assert any(c.a == pair["b"] for c in with_bulk) == pair["coupled_if_bulk_counted"], pair
