"""The keyword-context detector (repoguard.credentials.structural.keyword_context): a secret word
next to a random-looking value, in the shapes real code and configuration use, run by the full
engine on both backends. Values are derived at run time (SHA-256 of a label, rendered in each
alphabet) or drawn from os.urandom, so this file holds no literal credential."""
from __future__ import annotations

import base64
import hashlib
import os
import random
import re
import string
import uuid

import pytest

from repoguard.credentials.assign import ASSIGN, WS_MAX
from repoguard.credentials.engine import Engine, hyperscan
from repoguard.credentials.keys import fingerprint
from repoguard.credentials.rules import RuleSet, load_rules
from repoguard.credentials.structural import keyword_context as kc
from repoguard.credentials.structural import tokens

RULES = load_rules()
ID = "generic-keyword-context"
B62 = string.digits + string.ascii_letters


@pytest.fixture(scope="module", params=["hyperscan", "re2"])
def engine(request):
    # Hyperscan's database from the on-disk cache (compiling the default rules costs ~6 s of CPU
    # per module and xdist worker); the cache round trip itself is tested in test_engine.py.
    return Engine.build(RULES) if request.param == "hyperscan" else Engine(RULES, use_hyperscan=False)


@pytest.fixture(scope="module")
def hs_engine():
    if hyperscan is None:
        pytest.skip("needs Hyperscan")
    return Engine.build(RULES)


def shape_ends(hs_engine, data: bytes) -> list[int]:
    """SHAPE's match ends in `data`, as the engine's single Hyperscan pass hands them to the
    detector (its prefilter is one expression of that database)."""
    j = [d.id for d in hs_engine.detectors].index(ID)
    return hs_engine._candidates(data)[3].get(j, [])


def tok(label: str, n: int = 32, alphabet: str = B62) -> str:
    """A random-looking value of `n` characters of `alphabet`, fixed by `label`."""
    out, i = [], 0
    while len(out) < n:
        for b in hashlib.sha256(f"{label}:{i}".encode()).digest():
            if b < 256 - 256 % len(alphabet):
                out.append(alphabet[b % len(alphabet)])
        i += 1
    return "".join(out[:n])


def found(engine, text: str, path: str = "app/settings.py") -> list:
    return engine.scan(text.encode(), path)


def covers(findings, text: str, value: str) -> bool:
    """Exactly one finding, and it spans `value`."""
    a = text.index(value)
    return len(findings) == 1 and findings[0].start == a and findings[0].end == a + len(value)


@pytest.mark.parametrize("shape, path", [
    ('ACME_API_KEY = "{v}"\n', "app/settings.py"),
    ("acmeSecretKey: '{v}'\n", "deploy/values.yaml"),
    ("ACME_ACCESS_TOKEN={v}\n", "app/.env"),
    ('{{"acme": {{"client_secret": "{v}"}}}}\n', "app/config.json"),
    ("acme-cli deploy --api-key {v} --region eu\n", "scripts/deploy.sh"),
    ("acme-cli deploy --token={v}\n", "scripts/deploy.sh"),
    ("# acme private access key {v}\n", "app/settings.py"),
    ('client.set_api_key("{v}")\n', "app/client.py"),
    ("acme:\n  secret:\n    {v}\n", "deploy/values.yaml"),
    ('payload = "{{\\"acmeSecret\\":\\"{v}\\"}}"\n', "app/client.py"),
    ("ACME_KEY => '{v}',\n", "config/app.php"),
    ('acmeToken := "{v}"\n', "cmd/main.go"),
    ("<acmeApiKey>{v}</acmeApiKey>\n", "config/settings.xml"),
    ('<add key="AcmeApiKey" value="{v}" />\n', "web.config"),
    ('variable "acme_api_token" {{\n  default = "{v}"\n}}\n', "infra/vars.tf"),
    # the rules' shared assignment fragment (repoguard.credentials.assign.ASSIGN)
    ('var acmeAuthToken string = "{v}"\n', "cmd/main.go"),
    ('val acmeSecret: String = "{v}"\n', "app/Config.kt"),
    ('const ACME_TOKEN: &str = "{v}";\n', "src/main.rs"),
    ('char acme_secret[] = "{v}";\n', "src/config.c"),
    ('$acme_api_key .= "{v}";\n', "config/app.php"),
    ("ACME_SECRET ::= {v}\n", "Makefile"),
    ("ACME_SECRET :::= {v}\n", "Makefile"),
    ("ACME_API_TOKEN ?= {v}\n", "Makefile"),
    ('ACME_TOKEN+="{v}"\n', "scripts/env.sh"),
    ('System.setProperty("acme.api.secret", "{v}");\n', "src/Main.java"),
    ("<acmeApiKey>\n    {v}\n</acmeApiKey>\n", "config/settings.xml"),
])
@pytest.mark.parametrize("alphabet, n", [(B62, 32), (string.hexdigits[:16], 40),
                                         (string.ascii_lowercase + string.digits, 36)])
