"""repoguard.toml validation: each error is exit 2 with one line naming file, line and key."""
from __future__ import annotations

import json
import textwrap

import pytest

from repoguard.cli import main
from repoguard.core.config import load_config, parse_config
from repoguard.core.errors import InputError

GOOD = textwrap.dedent("""\
    [defaults]
    p = 1e-10
    r = 1e-3

    [levels]
    high = { p = 1e-10, r = 2e-4 }

    [corpus]
    exclude = ["vendor/**", "**/*.min.js"]
    max_file_bytes = 1_000_000
    example_max_chars = 4000

    [[secret]]
    id = "alpha-strategy"
    description = "Alpha team's signal research"
    paths = ["trading/alpha/**"]
    owners = ["@acme/alpha"]
    codenames = ["Falcon"]
    level = "high"
    [secret.propagate]
    imports = 2
    owners = true
    authors = false
    cochange = true
    codenames = true

    [[secret]]
    id = "risk-limits"
    paths = ["services/risk/**"]
    p = 1e-6
    r = 1e-4

    [[secret]]
    id = "client-book"
    codenames = ["Ledgerline"]
    """)


def test_good_config_resolves_levels_defaults_and_propagation():
    cfg = parse_config(GOOD)
    alpha, risk, book = cfg.secrets
    assert (alpha.p, alpha.r, alpha.level) == (1e-10, 2e-4, "high")
    assert alpha.propagate.imports == 2 and alpha.propagate.cochange is True
    assert (risk.p, risk.r) == (1e-6, 1e-4)
    assert (book.p, book.r) == (cfg.defaults.p, cfg.defaults.r)  # falls back to [defaults]
    assert cfg.corpus.exclude == ("vendor/**", "**/*.min.js")
    assert cfg.corpus.max_file_bytes == 1_000_000


def _replace(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new, 1)


# (config text, fragment the one-line message must contain, line number it must name)
CASES = {
    "unknown key": (_replace('description = "Alpha', 'descripton = "Alpha'), "secret[0].descripton: unknown key", 15),
    "unknown section": (GOOD + "\n[trainig]\nsteps = 3\n", "trainig: unknown section", 37),
    "wrong type": (_replace("max_file_bytes = 1_000_000", 'max_file_bytes = "big"'), "corpus.max_file_bytes: must be an integer", 10),
    "wrong type bool": (_replace("cochange = true", "cochange = 1"), "propagate.cochange: must be true or false", 24),
    "p outside (0,1)": (_replace("p = 1e-6", "p = 0.0"), "(risk-limits).p: must be strictly between 0 and 1", 30),
    "r outside (0,1)": (_replace("r = 1e-4", "r = 1.5"), "(risk-limits).r: must be strictly between 0 and 1", 31),
    "p >= r": (_replace("r = 1e-4", "r = 1e-7"), "(risk-limits).r: must be greater than p", 31),
    "p >= r in defaults": (_replace("r = 1e-3", "r = 1e-12"), "defaults.r: must be greater than p", 3),
    "unknown level": (_replace('level = "high"', 'level = "hgih"'), "unknown level 'hgih' (known: high)", 19),
    "empty path list": (_replace('paths = ["services/risk/**"]', "paths = []"), "(risk-limits).paths: must not be empty", 29),
    "duplicate id": (_replace('id = "client-book"', 'id = "risk-limits"'), "duplicate secret id", 34),
    "invalid toml": (_replace("[corpus]", "[corpus"), "invalid TOML", 8),
    "nothing declared": (_replace('codenames = ["Ledgerline"]', 'description = "x"'), "declares nothing to find it by", 33),
    "negative depth": (_replace("imports = 2", "imports = -1"), "propagate.imports: must be ≥ 0", 21),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_config_error_is_one_line_with_file_line_and_key(case, tmp_path, capsys):
    text, fragment, line = CASES[case]
    cfg = tmp_path / "repoguard.toml"
    cfg.write_text(text)
    with pytest.raises(InputError) as exc:
        load_config(cfg)
    assert fragment in str(exc.value)
    assert str(exc.value).startswith(f"{cfg}:{line}: "), str(exc.value)
    # Through the CLI: exit 2, exactly one line on stderr, no traceback, nothing on stdout.
    assert main(["config", "validate", str(cfg)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err and fragment in err


def test_missing_and_non_utf8_files(tmp_path, capsys):
    assert main(["config", "validate", str(tmp_path / "nope.toml")]) == 2
    assert "config file not found" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"[defaults]\np = 1e-10 # caf\xe9\n")
    assert main(["config", "validate", str(bad)]) == 2
    assert "not UTF-8" in capsys.readouterr().err


def test_validate_prints_resolved_config_as_json(tmp_path, capsys):
    cfg = tmp_path / "repoguard.toml"
    cfg.write_text(GOOD)
    assert main(["config", "validate", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [s["id"] for s in doc["secrets"]] == ["alpha-strategy", "risk-limits", "client-book"]
    assert doc["secrets"][0]["r"] == 2e-4 and doc["levels"]["high"]["p"] == 1e-10


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("repoguard ")
    assert main([]) == 2  # no subcommand: help on stderr, usage error


def test_unknown_flag_is_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["config", "validate", "--frobnicate"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_unexpected_errors_are_one_line_and_traceback_only_with_verbose(tmp_path, capsys, monkeypatch):
    import repoguard.commands.config as cmd

    def boom(args):
        raise ZeroDivisionError("division by zero in a stage")

    monkeypatch.setattr(cmd, "run", boom)
    assert main(["config", "validate", str(tmp_path)]) == 70
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error: ZeroDivisionError" in err and "Traceback" not in err
    with pytest.raises(ZeroDivisionError):
        main(["-v", "config", "validate", str(tmp_path)])
