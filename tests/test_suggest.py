"""`repoguard suggest`: ownership silos, codenames and credentials proposed as valid TOML."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import git

from repoguard.core.config import Config, parse_config
from repoguard.source.gitrepo import GitRepo
from repoguard.tagging.suggest import suggest


@pytest.fixture(scope="module")
def fresh(fixture_repo):
    """Suggestions for the fixture as if nothing were declared yet."""
    return suggest(GitRepo(fixture_repo), Config(path=None))


def test_ownership_silo_is_the_planted_one(fresh, monorepo_module):
    silos = {c["paths"][0]: c for c in fresh["candidates"] if c["kind"] == "silo"}
    for planted in monorepo_module.SILOS:
        c = silos[planted["path"] + "**"]
        assert c["owners"] == [planted["team"]]
        assert c["metrics"]["insiders"] == sorted(planted["authors"])
        assert c["metrics"]["closure"] >= 0.8
    # teams whose files are edited by people who mostly work elsewhere are not silos
    assert "web/**" not in silos and "java/**" not in silos and "reports/**" not in silos


def test_fixture_codename_is_the_coined_component(fresh):
    """`riskd` (the Go limit checker in services/risk/cmd/riskd/) is the fixture's one coined
    component name and is proposed first, with its evidence. The declared codenames Falcon and
    Nightjar are dictionary words (wordfreq): not proposed, a documented limitation."""
    got = [c for c in fresh["candidates"] if c["kind"] == "codename"]
    assert got[0]["codenames"] == ["Riskd"] and got[0]["metrics"]["folder"] == "@acme/risk"
    assert "services/risk/cmd/riskd/main.go" in got[0]["metrics"]["files"]
    assert got[0]["evidence"][0].startswith("'Riskd': 60% of 5 mentions")
    assert not {"Falcon", "Nightjar", "Harbor", "Scholes"} & {c["codenames"][0] for c in got}


def test_credentials_with_entropy_prior(fresh, monorepo_module):
    creds = [c for c in fresh["candidates"] if c["kind"] == "credential"]
    planted = {c["path"] for c in monorepo_module.PLANTED_CREDENTIALS if c["in_head"]}
    assert creds and {p for c in creds for p in c["paths"]} <= planted
    for c in creds:
        assert c["p"] == pytest.approx(max(2.0 ** -c["metrics"]["bits"], 1e-300), rel=1e-3)
        assert all("****(" in e for e in c["evidence"][:-1])


def test_snippet_is_valid_config_and_skips_declared(fresh, fixture_repo):
    cfg = parse_config(fresh["toml"])
    ids = [s.id for s in cfg.secrets]
    assert "alpha-owned" in ids and "riskd" in ids and len(ids) == len(set(ids))
    text = (fixture_repo / "repoguard.toml").read_text() + '\n[[secret]]\nid = "risk-daemon"\ncodenames = ["riskd"]\n'
    declared = suggest(GitRepo(fixture_repo), parse_config(text), kinds=("silo", "codename"))
    covered = {c["id"]: c["covered_by"] for c in declared["candidates"] if c["covered_by"]}
    assert covered["alpha-owned"] == ["alpha-strategy"] and covered["riskd"] == ["risk-daemon"]
    assert "alpha-owned" not in declared["toml"] and "Riskd" not in declared["toml"]


def test_cli(fixture_repo):
    res = subprocess.run([sys.executable, "-m", "repoguard.cli", "suggest", str(fixture_repo), "--json",
                          "--kinds", "silo", "--all"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert {c["kind"] for c in json.loads(res.stdout)["candidates"]} == {"silo"}
    bad = subprocess.run([sys.executable, "-m", "repoguard.cli", "suggest", str(fixture_repo), "--kinds", "x"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown kind 'x'" in bad.stderr


def _commit_as(repo, name: str, email: str, files: dict[str, str], message: str) -> None:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name,
           "GIT_COMMITTER_EMAIL": email}
    git(repo, "add", "-A", env=env)
    git(repo, "commit", "-q", "-m", message, env=env)


def _codenames(repo) -> list[str]:
    return [c["codenames"][0] for c in
            suggest(GitRepo(repo), Config(path=None), kinds=("codename",), limits=None)["candidates"]]


def test_codenames_are_coined_directory_names_only(make_repo, monkeypatch):
    """Each decoy directory below is as concentrated as the planted coined codename "Plumbrix":
    a common English word (Harvest), a language name (Kabyle), a month (January) and an author's
    surname (notes/vorshkin/, written by Ada Vorshkin). Only the coined names are proposed,
    Plumbrix (5 of its 6 mentions in plumbrix/) ranked above Grelvox (3 of 5 in grelvox/); with
    the dictionary, stdlib and people filters switched off the decoys do qualify."""
    from repoguard.tagging import suggest_lexicon
    from repoguard.analyzers import history
    from repoguard.tagging.suggest import _terms

    files = {}
    for folder, word in [("plumbrix", "Plumbrix"), ("harvest", "Harvest"), ("kabyle", "Kabyle"),
                         ("january", "January")]:
        files |= {f"{folder}/part_{i}.md": f"# {word} {i}\nThe {word} part; see {word}.\n"
                  for i in range(4 if word == "Plumbrix" else 5)}
    files |= {f"grelvox/g_{i}.py": f'"""Grelvox stage {i}."""\nX = {i}\n' for i in range(3)}
    files |= {f"web/page_{i}.md": "# Page\nA plain page about the product" + (", which embeds Grelvox" if i < 2 else "")
              + (" and Plumbrix" if i == 0 else "") + ".\n" for i in range(4)}
    files |= {f"patterns/p_{i}.md": "Match \\Nzorblat here; \\Nzorblat again.\n" for i in range(4)}
    repo = make_repo(files, message="init")
    _commit_as(repo, "Ada Vorshkin", "ada@example.com",
               {f"notes/vorshkin/n_{i}.md": "# Vorshkin notes\nVorshkin's notes.\n" for i in range(5)}, "notes")
    _commit_as(repo, "Test", "t@example.com", {"plumbrix/part_0.md": "# Plumbrix 0\nTuned.\n"}, "Plumbrix: tune part 0")
    history._CACHE.clear()
    got = _codenames(repo)
    assert got == ["Plumbrix", "Grelvox"]
    # a fragment behind an escape (`\\Nzorblat`) or a hyphen ("Black-Scholes") yields no term at all
    assert list(_terms("See \\Nzorblat. Black-Scholes model")) == ["see", "model"]
    assert list(_terms("Plumbrix pricing, PlumbrixEngine")) == ["plumbrix", "pricing", "plumbrix", "engine"]
    # the decoys are as concentrated as the codename: only the filters keep them out
    monkeypatch.setattr(suggest_lexicon, "dictionary_words", lambda terms: set())
    monkeypatch.setattr(suggest_lexicon, "stdlib_words", lambda: frozenset())
    monkeypatch.setattr(suggest_lexicon, "people_words", lambda repo: frozenset())
    assert {"Harvest", "Kabyle", "January", "Vorshkin", "Plumbrix", "Grelvox"} <= set(_codenames(repo))


_COINED = ["zaphrel", "orvidex", "brindex", "voskaro", "tramquil", "quorvane", "zorvik", "zentaro"]


@pytest.mark.slow
def test_default_output_is_a_screenful_and_all_shows_more(make_repo):
    """Eight coined component directories: the default text output shows the 5 best codenames in
    ≤ 60 lines and says 3 more are ranked lower; `--all` shows all 8 with every evidence line."""
    from repoguard.tagging.suggest_lexicon import dictionary_words

    assert not dictionary_words(_COINED)
    files = {f"{w}/m_{i}.py": f'"""{w.capitalize()} module {i}."""\nX = {i}\n' for k, w in enumerate(_COINED)
             for i in range(5 + k)}
    repo = make_repo(files, message="init")
    cli = [sys.executable, "-m", "repoguard.cli", "suggest", str(repo), "--kinds", "codename"]
    short = subprocess.run(cli, capture_output=True, text=True)
    assert short.returncode == 0, short.stderr
    assert len(short.stdout.splitlines()) <= 60 and short.stdout.count("[[secret]]") == 5
    assert "ranked lower and not shown: 3 codename candidates; --all shows them" in short.stdout
    # the most-mentioned directories rank first; the snippet is valid config
    assert [s.codenames[0] for s in parse_config(short.stdout).secrets] == [w.capitalize() for w in _COINED[::-1][:5]]
    full = subprocess.run(cli + ["--all"], capture_output=True, text=True)
    assert full.returncode == 0 and full.stdout.count("[[secret]]") == 8
    assert "ranked lower" not in full.stdout and "#   zaphrel/m_0.py" in full.stdout


def test_compounds_of_common_words_rank_after_coined_names(make_repo):
    """`restapi/` (rest + api) is more mentioned than `quorvane/`, but a compound of common English
    words ranks after a coined name, and says why in its evidence."""
    from repoguard.tagging.suggest_lexicon import compound_of

    assert compound_of("restapi") == ["rest", "api"] and compound_of("quorvane") is None
    files = {f"restapi/r_{i}.py": f'"""Restapi view {i}."""\n' for i in range(9)}
    files |= {f"quorvane/q_{i}.py": f'"""Quorvane stage {i}."""\n' for i in range(5)}
    got = suggest(GitRepo(make_repo(files, message="init")), Config(path=None), kinds=("codename",))["candidates"]
    assert [c["codenames"][0] for c in got] == ["Quorvane", "Restapi"]
    assert got[1]["metrics"]["score"] > got[0]["metrics"]["score"]
    assert "a compound of common words (rest + api)" in got[1]["evidence"][0]


def test_declared_dependencies_are_vendors_not_codenames(make_repo):
    """`tramquil/` and `zaphrel/` are coined directory names, but requirements.txt and package.json
    declare packages of those names: vendors, not codenames. pyproject.toml naming `voskaro/` in a
    tool setting (not a dependency) does not make Voskaro a vendor."""
    files = {f"{w}/m_{i}.py": f'"""{w.capitalize()} module {i}."""\nX = {i}\n'
             for w in ("tramquil", "zaphrel", "voskaro") for i in range(5)}
    files |= {"requirements.txt": "# pinned\ntramquil-client==2.0  # the SDK\n-r other.txt\n",
              "package.json": '{"devDependencies": {"@acme/zaphrel": "^1.0"}}\n',
              "pyproject.toml": '[project]\nname = "x"\ndependencies = ["requests>=2"]\n'
                                '[tool.ruff]\nexclude = ["voskaro/"]\n'}
    assert _codenames(make_repo(files, message="init")) == ["Voskaro"]


@pytest.mark.slow
def test_authorship_silo_without_codeowners(make_repo):
    """No CODEOWNERS: pay/ is written by Alice alone (20 of its 23 file revisions), web/ by five people;
    Alice, a minority of the whole history, is a silo. docs/, written by Bob alone just as much,
    is documentation, not a component: no silo."""
    files = {f"web/v{i}.py": "X = 1\n" for i in range(3)} | {f"pay/p{i}.py": "X = 1\n" for i in range(3)}
    repo = make_repo(files, message="init")
    web = [(f"Dev{k} Web", f"dev{k}@example.com") for k in range(5)]
    for n in range(20):
        _commit_as(repo, "Alice Arden", "alice@example.com", {f"pay/p{n % 3}.py": f"X = {n + 10}\n"}, f"pay {n}")
        _commit_as(repo, "Bob Birch", "bob@example.com", {f"docs/d{n % 3}.md": f"# Doc {n}\n"}, f"docs {n}")
        for k in range(4):   # web/ is busier: Alice's 20 revisions are 13 % of the history's
            _commit_as(repo, *web[(n + k) % 5], {f"web/v{i}.py": f"X = {n}, {k}, {i}\n" for i in range(3)},
                       f"web {n} {k}")
    got = {c["paths"][0]: c for c in suggest(GitRepo(repo), Config(path=None), kinds=("silo",))["candidates"]}
    assert set(got) == {"pay/**"}
    assert got["pay/**"]["metrics"]["insiders"] == ["alice@example.com"]
    assert got["pay/**"]["metrics"]["closure"] == pytest.approx(20 / 23, abs=1e-3)  # file revisions; + 3 files by Test in init
    assert got["pay/**"]["owners"] == [] and "no specific CODEOWNERS line" in got["pay/**"]["evidence"][0]


def test_people_words_come_from_the_one_history_walk(make_repo, monkeypatch):
    """Author, committer and trailer names are people words, read from the same streamed
    `git log` as the silo and codename candidates: suggest runs git log once (no .mailmap)."""
    from repoguard.analyzers import history
    from repoguard.tagging.suggest_lexicon import people_words

    repo = make_repo({"a.py": "# Bluefin pricing\n"})
    (repo / "b.py").write_text("# more Bluefin\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Bluefin tweak\n\nCo-authored-by: Orla Fenwick <orla.fenwick@example.com>",
        env={"GIT_AUTHOR_NAME": "Priya Raman", "GIT_AUTHOR_EMAIL": "p.raman@example.com",
             "GIT_COMMITTER_NAME": "Zed Quillon", "GIT_COMMITTER_EMAIL": "zq@example.com"})
    history._CACHE.clear()
    calls = []
    real_stream, real_git = GitRepo._stream, GitRepo._git
    monkeypatch.setattr(GitRepo, "_stream", lambda self, *a: (calls.append(a[0]), real_stream(self, *a))[1])
    monkeypatch.setattr(GitRepo, "_git", lambda self, *a, **kw: (calls.append(a[0]), real_git(self, *a, **kw))[1])
    words = people_words(GitRepo(repo))
    assert {"priya", "raman", "zed", "quillon", "orla", "fenwick"} <= words
    suggest(GitRepo(repo), Config(path=None), kinds=("silo", "codename"))
    assert calls.count("log") == 1


def test_stdlib_lexicon_is_cached_per_interpreter_and_stdlib(tmp_path, monkeypatch):
    """The stdlib words are computed once and then read from $REPOGUARD_CACHE_DIR; a changed
    stdlib file (size/mtime) makes a new cache entry."""
    import sysconfig

    from repoguard.tagging import suggest_lexicon as lex

    std = tmp_path / "stdlib"
    (std / "pkg").mkdir(parents=True)
    (std / "one.py").write_text('"""Frobnicate the widgets."""\n')
    (std / "pkg" / "two.py").write_text("def frobnicate_widgets(): pass  # gadgets\n")
    (std / "site-packages").mkdir()
    (std / "site-packages" / "three.py").write_text("# gadgets\n")
    real = sysconfig.get_paths
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **kw: {**real(*a, **kw), "stdlib": str(std)})
    monkeypatch.setenv("REPOGUARD_CACHE_DIR", str(tmp_path / "cache"))
    lex.stdlib_words.cache_clear()
    try:
        assert lex.stdlib_words() == {"frobnicate", "widgets"}          # site-packages skipped
        (entry,) = (tmp_path / "cache").glob("stdlib-words-*.txt")
        entry.write_text("frobnicate\nwidgets\nsentinel\n")               # the next run reads the cache
        lex.stdlib_words.cache_clear()
        assert "sentinel" in lex.stdlib_words()
        (std / "one.py").write_text('"""Frobnicate the widgets and gadgets."""\n')
        lex.stdlib_words.cache_clear()
        assert lex.stdlib_words() == {"frobnicate", "widgets", "gadgets"}   # stdlib changed: rescanned
        assert len(list((tmp_path / "cache").glob("stdlib-words-*.txt"))) == 2
    finally:
        lex.stdlib_words.cache_clear()


def test_dictionary_is_read_offline(tmp_path):
    """wordfreq's lists ship inside the wheel: the dictionary check works with no network at all
    (a new network namespace, `unshare -rn`, where any download would fail)."""
    import shutil

    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rn", "true"]).returncode != 0:
        pytest.skip("unshare -rn is not available here")
    code = ("from repoguard.tagging.suggest_lexicon import dictionary_words as d; "
            "print(sorted(d(['abkhaz', 'january', 'okonkwo', 'window', 'proxito', 'kbadge'])))")
    res = subprocess.run(["unshare", "-rn", sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "['abkhaz', 'january', 'okonkwo', 'window']"


def test_memoised_terms_equal_the_plain_split():
    """Issue 28 item 6: `_terms` memoises per chunk; the words it yields are the plain split's."""
    import re

    from repoguard.analyzers.codenames import split_identifiers
    from repoguard.tagging import suggest as sg

    def plain(text, *, path=False):
        chunks = [text] if path else (m.group(0).strip(".'/") for m in sg._CHUNK.finditer(sg._URL.sub(" ", text)))
        for chunk in chunks:
            if not chunk or (not path and (sg._NOISY.search(chunk) or "-" in chunk)):
                continue
            for part in split_identifiers(chunk).split():
                if re.fullmatch(r"[A-Za-z]+", part):
                    yield part.lower()

    texts = ["The falconRefit_v2 runs nightly; see http://x.example.com/a and Black-Scholes.",
             "def alphaSignal(x): return x  # FalconBlend, falcon.core/util 3 times",
             "repeat repeat Repeat REPEAT re_peat"] * 3
    for t in texts:
        assert list(sg._terms(t)) == list(plain(t))
    for p in ("trading/alphaSignal/core_util", "a/b-c/d"):
        assert list(sg._terms(p, path=True)) == list(plain(p, path=True))