def test_true_positive_shapes(engine, shape, path, alphabet, n):
    v = tok(shape + alphabet, n, alphabet)
    text = shape.format(v=v)
    fs = found(engine, text, path)
    assert covers(fs, text, v), (shape, [(f.rule_id, f.redacted) for f in fs])
    # a more specific rule or detector may claim the span first (the engine keeps one finding)
    assert fs[0].rule_id in (ID, "generic-api-key", "generic-private-key-variable", "generic-hex-secret",
                             "dotnet-appsetting-secret", "terraform-variable-secret-default")


ASSIGN_SHAPES = [
    'var acmeAuthToken string = "{v}"\n', 'val acmeSecret: String = "{v}"\n',
    'const ACME_TOKEN: &str = "{v}";\n', 'char acme_secret[] = "{v}";\n', '$acme_passwd .= "{v}";\n',
    "ACME_SECRET ::= {v}\n", "ACME_SECRET :::= {v}\n", "ACME_PWD ?= {v}\n", 'ACME_TOKEN+="{v}"\n',
    'System.setProperty("acme.api.secret", "{v}");\n', "<acmePassword>\n    {v}\n</acmePassword>\n",
]


@pytest.mark.parametrize("backend", ["hyperscan", "re2"])
@pytest.mark.parametrize("shape", ASSIGN_SHAPES)
def test_detector_knows_the_rules_assignment_fragment(hs_engine, backend, shape):
    """The detector on its own (no generic rule to claim the span first) finds the value in every
    shape of the rules' shared assignment fragment, on both the Hyperscan path (windows before
    the prefilter's match ends) and the RE2 path (the whole text)."""
    def hits(text: bytes) -> list[bytes]:
        ends = shape_ends(hs_engine, text) if backend == "hyperscan" else None
        return [h.secret for h in kc.find(text, "src/app.cfg", ends)]
    v = tok(shape)
    assert hits(shape.format(v=v).encode()) == [v.encode()], shape
    # the same shapes with a word or a placeholder as value stay quiet
    for word in ("AcmeTokenProvider", "your_api_key_here_0123456789"):
        assert hits(shape.format(v=word).encode()) == [], (shape, word)


@pytest.mark.parametrize("name", ["ACME_API_KEY", "acme_tkn", "acmeSecret"])
def test_whitespace_before_the_operator_is_bounded_alike(hs_engine, name):
    """ASSIGN's whitespace runs hold at most WS_MAX spaces: with WS_MAX spaces before `=` the value
    is found, with 300 (past the detector's window) or 1 100 (past a rule's 1 024-byte window) it
    is consistently not found, by the Hyperscan engine (confirmation in windows before the hits)
    and the RE2 engine (the whole text) alike, and by the detector on both of its paths."""
    re2_engine = Engine(RULES, use_hyperscan=False)
    v = tok("ws" + name, 32)
    for n, expected in ((WS_MAX, True), (300, False), (1100, False)):
        text = f'{name}{" " * n}= "{v}"\n'.encode()
        fs = [(f.rule_id, f.start, f.end) for f in hs_engine.scan(text, "app/settings.py")]
        assert fs == [(f.rule_id, f.start, f.end) for f in re2_engine.scan(text, "app/settings.py")], n
        assert bool(fs) == expected and all(text[a:b] == v.encode() for _, a, b in fs), (n, fs)
        windowed = [(h.start, h.end) for h in kc.find(text, "a.py", shape_ends(hs_engine, text))]
        assert windowed == [(h.start, h.end) for h in kc.find(text, "a.py")], n
        assert bool(windowed) == expected, n


