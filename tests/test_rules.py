"""Every rule's true positives are found and its false positives are not (gitleaks' practice:
the rule file carries its own examples); rule loading, validation and gitleaks-config compatibility."""
from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest
import re2

from repoguard.credentials.assign import ASSIGN  # the fragment keyword-anchored rules share verbatim
from repoguard.credentials.engine import Engine
from repoguard.credentials.rules import RuleSet, default_rule_files, iter_examples, load_rules
from repoguard.core.errors import InputError

RULES = load_rules()
_PATHS = ["app/settings.py", "config/nuget.config", "deploy/secret.yaml", "certs/client.p12",
          "app/config.json", "app/.env", "config/app.yaml", ".docker/config.json", "infra/main.tf",
          "src/config.php", "data_bags/secrets/app.json", "home/.pgpass",
          "maven/settings.xml", "FileZilla/sitemanager.xml"]


def _path_for(rule) -> str:
    if not rule.path:
        return "app/settings.py"
    return next(p for p in _PATHS if re2.search(rule.path, p))


@pytest.fixture(scope="module")
def full_engine():
    return Engine.build(RULES)


def test_rule_count_and_families():
    ids = [r.id for r in RULES.rules]
    assert len(ids) == len(set(ids)) >= 150
    families = {Path(f).stem for f in default_rule_files()}
    assert {"cloud", "vcs", "payments", "messaging", "databases", "keys", "registries",
            "observability", "ai", "generic"} <= families
    for needed in ("aws-access-token", "gcp-api-key", "azure-storage-account-key", "github-pat",
                   "gitlab-pat", "bitbucket-client-secret", "circleci-personal-api-token",
                   "stripe-access-token", "square-access-token", "paypal-braintree-access-token",
                   "slack-bot-token", "twilio-api-key", "sendgrid-api-token", "mailgun-private-api-token",
                   "database-connection-string-password", "pem-private-key", "openssh-private-key",
                   "pgp-private-key-block", "jwt", "npm-access-token", "pypi-upload-token",
                   "datadog-api-key", "new-relic-user-api-key", "sentry-dsn", "openai-api-key",
                   "anthropic-api-key", "huggingface-access-token", "generic-api-key",
                   "password-assignment", "password-in-config-file"):
        assert needed in ids, needed


def test_every_rule_has_examples():
    for r in RULES.rules:
        assert r.tps and r.fps, f"{r.id} needs tps and fps"


@pytest.mark.parametrize("rule", RULES.rules, ids=lambda r: r.id)
def test_rule_examples(rule):
    """Alone (plus the global allowlist) the rule finds each tp and none of its fps."""
    eng = Engine(RuleSet(rules=(rule,), allowlists=RULES.allowlists), use_hyperscan=False, structural=False)
    for tp in rule.tps:
        if rule.regex is None:  # path-only rule: examples are file paths
            assert any(f.rule_id == rule.id for f in eng.scan(b"", tp)), tp
        else:
            found = [f for f in eng.scan(tp.encode(), _path_for(rule)) if f.rule_id == rule.id]
            assert found, f"{rule.id}: tp not found"
            assert all(f.redacted.startswith("****(") and f.redacted.endswith(" chars)") for f in found)
    for fp in rule.fps:
        if rule.regex is None:
            assert not eng.scan(b"", fp), fp
        else:
            assert not [f for f in eng.scan(fp.encode(), _path_for(rule)) if f.rule_id == rule.id], \
                f"{rule.id}: false positive {fp[:40]!r}"


def test_tps_found_by_full_hyperscan_engine(full_engine):
    """With every rule loaded and the Hyperscan pass, every tp still yields a finding (possibly
    under a more specific rule that claims the same secret)."""
    missed = []
    for rule, ex, is_tp in iter_examples(RULES):
        if is_tp and rule.regex is not None and not full_engine.scan(ex.encode(), _path_for(rule)):
            missed.append(rule.id)
    assert not missed


