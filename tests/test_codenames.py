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
    cache[key] = [["alpha", "Bluefin", 99, 0, 9]]
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


# -- a mention ties the chunks holding it, not the whole file (issue 28 item 5) ---------------------
CHUNK_CONFIG = """
[[secret]]
id = "alpha"
paths = ["alpha/**"]
codenames = ["Bluefin"]
"""


def _funcs(tag: str, n: int = 400) -> list[str]:
    """A long Python file (distinct per `tag`: identical chunks would be deduplicated)."""
    return [f"def {tag}_{i}(x):\n    \"\"\"Handler {i}.\"\"\"\n    y = x * {i} + {i * 7}\n"
            f"    return [y + k for k in range({i % 9 + 3})]\n\n\n" for i in range(n)]


def _analyze_chunks(make_repo, tmp_path, files: dict[str, str]):
    from repoguard.analyzers.analyze import run_analyze
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.core.config import load_config
    from repoguard.source.corpus import load_corpus

    repo_dir = make_repo({**files, "README.md": "# demo\n"})
    (repo_dir / "repoguard.toml").write_text(CHUNK_CONFIG)
    out = tmp_path / "out"
    run_analyze(GitRepo(repo_dir), load_config(repo_dir / "repoguard.toml"), out, only=["declared", "codenames"])
    inc = load_incidence(out)
    corpus = load_corpus(out, repo_dir)
    tied = set(inc.matrix.tocsc()[:, inc.secret_index()["alpha"]].nonzero()[0].tolist())

    def rows(path):
        return [i for i, e in enumerate(corpus.examples) if e.path == path]

    def holding(path):
        return [i for i in rows(path) if "bluefin" in corpus.text(corpus.examples[i]).lower()]

    return inc, tied, rows, holding


def test_one_mention_ties_only_the_chunk_holding_it(make_repo, tmp_path):
    """One mention at line 1202 of a 2,400-line file ties the one chunk holding it (the whole
    file's examples were tied before); two mentions in one chunk share a row naming both lines;
    mentions in two chunks tie those two."""
    one = _funcs("one")
    one[200] = one[200].replace("Handler 200.", "Handler 200, tuned for the Bluefin desk.")
    two = _funcs("two")
    two[10] = two[10].replace("Handler 10.", "Bluefin handler.")
    two[11] = two[11].replace("Handler 11.", "Bluefin handler too.")
    two[390] = two[390].replace("Handler 390.", "Bluefin again.")
    inc, tied, rows, holding = _analyze_chunks(make_repo, tmp_path, {
        "tools/handlers.py": "".join(one), "tools/more.py": "".join(two)})
    assert len(rows("tools/handlers.py")) >= 5, "the file must be cut into several chunks"
    mine = [i for i in rows("tools/handlers.py") if i in tied]
    assert mine == holding("tools/handlers.py") and len(mine) == 1
    more = [i for i in rows("tools/more.py") if i in tied]
    assert more == holding("tools/more.py") and len(more) == 2
    reasons = sorted((e.path, e.reason) for e in inc.evidence if e.analyzer == "codenames")
    assert reasons == [("tools/handlers.py", "mentions codename 'Bluefin' at line 1202"),
                       ("tools/more.py", "mentions codename 'Bluefin' at line 2342"),
                       ("tools/more.py", "mentions codename 'Bluefin' at lines 62, 68")]


def test_path_mention_and_declared_paths_still_tie_the_whole_file(make_repo, tmp_path):
    """A codename in the file's path ties every chunk; so does a file under the secret's declared
    paths (`declared` ties it whole, a mention inside changes nothing)."""
    body = _funcs("body")
    inside = _funcs("inside")
    inside[5] = inside[5].replace("Handler 5.", "Bluefin core.")
    inc, tied, rows, _ = _analyze_chunks(make_repo, tmp_path, {
        "tools/bluefin_handlers.py": "".join(body), "alpha/engine.py": "".join(inside)})
    for path in ("tools/bluefin_handlers.py", "alpha/engine.py"):
        assert len(rows(path)) >= 5 and set(rows(path)) <= tied, path
    assert [(e.path, e.reason) for e in inc.evidence if e.analyzer == "codenames"] == [
        ("tools/bluefin_handlers.py", "path names codename 'Bluefin'")]