def test_shape_fits_its_window():
    """Every repetition in SHAPE is bounded and WINDOW is its longest match, so the windows before
    the prefilter's match ends hold every match (the Hyperscan path equals the RE2 path)."""
    assert "[ \\t]*" not in ASSIGN and "[ \\t]+" not in ASSIGN
    assert re.compile(ASSIGN).match(" " * (WS_MAX + 1) + "=") is None
    assert 4 * WS_MAX < kc.WINDOW <= 1024
    longest = b"key" + b"_" * 30 + b" " * WS_MAX + b":" + b" " * WS_MAX + b"String" + b" " * WS_MAX + b"="
    longest += b" " * WS_MAX + b'"' + b"ab " * 2 + b"0"
    assert kc._SHAPE_RE.fullmatch(longest) and len(longest) <= kc.WINDOW


def test_vendor_name_and_secret_word_shapes(engine):
    """`<vendor> <secret word> <token>` and glued `<vendor>-<secret>-<token>` shapes."""
    v = tok("glued", 40)
    for text in (f"acmecorp SECRET {v}\n", f"acmecorpPRIVATE-{v}\n", f"acmecorp.TOKEN.{v}\n",
                 f"acmecorp ACCESS TOKEN {v}\n", f"acmecorp_secret_key-{v}\n"):
        fs = found(engine, text)
        assert covers(fs, text, v) and fs[0].rule_id == ID, text[:20]
    # A seeded UUID: the generic rules' entropy floor rejects about one random UUID in 50 (e.g.
    # aea85075-…-adde8aff5192, 3.4 bits/char, repeated a/8/9/d/f), so os.urandom made this flaky.
    u = str(uuid.UUID(int=random.Random(7).getrandbits(128), version=4))
    text = f"ACME_SECRET_KEY={u}\n"
    assert covers(found(engine, text), text, u)


@pytest.mark.parametrize("text", [
    'API_KEY = "your_api_key_here_0123"\n',
    "API_TOKEN = <YOUR_TOKEN_HERE_123>\n",
    'SECRET = "${ACME_SECRET_2024}"\n',
    'token = "xxxxxxxxxxxxxxxxxxxxxxxx1"\n',
    "acme SECRET abcd1234efgh5678ijkl9012mnop\n",          # hand-typed sequence
    "acme TOKEN a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6\n",       # interleaved sequences
    "acme_key = 123e4567-e89b-12d3-a456-426614174000\n",   # RFC 4122's example UUID
    'acme_secret = "9f3k9f3k9f3k9f3k9f3k9f3k"\n',          # a repetition
    "token = AccessTokenProvider2\n",                      # class name
    "secret_key = settings.SECRET_KEY_2024_ROTATION\n",    # identifier
    'key_file = "certs/server_2048/client_v3.pem"\n',       # path
    'token_url = "https://auth.acme.io/oauth2/v1/token"\n',  # URL
    'access_token = base64.b64encode(raw_bytes_2048)\n',   # a call
    'verify_token = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9..."\n',  # an elided sample
    "    py3.10-langchain-notiktoken-latest: ormsgpack==1.12.2\n",  # a word holding "token"
    "keyboard_layout = kbd_3f9a8b7c6d5e4f3a2b1c\n",         # a word holding "key"
    "private static final long serialVersionUID = 4611686018427387904L;\n",
    '#define LN_pbe_WithSHA1And3_Key_TripleDES_CBC "pbeWithSHA1And3-KeyTripleDES-CBC"\n',  # its own name
    "#define V4L2_CID_FORCE_KEY_FRAME (V4L2_CID_CODEC_BASE+229)\n",  # a macro expression
    '"aws-secret-access-key-backfill": "scripts/backfill_s3.py",\n',  # a file path
    "  >>> encipher('meet me at 8am', key)\n    'KFKLJJHF5MMMKTFRGPL'\n",  # doctest output
    '    "Data2VecTextForTokenClassification",\n    "Data2VecTextModel2",\n',  # a list of names
    "XMLSEC_EXPORT xmlSecKeyPtr       xmlSecNssAppPkcs12Load          (const char *f);\n",  # C decl
    "gpg --keyserver hkps://keys.openpgp.org --recv-keys 4ED778F539E3634C779C87C6D7062848A1AB005C\n",
])
def test_false_positive_shapes(engine, text):
    assert not [f for f in found(engine, text) if f.rule_id == ID], text


