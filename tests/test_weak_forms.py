"""Weak forms of a credential (issue 27, session 11): a key labelled in prose or an INI section, a
key in an object named for settings or a request's parameters, a key handed to an SDK client's
constructor; and what is no key although it sits in one of those places: hex edited by hand, a
value glued to a character no token holds, a float, a mapping's bare `key`. Every value is drawn
here from a seeded generator (no real credential), and every rejected case has a twin that must
still be reported, so a rule cannot pass by going blind."""
from __future__ import annotations

import random
import string

import pytest

from repoguard.credentials.alphabet import edited_hex
from repoguard.credentials.engine import Engine
from repoguard.credentials.rules import load_rules
from fake_values import ALNUM, random_key

_RNG = random.Random(11)


def _key(n: int = 32, alphabet: str = ALNUM) -> str:
    return random_key(_RNG, n, alphabet)


K = _key()          # 32 mixed-case alphanumerics: a common key shape
K40 = _key(40)
HEX = _key(64, "0123456789abcdef")
# the same hex with a few letters typed over inside it (positions past the first four)
EDITED = HEX[:9] + "h" + HEX[10:23] + "y" + HEX[24:41] + "R" + HEX[42:]


@pytest.fixture(scope="module")
def engine():
    return Engine.build(load_rules())


def _ids(engine, text: str, path: str = "snippet.txt") -> list[str]:
    """Rule ids reported by default (low-confidence findings are kept for redaction only)."""
    return [f.rule_id for f in engine.scan(text.encode(), path) if f.confidence != "low"]


def test_edited_hex():
    assert edited_hex(EDITED.encode())
    assert not edited_hex(HEX.encode())
    assert not edited_hex(K.encode())                      # base62: hex in about a third of it
    assert not edited_hex(("dapi" + HEX[:32]).encode())    # a vendor tag at the start
    assert not edited_hex((HEX[:32] + "-us12").encode())   # a data-centre suffix, after a separator


# (found, the rule that reports it, twin that is not a key): the found form is reported, its twin is not.
PAIRS = [
    # hex edited by hand next to a vendor's name and a secret word
    (f"zyxwidget secret: {HEX}", "generic-api-key", f"zyxwidget secret: {EDITED}"),
    (f'{{"provider": "zyxwidget", "secret": "{HEX}"}}', "generic-api-key",
     f'{{"provider": "zyxwidget", "secret": "{EDITED}"}}'),
    # a value glued to a character no token holds is part of a longer string
    (f"zyxwidget_key = '{K}'", "generic-keyword-context", f"zyxwidget_key = '{K[:-1]}$'"),
    (f"zyxwidget token = '{K}'", "generic-api-key", f"zyxwidget token = '{K[:-1]}?'"),
    # an `=` inside a run is no base64 padding: the value goes on
    (f"[DEBUG] Using Zyxwidget Key={K}\n", "generic-keyword-context", f"[DEBUG] Using Zyxwidget Key={K}=x9Qm2Lp\n"),
    # hex typed over is no generated key, also for a vendor row that only names the vendor
    (f"Your Vbout key is {HEX}", "vbout-keyword", f"Your Vbout key is {EDITED}"),
    # a bare `key` as a label in prose or a log line, not a mapping's key
    (f"- Zyxwidget API Key: {K40}", "generic-keyword-context", f"- Zyxwidget cache key: {K40}"),
    (f"- Zyxwidget (key): `{K40}`", "generic-keyword-context", f"- Zyxwidget public key: `{K40}`"),
    (f"[zyxwidget]\nkey = {K40}\n", "generic-keyword-context", f"key = {K40}\n"),
    (f"[zyxwidget]\nkey = {K40}\n", "generic-keyword-context", f"[gpg]\nkey = {K40}\n"),
    (f"vbout:\n  url: https://vb.internal\n  key: {K40}\n", "generic-keyword-context", f"cache:\n  key: {K40}\n"),
    (f"zyxwidgetConfig:\n  key: {K40}\n", "generic-keyword-context", f"spec:\n  selector:\n    - key: {K40}\n"),
    (f"zyxSettings:\n  key: {K40}\n", "generic-keyword-context", f"kind: ConfigMap\ndata:\n  key: {K40}\n"),
    (f"const zyxwidgetConfig = {{ key: '{K}' }};\n", "generic-keyword-context", f"const items = [{{ key: '{K}' }}];\n"),
    (f'requests.get(url, params={{"key": "{K}"}})\n', "generic-keyword-context",
     f'cache.get(url, lookup={{"key": "{K}"}})\n'),
    # a key handed to an SDK client's constructor
    (f'$client = new \\Zyxwidget\\Client("{K}");\n', "generic-client-key",
     f'$client = new \\Zyxwidget\\Client("{K[:12]}");\n'),
    (f"const client = new Client('{K}');\n", "generic-client-key",
     "const client = new Client('123e4567-e89b-42d3-a456-556642440000');\n"),
    (f'c := vbout.New("{K}")\n', "vbout-keyword", f'err := errors.New("{K}")\n'),
    (f'c := vbout.New("{K}")\n', "vbout-keyword",
     f'id := xid.New("{K}")\n'),  # Go's New: a client only for a vendor's package
    (f"client = Client('{K}')\n", "generic-client-key",
     f"client = getClient('{K}')\n"),  # a lookup by id, not a constructor
    (f"client = twilio.rest.Client('{K}')\n", "generic-client-key", f"client = self.client('{K}')\n"),
    (f'c := zyxwidget.NewClient("{K}")\n', "generic-client-key",
     'c := zyxwidget.NewClient("AccessTokenProviderFactory")\n'),
    (f"client = Zyxwidget::Client.new('{K}')\n", "generic-client-key", f"client = Zyxwidget::Client.new('{K[:8]}')\n"),
]