def test_credentials_are_listed_not_declared_as_paths(make_repo):
    """Issue 41 item 16: a credential finding (moto's `generic-api-key-moto-iam-models-py`, a
    false positive, tied all 242 examples of the file and its importers once pasted) is listed
    for review only: no `paths`, no `[[secret]]` block; two keys in one file are two entries
    with distinct ids, each listed once."""
    import random

    from fake_values import random_key

    rng = random.Random(4116)
    k1, k2 = "ghp_" + random_key(rng, 36), "ghp_" + random_key(rng, 36)
    repo = make_repo({"iam/models.py": f"A = '{k1}'\nB = '{k2}'\n", "iam/views.py": "from iam import models\n"})
    got = suggest(GitRepo(repo), Config(path=None), kinds=("credential",), limits=None)
    creds = [c for c in got["candidates"] if c["kind"] == "credential"]
    assert len(creds) == 2 and len({c["id"] for c in creds}) == 2
    assert all(c["paths"] == [] and c["metrics"]["files"] == ["iam/models.py"] for c in creds)
    assert all(c["id"].startswith("credential:github-pat:") for c in creds)
    assert not parse_config(got["toml"]).secrets and "[[secret]]" not in got["toml"]
    for c in creds:
        assert got["toml"].count(c["id"]) == 1
    assert k1 not in got["toml"] and k2 not in got["toml"]