@pytest.mark.slow
def test_every_default_rule_compiles_in_hyperscan(full_engine):
    """No default rule falls back to RE2 over the whole text (Hyperscan rejects, e.g., an end
    anchor inside a pattern); such a rule would rescan every file holding its keyword. The rules
    limited to some paths are read by RE2 on purpose, and only in those files."""
    fresh = Engine(RULES, use_hyperscan=True)
    assert sorted(fresh.rules[i].id for i in fresh._re2_only) == sorted(r.id for r in RULES.rules if r.regex and r.path)


def test_hyperscan_and_re2_backends_agree(full_engine):
    re2_engine = Engine(RULES, use_hyperscan=False)
    assert full_engine.backend == "hyperscan" and re2_engine.backend == "re2"
    for rule, ex, _ in iter_examples(RULES):
        if rule.regex is None:
            continue
        p = _path_for(rule)
        a = [(f.rule_id, f.start, f.end) for f in full_engine.scan(ex.encode(), p)]
        b = [(f.rule_id, f.start, f.end) for f in re2_engine.scan(ex.encode(), p)]
        assert a == b, rule.id


def test_user_gitleaks_config_replaces_defaults(tmp_path):
    cfg = tmp_path / "gitleaks.toml"
    cfg.write_text('''
title = "custom"
[[rules]]
id = "acme-internal-token"
description = "ACME internal token"
regex = \'\'\'\\b(acme_[a-z0-9]{24})\\b\'\'\'
keywords = ["acme_"]
[rules.allowlist]
stopwords = ["acme_test"]
''')
    rs = load_rules(rule_files=[cfg], use_default=False)
    assert [r.id for r in rs.rules] == ["acme-internal-token"]
    eng = Engine(rs)
    assert [f.rule_id for f in eng.scan(b"t = acme_a0b1c2d3e4f5g6h7i8j9k0l1\n", "x.py")] == ["acme-internal-token"]
    assert eng.scan(b"t = acme_test0b1c2d3e4f5g6h7i8j9k\n", "x.py") == []


def test_extend_use_default_adds_ours_and_disables(tmp_path):
    cfg = tmp_path / "gitleaks.toml"
    cfg.write_text('''
[extend]
useDefault = true
disabledRules = ["generic-api-key"]
[[rules]]
id = "acme-internal-token"
regex = \'\'\'acme_[a-z0-9]{24}\'\'\'
''')
    rs = load_rules(rule_files=[cfg], use_default=False)
    ids = {r.id for r in rs.rules}
    assert "acme-internal-token" in ids and "github-pat" in ids and "generic-api-key" not in ids
    assert len(ids) == len(RULES.rules)


@pytest.mark.parametrize("body, problem", [
    ("[[rules]]\nid = 'x'\nregex = '(unclosed'\n", "not a valid RE2 regex"),
    ("[[rules]]\nid = 'x'\nregex = '(?=lookahead)'\n", "not a valid RE2 regex"),
    ("[[rules]]\ndescription = 'no id'\nregex = 'a'\n", "needs a string `id`"),
    ("[[rules]]\nid = 'x'\n", "needs `regex` or `path`"),
    ("[[rules]]\nid = 'x'\nregex = 'a'\nentropy = 'high'\n", "entropy"),
    ("[[rules]]\nid = 'x'\nregex = '(a)'\nsecretGroup = 3\n", "secretGroup"),
    ("[[rules]]\nid = 'x'\nregex = 'a'\n[[rules.allowlists]]\ncondition = 'XOR'\n", "condition"),
    ("[[rules]]\nid = 'x'\nregex = 'a'\n[[rules.allowlists]]\nregexTarget = 'file'\n", "regexTarget"),
    ("this is = = not toml", "invalid TOML"),
])
def test_bad_rule_files_are_input_errors(tmp_path, body, problem):
    f = tmp_path / "bad.toml"
    f.write_text(body)
    with pytest.raises(InputError) as exc:
        load_rules(rule_files=[f], use_default=False)
    assert str(f) in str(exc.value) and problem in str(exc.value)