def test_names_that_do_not_hold_a_secret(engine):
    """A UUID or random value named as an id, a public key, a lookup/pagination key, a hash."""
    u = str(uuid.UUID(bytes=os.urandom(16), version=4))
    h = hashlib.sha256(os.urandom(8)).hexdigest()
    pub = base64.b64encode(os.urandom(32)).decode()
    nxt = tok("page", 40)
    for text in (f"auth0_client_id = '{u}'\n", f"access_key_id: {u}\n", f"public_key = \"{pub}\"\n",
                 f"cache_key = '{h}'\n", f"next_page_token: {nxt}\n", f"csrf_token = '{nxt}'\n",
                 f"secret_sha256 = \"{h}\"\n", f"token_type: {nxt}\n",
                 f"authenticity_token = '{nxt}'\n", f"test_spreadsheet_key = \"{nxt}\"\n",
                 f"key_down_event = '{nxt}'\n",
                 f"- key: {nxt}\n  value: {tok('v', 20)}\n"):
        assert not [f for f in found(engine, text) if f.rule_id == ID], text.split("=")[0]


def test_base64_of_text_and_well_known_values_are_not_secrets(engine):
    text_b64 = base64.b64encode(b"this is just a sentence, not a key").decode()
    assert not [f for f in found(engine, f"acme SECRET {text_b64}\n") if f.rule_id == ID]
    # A fixed random key: ~2 % of uniformly random values read as words or runs and are skipped.
    key_b64 = base64.b64encode(random.Random(30).randbytes(30)).decode()
    assert [f.rule_id for f in found(engine, f"acme SECRET {key_b64}\n")] == [ID]
    emulator = tokens._WELL_KNOWN  # the Azure Storage emulator key is published: listed by digest only
    assert all(len(d) == 64 for d in emulator)


def test_random_values_are_found_and_words_are_not():
    """Across alphabets and lengths, ≥ 95 % of uniformly random values pass `random_token`
    (measured on 3,000 each: 97–99 %; the rest hold a 5-long repeat or sequence, or read as words);
    identifiers, paths, versions and base64 of text do not."""
    rng = os.urandom
    for alphabet, n in ((B62, 16), (B62, 32), (B62 + "_-", 43), ("0123456789abcdef", 32),
                        ("0123456789abcdef", 64), (string.ascii_uppercase + string.digits, 20),
                        (string.ascii_lowercase + string.digits, 40)):
        vals = ["".join(alphabet[b % len(alphabet)] for b in rng(n)) for _ in range(1000)]
        vals = [v for v in vals if any(c.isdigit() for c in v) and any(c.isalpha() for c in v)]
        rate = sum(kc.random_token(v.encode()) for v in vals) / len(vals)
        assert rate >= 0.95, (alphabet[:12], n, rate)
    for word in (b"AccessTokenProvider2", b"SECRET_KEY_2024_ROTATION", b"get_user_by_name_v2",
                 b"xchacha20poly1305_keygen", b"com.example.auth.TokenStore2", b"src/auth/tokens_v2.py",
                 b"1.13.0-cp310-manylinux_x86_64", b"abcdef0123456789abcdef", b"0987654321zyxwvutsrq",
                 base64.b64encode(b"hello world this is text"), b"aaaa1111bbbb2222cccc"):
        assert not kc.random_token(word), word


def test_one_finding_per_secret_and_priority(engine):
    """The generic rule and the detector see the same value: one finding, the rule's; a vendor
    token is left to its vendor rule; a vendor prefix the vendor rule rejects is not re-reported."""
    v = tok("dup", 32)
    text = f'ACME_API_KEY = "{v}"\n'
    fs = found(engine, text)
    assert [f.rule_id for f in fs] == ["generic-api-key"]
    body = tok("gh", 36)
    fs = found(engine, f'acme_token = "ghp_{body}"\n')
    assert [f.rule_id for f in fs] == ["github-pat"]
    assert found(engine, f'acme_token = "ghp_{body[:20]}"\n') == []


def test_severity_and_triage(engine):
    v = tok("sev", 32)
    text = f"acme SECRET {v}\n"
    (f,) = found(engine, text, "app/client.py")
    assert (f.rule_id, f.location, f.severity) == (ID, "source", "medium")
    (f,) = found(engine, text, "tests/test_client.py")
    assert (f.location, f.severity) == ("test", "low")
    assert v not in str(f.to_json()) and f.redacted == f"****({len(v)} chars)"
    assert f.secret_hmac == fingerprint(engine.key, v.encode())


def test_inline_allow_marker(engine):
    v = tok("allow", 32)
    assert found(engine, f"acme SECRET {v}  # repoguard:allow\n") == []


