"""CODEOWNERS with GitHub semantics, and history authorship (main developer, fragmentation)."""
from __future__ import annotations

from analyzer_helpers import commit, make_repo

from repoguard.analyzers import codeowners, ownership
from repoguard.analyzers.history import load_history
from repoguard.core.config import parse_config
from repoguard.source.corpus import build_corpus
from repoguard.source.gitrepo import GitRepo


def test_last_match_wins_unassign_and_invalid_lines():
    co = codeowners.parse(
        "# comment\n"
        "*                 @acme/everyone\n"
        "/trading/         @acme/trading\n"
        "trading/alpha/    @acme/alpha  # the desk\n"
        "trading/alpha/public.py\n"
        "docs/*            docs@acme.com\n"
        "!secret.py        @acme/x\n"
        "[ab].py           @acme/x\n"
        "*.md              not-an-owner\n",
        ".github/CODEOWNERS",
    )
    assert co.owners_of("trading/alpha/signals.py") == ("@acme/alpha",)
    assert co.match("trading/alpha/signals.py").line == 4
    assert co.owners_of("trading/alpha/public.py") == ()          # pattern without owners unassigns
    assert co.match("trading/alpha/public.py").line == 5
    assert co.owners_of("trading/beta/x.py") == ("@acme/trading",)
    assert co.owners_of("docs/index.md") == ("docs@acme.com",)
    assert co.owners_of("docs/deep/index.md") == ("@acme/everyone",)  # GitHub: docs/* is one level
    assert [n for n, _ in co.errors] == [7, 8, 9]


def test_codeowners_location_precedence(tmp_path):
    repo = make_repo(tmp_path / "r", {
        ".github/CODEOWNERS": "* @acme/github\n",
        "CODEOWNERS": "* @acme/root\n",
        "docs/CODEOWNERS": "* @acme/docs\n",
        "a.py": "",
    })
    assert codeowners.load(repo).source == ".github/CODEOWNERS"
    (tmp_path / "r/.github/CODEOWNERS").unlink()
    assert codeowners.load(GitRepo(tmp_path / "r")).owners_of("a.py") == ("@acme/root",)


CONFIG = """
[[secret]]
id = "alpha"
paths = ["trading/alpha/"]
owners = ["@acme/alpha", "carol@acme.com"]
[secret.propagate]
imports = 0
owners = true
authors = true
"""


def test_analyzer_ties_owned_files_and_main_developers(tmp_path):
    root = tmp_path / "r"
    make_repo(root, {
        "CODEOWNERS": "* @acme/all\nlib/quant/ @ACME/Alpha\nlib/quant/open.py\n",
        "trading/alpha/signals.py": "X = 1\n",
        "lib/quant/model.py": "Y = 1\n",
        "lib/quant/open.py": "Z = 1\n",
        "desk/tool.py": "T = 1\n",
        "desk/shared.py": "S = 1\n",
        "misc/carol.py": "C = 1\n",
        ".mailmap": "Alice <alice@acme.com> <alice@old.example>\n",
    })
    for i in range(3):
        commit(root, {"trading/alpha/signals.py": f"X = {i}\n"}, f"alpha {i}", author="Alice <alice@old.example>")
        commit(root, {"desk/tool.py": f"T = {i}\n"}, f"tool {i}", author="Alice <alice@acme.com>")
    commit(root, {"desk/shared.py": "S = 2\n"}, "shared", author="Bob <bob@acme.com>")
    commit(root, {"desk/shared.py": "S = 3\n"}, "shared", author="Alice <alice@acme.com>")
    commit(root, {"misc/carol.py": "C = 2\n"}, "carol", author="Carol <carol@acme.com>")
    repo = GitRepo(root)
    cfg = parse_config(CONFIG)
    hist = load_history(repo)
    # initial commit by test@example.com + 3 by alice: alice is the main developer
    assert hist.main_developer("desk/tool.py") == ("alice@acme.com", 3, 4)
    assert abs(hist.fragmentation("desk/tool.py") - (1 - (3 / 4) ** 2 - (1 / 4) ** 2)) < 1e-12
    ev = list(ownership.analyze(repo, build_corpus(repo, cfg.corpus), cfg))
    got = sorted((e.path, e.reason.split(" ")[0] + " " + e.reason.split(" ")[1]) for e in ev)
    assert got == [
        ("desk/tool.py", "main developer"),
        ("lib/quant/model.py", "owned by"),
        ("misc/carol.py", "main developer"),
    ]
    model = next(e for e in ev if e.path == "lib/quant/model.py")
    assert model.reason == "owned by @ACME/Alpha per CODEOWNERS line 2 (lib/quant/)"
    # desk/shared.py: alice has 1 of 3 revisions (< 0.5 share) → not tied
    assert all(e.path != "desk/shared.py" for e in ev)


def test_fixture_codeowners_match_github_semantics(fixture_repo, monorepo_module):
    co = codeowners.load(GitRepo(fixture_repo))
    for path, owners in monorepo_module.CODEOWNERS_EXPECTED.items():
        assert co.owners_of(path) == owners, path
    assert [n for n, _ in co.errors] == monorepo_module.CODEOWNERS_INVALID_LINES


def test_analyzer_warns_on_a_negation_line(tmp_path, caplog):
    """The fixture lost its `!` line (issue 28 item 12); the users' warning stays: GitHub has no
    negation, so the line is skipped and the analyzer says where."""
    root = tmp_path / "r"
    make_repo(root, {"CODEOWNERS": "* @acme/all\n!lib/quant/open.py @acme/alpha\nlib/quant/ @acme/alpha\n",
                     "lib/quant/open.py": "Z = 1\n"})
    cfg = parse_config('[[secret]]\nid = "quant"\nowners = ["@acme/alpha"]\n')
    with caplog.at_level("WARNING"):
        ev = list(ownership._by_codeowners(GitRepo(root), ["lib/quant/open.py"], cfg))
    assert [e.path for e in ev] == ["lib/quant/open.py"]
    assert "CODEOWNERS:2: negation '!lib/quant/open.py' is not supported by GitHub; line skipped" in caplog.text