@pytest.mark.parametrize("found,rule,not_found", PAIRS)
def test_weak_form_and_its_twin(engine, found, rule, not_found):
    assert _ids(engine, found) == [rule], found
    assert _ids(engine, not_found) == [], not_found


def test_a_float_is_no_token(engine):
    assert _ids(engine, 'set = client.Set(ctx, "largenum", "1.7976931348623157e+308", 0)') == []
    assert _ids(engine, 'token = "1.7976931348623157e+308"') == []


def test_client_key_is_vetoed_by_a_vendor_shape(engine):
    """A client constructor named for a vendor whose documented length the value does not have:
    the vendor table's veto removes the generic finding (Algolia's keys are 32 hex)."""
    assert _ids(engine, f"// Algolia\nconst client = new Client('{K40}');\n") == []
    hexkey = _key(32, "0123456789abcdef")
    assert _ids(engine, f"// Algolia\nconst client = new Client('{hexkey}');\n")


def test_right_length_in_another_alphabet_is_not_vetoed(engine):
    """A vendor's documented length in another alphabet may be the vendor's key (the docs' alphabet
    read off one example); the same value of the vendor's alphabet with a few characters typed over
    is a sample or a mangled key and stays vetoed (Vultr's keys: 36 upper-case alphanumerics)."""
    upper = _key(36, string.ascii_uppercase + string.digits)
    mixed = _key(36)
    edited = upper[:6] + "q" + upper[7:15] + "w" + upper[16:25] + "z" + upper[26:]
    assert _ids(engine, f"Your Vultr key is {upper}") == ["vultr-keyword"]
    assert _ids(engine, f"Your Vultr key is {mixed}") == ["generic-keyword-context"]
    assert _ids(engine, f"Your Vultr key is {edited}") == []
    assert _ids(engine, f"Your Vultr key is {mixed[:32]}") == []  # another length: vetoed


_WORKFLOW = """name: databases
on: [push]
jobs:
  sqlsrv:
    runs-on: ubuntu-22.04
    services:
      sqlsrv:
        image: mcr.microsoft.com/mssql/server:2019-latest
        env:
          ACCEPT_EULA: Y
          SA_PASSWORD: {pw}
        ports:
          - 1433:1433
    steps:
      - name: Execute tests
        run: vendor/bin/phpunit
        env:
          DB_CONNECTION: sqlsrv
          DB_USERNAME: SA
          DB_PASSWORD: {pw}
          DEPLOY_PASSWORD: {other}
"""


def test_ci_service_container_password_is_not_reported(engine):
    """A password a GitHub Actions job gives its own service container (and the job's steps use to
    reach it) gates a container that lives only in the job: not reported in the workflow. Another
    password in the same file, and the same text outside a workflow, still are."""
    pw, other = "Vq7" + _key(9), "Kd4" + _key(9)
    text = _WORKFLOW.format(pw=pw, other=other)
    found = engine.scan(text.encode(), ".github/workflows/databases.yml")
    assert [text.encode()[f.start:f.end] for f in found] == [other.encode()]
    assert len(engine.scan(text.encode(), "deploy/databases.yml")) == 3


def test_documented_length_in_another_alphabet_reports_on_an_assignment(engine):
    """Etherscan's keys are 34 upper-case alphanumerics (34 is no common key length): a mixed-case
    value of that length assigned to a key's name is still reported; in prose glue, where the
    value must also have a common key shape, it is not; a few characters typed over stay vetoed."""
    mixed = _key(34)
    upper = _key(34, string.ascii_uppercase + string.digits)
    edited = upper[:6] + "q" + upper[7:15] + "w" + upper[16:25] + "z" + upper[26:]
    assert _ids(engine, f"ETHERSCAN_TOKEN={mixed}\n") == ["generic-api-key"]
    assert _ids(engine, f"Your Etherscan key is {mixed}") == []
    assert _ids(engine, f"ETHERSCAN_TOKEN={edited}\n") == []


def test_ci_service_filter_keeps_vendor_keys_and_never_raises(engine):
    """The service-container filter drops password and generic findings only: a vendor's token in a
    service's env is still one. A workflow the YAML parser cannot read (nesting too deep) is scanned
    without the filter, and the scan does not raise."""
    gh = "ghp_" + _key(36)
    text = ("jobs:\n  t:\n    services:\n      app:\n        env:\n"
            f"          GH_TOKEN: {gh}\n    steps:\n      - run: make\n")
    assert [f.rule_id for f in engine.scan(text.encode(), ".github/workflows/ci.yml")] == ["github-pat"]
    deep = ("jobs:\n  t:\n    services:\n      s:\n        env:\n          X: " + "[" * 5000 + "]" * 5000
            + f"\napi_token = \"{_key(24)}\"\n")
    assert engine.scan(deep.encode(), ".github/workflows/ci.yml") is not None


def test_long_lines_do_not_hide_a_yaml_parent_or_stall(engine):
    """A sibling line longer than the 200 bytes once read back, and a long run of keyboard rows
    that is no walk, are read correctly (they once took quadratic and exponential time)."""
    text = f"zyx_config:\n  description: {'x' * 300}\n  key: {K}\n"
    assert _ids(engine, text, "deploy/app.yaml") == ["generic-keyword-context"]
    from repoguard.credentials.structural.placeholders import keyboard_walk
    assert not keyboard_walk(b"7890" + b"qwertyuiopasdfghjklzxcvbnmpoiuytrewqlkjhgfdsa" * 20 + b"Z")