def test_re2_fallback_matches_hyperscan(hs_engine):
    """Without Hyperscan the detector searches the whole text with RE2: same hits."""
    vals = [tok(f"fb{i}", 32) for i in range(3)]
    text = (f"x = 1\nacme SECRET {vals[0]}\n" + "filler line\n" * 200 +
            f"ACME_TOKEN={vals[1]}\nkeyboard = 3\nacme-cli --api-key {vals[2]}\n").encode()
    with_hs = [(h.start, h.end) for h in kc.find(text, "a.py", shape_ends(hs_engine, text))]
    without = [(h.start, h.end) for h in kc.find(text, "a.py")]
    assert with_hs == without and len(with_hs) == 3


def test_merged_windows_on_dense_input_match_whole_text(hs_engine):
    """A file dense with keyword-then-digit shapes (a key-code header) gets one merged, disjoint
    range per stretch of candidates, and the same hits as RE2 over the whole text."""
    vals = [tok(f"dense{i}", 40) for i in range(4)]
    lines = [f"#define KEY_F{i} {i}" for i in range(3000)]
    for k, v in enumerate(vals):
        lines.insert(700 * k + 5, f'ACME_API_TOKEN = "{v}"')
    text = "\n".join(lines).encode()
    ends = shape_ends(hs_engine, text)
    ranges = list(kc._windows(text, ends))
    assert all(a < b <= c < d for (a, b), (c, d) in zip(ranges, ranges[1:]))   # disjoint, ordered
    assert len(ranges) < 3000 // 10      # merged: not one range per `#define` line
    with_hs = [(h.start, h.end) for h in kc.find(text, "keys.h", ends)]
    without = [(h.start, h.end) for h in kc.find(text, "keys.h")]
    assert with_hs == without and len(with_hs) == 4


def test_value_scan_stops_past_the_longest_value():
    """A name followed by a megabyte blob: the value is not reported (longer than any key)
    and is read only up to 2 048 + 1 bytes."""
    blob = b"QWxhZGRpbjpvcGVuIHNlc2FtZQ0K" * 40000
    assert list(kc.find(b"api_key = " + blob + b"\n", "a.py")) == []
    assert kc._scan_run(blob, 0, kc._TOKCH) == kc._MAX_VALUE + 1


def test_linear_on_adversarial_input(hs_engine, monkeypatch):
    """Many keywords and long runs: bounded work (windows of WINDOW bytes before candidates,
    or one pass of RE2 over the whole text). Work is counted, not timed (bench/hostile.py times
    it): the bytes each RE2 search reads, up to its match's end, add up to about one pass."""
    searched = []

    class Counted:
        def __init__(self, rx):
            self.rx = rx

        def search(self, data, lo, hi):
            m = self.rx.search(data, lo, hi)
            searched.append((m.end() if m else hi) - lo)
            return m

    monkeypatch.setattr(kc, "_SHAPE_RE", Counted(kc._SHAPE_RE))
    data = (b"key=" + b"a1" * 20 + b" ") * 20000 + b"token: " + b"9" * 200000
    for ends in (shape_ends(hs_engine, data), None):
        searched.clear()
        list(kc.find(data, "x", ends))
        assert searched, "RE2 never ran"
        assert sum(searched) <= 2 * len(data) + kc.WINDOW, (sum(searched), len(data))


def test_prefilter_lives_in_the_engine_database(tmp_path, monkeypatch):
    """SHAPE is one expression of the engine's single (cached) Hyperscan database, no database of
    the detector's own: an engine compiled, loaded from the cache, or rebuilt after the cache is
    damaged reports the same hit, as the RE2 backend does."""
    if hyperscan is None:
        pytest.skip("needs Hyperscan")
    monkeypatch.setenv("REPOGUARD_CACHE_DIR", str(tmp_path))
    detectors_only = RuleSet(rules=())
    v = tok("cache", 32)
    text = f"acme SECRET {v}\n".encode()
    engines = [Engine.build(detectors_only), Engine.build(detectors_only)]
    (cached,) = tmp_path.glob("hs-*.db")
    cached.write_bytes(b"not a database")
    engines += [Engine.build(detectors_only), Engine(detectors_only, use_hyperscan=False)]
    assert [e.backend for e in engines] == ["hyperscan"] * 3 + ["re2"]
    for e in engines:
        assert [(f.rule_id, f.start) for f in e.scan(text, "a.py")] == [(ID, text.index(v.encode()))]
    assert cached.read_bytes() != b"not a database"