def test_matching_loads_spacy_without_torch():
    """Issue 28 item 6 (`analyze`): spaCy's thinc imports torch when it can (~0.9 s); the
    codename matcher needs none of it. Matches are unchanged and torch still imports after."""
    import subprocess
    import sys

    code = """
import sys
from types import SimpleNamespace
from repoguard.analyzers.codenames import Matcher
m = Matcher([SimpleNamespace(id="alpha", codenames=["Falcon Refit", "Willow"])])
got = m.find_spans("the falconRefit of FALCON refit, Willow and willow trees")
print("torch" in sys.modules, sorted(got))
import torch
print(torch.ones(2).sum().item())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0].startswith("False ") and out[1] == "2.0"
    spans = eval(out[0][len("False "):])                 # noqa: S307 - our own repr
    assert {(s, n) for s, n, *_ in spans} == {("alpha", "Falcon Refit"), ("alpha", "Willow")}
    assert len(spans) >= 3


def test_multi_word_codename_across_line_breaks_comment_leaders_and_case(tmp_path):
    """Issue 41 item 1: secret `falcon`, codename "Falcon Refit" wrapped over a line break in prose
    and in comment blocks of every kind (`#`, `//`, ` * `, `--`), and in any letter case, is tied;
    the row names both lines. Words that are merely near each other are not."""
    root = tmp_path / "r"
    make_repo(root, {
        "desk.md": "# Desk\n\nThe alpha desk runs the Falcon\nRefit blend\n",
        "tune.py": "x = 1\n# tuned for Falcon\n# Refit, do not share\n",
        "w.js": "// the Falcon\n//   Refit loader\nlet a = 1;\n",
        "c.c": "/*\n * keeps Falcon\n * Refit fast\n */\nint a;\n",
        "q.sql": "-- Falcon\n-- Refit weights\nSELECT 1;\n",
        "case.txt": "notes\nthe fAlCoN rEfIt run\n",
        "blank.py": "# Falcon\n\n\n# Refit\n",
        "apart.py": "# Falcon\nx = 1\n# Refit\n",
        "falconer.py": "# falconer\n# refit\n",
    })
    repo = GitRepo(root)
    cfg = parse_config('[[secret]]\nid = "falcon"\ncodenames = ["Falcon Refit"]\n')
    got = {e.path: e.reason for e in codenames.analyze(repo, build_corpus(repo, cfg.corpus), cfg)}
    assert got == {
        "desk.md": "mentions codename 'Falcon Refit' at line 3",
        "tune.py": "mentions codename 'Falcon Refit' at line 2",
        "w.js": "mentions codename 'Falcon Refit' at line 1",
        "c.c": "mentions codename 'Falcon Refit' at line 2",
        "q.sql": "mentions codename 'Falcon Refit' at line 1",
        "case.txt": "mentions codename 'Falcon Refit' at line 2",
        "blank.py": "mentions codename 'Falcon Refit' at line 1",
    }
    # the evidence span covers both lines of a wrapped mention, so the chunks holding either are tied
    (row,) = [e for e in codenames.analyze(repo, build_corpus(repo, cfg.corpus), cfg) if e.path == "tune.py"]
    data = (root / "tune.py").read_bytes()
    assert data[row.span[0]:row.span[1]] == b"# tuned for Falcon\n# Refit, do not share"


def _whole_text_lines(m, text: str) -> list[tuple[str, str, int, int]]:
    """spaCy's matches over the whole text of both passes, as `find_lines` gives them (what
    `Matcher` computed before it split and tokenised only the lines that can hold a match)."""
    from repoguard.analyzers.codenames import words

    if m._nlp is None:
        m._build()
    out = set()
    for split, matchers in ((words(text), (m.lower, m.exact)), (words(text.lower()), (m.lower,))):
        doc = m._nlp.make_doc(split)
        for matcher in matchers:
            if len(matcher):
                for match_id, i, j in matcher(doc):
                    sid, name = m.names[m._nlp.vocab.strings[match_id]]
                    start, end = doc[i].idx, doc[j - 1].idx + len(doc[j - 1].text)
                    first = split.count("\n", 0, start) + 1
                    out.add((sid, name, first, first + split.count("\n", start, end)))
    return sorted(out)


def test_matching_only_the_lines_that_can_hold_a_codename_finds_what_the_whole_text_does():
    """spaCy reads only the runs of lines where a codename's letters occur in order with only
    separators between them; the matched lines are those of the whole text, for wrapped,
    camelCase, one-word, digit-split, ordinary-word and near-miss mentions at the first and last
    lines, and for random texts built from those pieces."""
    import random
    from types import SimpleNamespace

    from repoguard.analyzers.codenames import Matcher

    secrets = [SimpleNamespace(id="falcon", codenames=["Falcon Refit", "KeyCondition", "Harbor"]),
               SimpleNamespace(id="can", codenames=["Can Not", "İstanbul Desk"])]
    m = Matcher(secrets)
    # a codename with Σ (lowered by its context) reads the whole text, as before
    sigma = Matcher([*secrets, SimpleNamespace(id="greek", codenames=["ΟΔΟΣ"])])
    assert m._by_lines and not sigma._by_lines
    fixed = [
        "Falcon Refit\nx = 1\n# tuned for Falcon\n# Refit\n\n  falconrefit falconer refits\nFALCON_REFIT_V2",
        "key_condition = KeyConditionExpression\nkeyCondition2 harbor Harbor HARBOR\n  Key\n\n   Condition",
        "we cannot say; can not; CANNOT\nİstanbul desk, istanbul_desk\nΟΔΟΣ οδος οδοσ\nfalcon\n refit",
        "no codename here at all\n" * 50 + "falcon-refit",
    ]
    pieces = ["falcon", "Falcon", "FALCON", "refit", "Refit", "Refits", "falconer", "falconRefit", "key",
              "Condition", "KeyCondition", "keycondition3", "harbor", "Harbor", "can", "not", "cannot",
              "İstanbul", "desk", "x", "7", "_", "-", ".", "/", " ", "  ", "\n", "\n  ", "# ", "// ", "\t", "\r\n"]
    rng = random.Random(5)   # test data
    texts = fixed + ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 120))) for _ in range(400)]
    found = 0
    for text in texts:
        want = _whole_text_lines(m, text)
        assert m.find_lines(text) == want, text
        found += len(want)
    assert found > 300      # the random texts do hold many matches
    for text in fixed:
        assert sigma.find_lines(text) == _whole_text_lines(sigma, text)
    assert any(n == "ΟΔΟΣ" for _, n, *_ in sigma.find_lines(fixed[2]))