def test_missing_rule_file(tmp_path):
    with pytest.raises(InputError, match="rule file not found"):
        load_rules(rule_files=[tmp_path / "nope.toml"])


def test_full_engine_recall_and_false_positive_rate(full_engine):
    """With every rule and structural detector loaded, every tp yields a finding and at most 2%
    of the fps yield any finding (a generic rule may still claim a truncated vendor token)."""
    tp = fp = ntp = nfp = 0
    for rule, ex, is_tp in iter_examples(RULES):
        hit = bool(full_engine.scan(b"", ex) if rule.regex is None else full_engine.scan(ex.encode(), _path_for(rule)))
        ntp, nfp = ntp + is_tp, nfp + (not is_tp)
        tp, fp = tp + (hit and is_tp), fp + (hit and not is_tp)
    assert tp == ntp and fp <= 0.02 * nfp, (tp, ntp, fp, nfp)


def test_vendor_prefix_leaves_malformed_token_to_its_rule(full_engine):
    """A value with a vendor prefix that the vendor rule rejects (too short) is not re-reported
    by the generic rules; without a prefix the same value is."""
    from repoguard.credentials.engine import literal_prefixes
    assert literal_prefixes(r"\b(ghp_[0-9A-Za-z]{36})") == ["ghp_"]
    assert literal_prefixes(r"\b((?:sk|rk)_live_[0-9A-Za-z]{24})") == ["sk_live_", "rk_live_"]
    assert literal_prefixes(r"(?i:cloudflare)[a-z]{0,4}") == []
    body = "a0B1c2D3e4F5g6H7i8J9k0L1m2"
    assert full_engine.scan(f'GITHUB_API_KEY = "ghp_{body}"\n'.encode(), "a.py") == []
    assert [f.rule_id for f in full_engine.scan(f'SERVICE_API_KEY = "zq_{body}"\n'.encode(), "a.py")] == ["generic-api-key"]


def test_encoding_prefix_is_no_vendor_prefix(full_engine):
    """`eyJ` (base64 of `{"`) starts the JWT rule but belongs to no vendor: a named random value
    that starts with it and is no JWT (header, then no JSON payload) is still reported by the
    generic rules; a signed JWT stays the JWT rule's."""
    from repoguard.credentials.engine import vendor_prefixes
    prefixes = vendor_prefixes(RULES.rules)
    assert b"eyJ" not in prefixes and b"ghp_" in prefixes and b"eyJrIjoi" in prefixes
    header = base64.urlsafe_b64encode(b'{"alg":"HS256"}').rstrip(b"=").decode()
    body = base64.urlsafe_b64encode(hashlib.sha512(b"not-a-jwt").digest()).rstrip(b"=").decode()
    text = f'acme_api_key = "{header}.{body}"\n'
    assert [f.rule_id for f in full_engine.scan(text.encode(), "a.py")] in (["generic-api-key"],
                                                                            ["generic-keyword-context"])
    payload = base64.urlsafe_b64encode(b'{"sub":"fake"}').rstrip(b"=").decode()
    jwt = f'acme_api_key = "{header}.{payload}.{body[:43]}"\n'
    assert [f.rule_id for f in full_engine.scan(jwt.encode(), "a.py")] == ["jwt"]


_NARROW = r'''[\"']?[ \t]*(?:=>|:=|=|:)[ \t]*[\"'\x60]?'''

