"""Nosey Parker-style YAML rule packs: `repoguard scan --rules pack.yaml` adds them to the
defaults; extended-mode patterns are translated to RE2; malformed packs are one-line errors."""
from __future__ import annotations

import json

import pytest

from repoguard.cli import main
from repoguard.credentials.engine import Engine
from repoguard.credentials.np_rules import strip_extended
from repoguard.credentials.rules import iter_examples, load_rules
from repoguard.core.errors import InputError

PACK = r"""
rules:
- name: ACME Internal Token
  id: acme.token.1
  pattern: |
    (?x)
    \b
    (
      acme_tok_          # the vendor prefix
      [a-z0-9]{24}       # 24 random characters
    )
    (?: [^a-z0-9] | $ )
  categories: [api, secret]
  examples:
  - 'ACME_TOKEN = "acme_tok_a0b1c2d3e4f5g6h7i8j9k0l1"'
  negative_examples:
  - 'ACME_TOKEN = "acme_tok_short"'
- name: ACME Signing Secret
  id: acme.signing.1
  pattern: '(?i)acme[_-]?signing[_-]?secret\s*[=:]\s*["'']?([0-9a-f]{40})'
  examples:
  - 'ACME_SIGNING_SECRET: 0a1b2c3d4e5f67890a1b2c3d4e5f67890a1b2c3d'
  negative_examples:
  - 'ACME_SIGNING_SECRET: ${SECRET}'
"""


def test_strip_extended():
    assert strip_extended("(?x) a b # c\n [ #] \\ d") == "ab[ #]\\x20d"
    assert strip_extended("(?xi)\n x+ ") == "(?i)x+"
    assert strip_extended("plain [a ]") == "plain [a ]"
    with pytest.raises(ValueError):
        strip_extended("(?x:a b)")


@pytest.mark.slow
@pytest.mark.parametrize("hs", [True, False])
def test_pack_adds_to_defaults_and_examples_hold(tmp_path, hs):
    pack = tmp_path / "acme.yaml"
    pack.write_text(PACK)
    rs = load_rules(rule_files=[pack], use_default=False)
    ids = {r.id for r in rs.rules}
    assert {"acme.token.1", "acme.signing.1", "github-pat"} <= ids
    eng = Engine(rs, use_hyperscan=hs)
    mine = [(r, ex, tp) for r, ex, tp in iter_examples(rs) if r.id.startswith("acme.")]
    assert len(mine) == 4
    for r, ex, is_tp in mine:
        got = [f.rule_id for f in eng.scan(ex.encode(), "app/settings.py")]
        assert (r.id in got) == is_tp, (r.id, ex)
    assert next(r for r in rs.rules if r.id == "acme.token.1").keywords == ("acme_tok_",)


def test_cli_scan_with_pack(tmp_path, capsys):
    pack = tmp_path / "acme.yaml"
    pack.write_text(PACK)
    src = tmp_path / "src"
    src.mkdir()
    tok = "acme_tok_" + "q8w2e4r5t6y7u8i9o0p1a2s3"
    (src / "app.py").write_text(f'T = "{tok}"\n')
    rc = main(["scan", "--no-git", str(src), "--rules", str(pack), "--format", "json", "--jobs", "1", "-q"])
    out, err = capsys.readouterr()
    assert rc == 1 and tok not in out and tok not in err
    assert [f["rule_id"] for f in json.loads(out)["findings"]] == ["acme.token.1"]


@pytest.mark.parametrize("body, problem", [
    ("rules: [unclosed", "invalid YAML"),
    ("- just a list\n", "`rules` list"),
    ("rules:\n- name: x\n  id: y\n", "needs string `id`, `name` and `pattern`"),
    ("rules:\n- name: x\n  id: y\n  pattern: '(?=look)ahead'\n", "not valid RE2"),
    ("rules:\n- name: x\n  id: y\n  pattern: 'a'\n  examples: 3\n", "`examples` must be a list"),
])
def test_malformed_pack_is_one_line_error(tmp_path, capsys, body, problem):
    pack = tmp_path / "bad.yaml"
    pack.write_text(body)
    with pytest.raises(InputError) as exc:
        load_rules(rule_files=[pack])
    assert str(pack) in str(exc.value) and problem in str(exc.value) and "\n" not in str(exc.value)
    src = tmp_path / "src"
    src.mkdir()
    rc = main(["scan", "--no-git", str(src), "--rules", str(pack), "-q"])
    _, err = capsys.readouterr()
    assert rc == 2 and len(err.strip().splitlines()) == 1 and str(pack) in err