@pytest.mark.slow
def test_per_module_splits_a_large_silo_into_module_secrets(make_repo):
    """`--per-module N` (issue 44 item 3): Alice's silo pay/ holds 3 modules and a notes file; with
    N = 2 it is proposed as one secret per module plus one for its other files, each a valid
    [[secret]] covering exactly its files; with N = 3 (not more than N modules) it stays pay/**.
    The CLI refuses N < 1 in one line."""
    files = {f"web/v{i}.py": "X = 1\n" for i in range(3)} | {f"pay/p{i}.py": "X = 1\n" for i in range(3)}
    repo = make_repo({**files, "pay/notes.md": "# Pay\n"}, message="init")
    web = [(f"Dev{k} Web", f"dev{k}@example.com") for k in range(5)]
    for n in range(20):
        _commit_as(repo, "Alice Arden", "alice@example.com", {f"pay/p{n % 3}.py": f"X = {n + 10}\n"}, f"pay {n}")
        for k in range(4):
            _commit_as(repo, *web[(n + k) % 5], {f"web/v{i}.py": f"X = {n}, {k}, {i}\n" for i in range(3)},
                       f"web {n} {k}")
    whole = suggest(GitRepo(repo), Config(path=None), kinds=("silo",), split_above=3)["candidates"]
    assert [c["paths"] for c in whole] == [["pay/**"]]
    res = suggest(GitRepo(repo), Config(path=None), kinds=("silo",), split_above=2)
    got = {c["id"]: c for c in res["candidates"]}
    assert {i: c["paths"] for i, c in got.items()} == {
        "pay-authors-p0": ["pay/p0.py"], "pay-authors-p1": ["pay/p1.py"], "pay-authors-p2": ["pay/p2.py"],
        "pay-authors-other": ["pay/notes.md"]}
    assert all(c["metrics"]["split_from"] == "pay-authors" for c in got.values())
    assert "protected on its own" in got["pay-authors-p0"]["evidence"][0]
    cfg = parse_config(res["toml"])
    assert sorted(s.id for s in cfg.secrets) == sorted(got)
    assert {s.id: s.paths for s in cfg.secrets}["pay-authors-p1"] == ("pay/p1.py",)
    bad = subprocess.run([sys.executable, "-m", "repoguard.cli", "suggest", str(repo), "--per-module", "0"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--per-module: must be ≥ 1" in bad.stderr and "Traceback" not in bad.stderr