# Assignment shapes of real code and configuration; N is the variable name, V the value.
SHAPES = {
    "python": "N = 'V'", "ini": "N=V", "yaml": "N: V", "json": '{\n  "N": "V"\n}',
    "json-escaped": '{"config.ini": "N=V\\nDEBUG=true"}', "json-in-string": '"{\\"N\\": \\"V\\"}"',
    "go-short": "N := `V`", "go-var-typed": 'var N string = "V"', "kotlin-typed": 'val N: String = "V"',
    "rust-typed": 'const N: &str = "V";', "java": 'private static final String N = "V";',
    "php-concat": '$N .= "V";', "php-array": "$config['N'] = 'V';", "c-array": 'char N[] = "V";',
    "comma": 'System.setProperty("N", "V");', "getenv-default": 'os.getenv("N", "V")',
    "logstash": '  "N" => "V"', "make-simple": "N := V", "make-shell": "N ::= V",
    "make-evaluated": "N :::= V", "make-conditional": "N ?= V", "shell-append": 'N+="V"',
    "xml-element": "<N>V</N>", "xml-multiline": "<N>\n    V\n</N>",
}
# (rule id, variable name, a fake value of the vendor's format)
VENDOR_VALUES = [
    ("fastly-api-token", "fastlyApiToken", "a0B1c2D3e4F5g6H7_i8J9k0L1m2N3-o4"),
    ("cisco-meraki-api-key", "MERAKI_API_KEY", "0a1b2c3d4e5f67890a1b2c3d4e5f67890a1b2c3d"),
    ("heroku-api-key", "heroku_api_key", "0a1b2c3d-4e5f-6789-0a1b-2c3d4e5f6789"),
    ("messagebird-api-token", "MessageBirdKey", "a0B1c2D3e4F5g6H7i8J9k0L1m"),
    ("generic-api-key", "SERVICE_API_KEY", "Zq7Rt2Lm9Xw4Kp8Vn3Hs6Jd1Fb5Gc0Ty"),
]
PLACEHOLDERS = ["${FASTLY_API_TOKEN}", "<your-token>", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                "your_api_key_here_0123456789"]


def test_keyword_rules_share_one_assignment_fragment():
    """No rule keeps the old narrow operator group (`=`, `:`, `=>`, `:=` only): the languages'
    shapes are fixed in one place, the shared fragment."""
    narrow = [r.id for r in RULES.rules if r.regex and _NARROW in r.regex]
    shared = [r.id for r in RULES.rules if r.regex and ASSIGN in r.regex]
    assert narrow == [] and len(shared) >= 120


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_assignment_shapes_found_for_vendor_rules(full_engine, shape):
    """Each language's assignment shape yields the vendor rule's finding on the value."""
    for rule_id, name, value in VENDOR_VALUES:
        text = SHAPES[shape].replace("N", name).replace("V", value)
        found = [(f.rule_id, f.redacted) for f in full_engine.scan(text.encode(), "src/app.cfg")]
        assert [r for r, _ in found] == [rule_id], (rule_id, shape, found)
        assert value not in repr(found)  # never printed in full


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_assignment_shapes_reject_placeholders(full_engine, shape):
    for ph in PLACEHOLDERS:
        for _, name, _ in VENDOR_VALUES:
            text = SHAPES[shape].replace("N", name).replace("V", ph)
            assert full_engine.scan(text.encode(), "src/app.cfg") == [], (shape, name, ph)


@pytest.mark.slow
def test_assignment_shapes_not_attribute_noise():
    """A typed declaration needs an unquoted name: an HTML attribute after a quoted name
    (`name="authenticity_token" value="…"`, a CSRF token) is not one (rules only: the
    keyword-context detector judges names on its own)."""
    rules_only = Engine(RULES, structural=False)
    html = '<input type="hidden" name="authenticity_token" value="7Sq-Ab1_hsC6oovfBsJFLGPUl2EhkSWPbJhWANwgaJWBDl1v" />'
    assert rules_only.scan(html.encode(), "app/views/form.html") == []
    typed = 'var session_token string = "7Sq-Ab1_hsC6oovfBsJFLGPUl2EhkSWPbJhWANwgaJWBDl1v"'
    assert [f.rule_id for f in rules_only.scan(typed.encode(), "app/form.go")] == ["generic-api-key"]
