"""A secret word next to a random-looking value, whatever the vendor: `<name with key/secret/
token/...> <separator> <random token>`, as API keys appear in code and configuration.

Shapes (the keyword may sit anywhere in a snake/kebab/camel/dotted name, e.g. `acme_api_key`,
`acmeSecretKey`, `ACME.TOKEN`):
- assignments and mappings: `NAME = "v"`, `NAME: v`, `"name": "v"`, `NAME => 'v'`, `name := "v"`,
  env files `NAME=v`, a call `setApiKey("v")`, the value on the next line of a YAML key, and every
  shape of the rules' shared assignment fragment (`repoguard.credentials.assign.ASSIGN`): typed
  declarations `var NAME string = "v"`, `NAME: &str = "v"`, `NAME[] = "v"`, Makefile
  `::=`/`:::=`/`?=`, PHP `.=`, shell `+=`, `setProperty("NAME", "v")`, `<NAME>` then the value on
  the next line;
- CLI flags: `--api-key v`, `--token=v`;
- XML: `<apiKey>v</apiKey>`, .NET `<add key="ApiKey" value="v"/>`; Terraform
  `variable "acme_token" { default = "v" }`;
- phrases and comments: `acme secret v`, `acme private access key v` (only secret words may
  stand between the keyword and the value);
- glued names: `acme-secret-<v>`, `acmeToken.<v>`.

The value is a run of token characters (`[A-Za-z0-9+/_=~.-]`) that must look random
(`random_token`): 16–2048 characters with a letter and a digit; Shannon entropy (bits per
character, H = −Σ p log₂ p [Shannon 1948]) at least 0.75·log₂ min(length, alphabet) where the
alphabet is 16 (hex), 36 (one-case alphanumeric) or 64 (mixed case, base64); not a placeholder
(`placeholders.is_placeholder`), a hand-typed sequence (`abcd1234`, `a1b2c3`, the RFC 4122
example UUID), hex edited by hand (`alphabet.edited_hex`), a repetition, an identifier made of
words (`AccessTokenProvider2`, `SECRET_KEY_2024`), a number, a dotted name or version, or a
file/URL path. A value glued to a character no token holds (`…Yc0$`, `'…f3?'`, `…9a!x`: see
`_glued`), or to an `=` that more token characters follow (`…0_L=~lh…`), is part of a longer
string, not a generated key.

The name must mean a secret: names ending in a non-secret word (`token_url`, `auth0_client_id`,
`key_path`, `secret_name`, `token_type`), public keys (`public_key`, `publishable_key`),
lookup/pagination keys (`cache_key`, `sort_key`, `page_token`, `csrf_token`) and words that
merely contain a keyword (`keyboard`, `monkey`, `author`, `tokenizer`, `accessor`) are skipped.

Findings use the rule id `generic-keyword-context` (a generic rule: medium severity) and the
lowest priority (`priority.CONTEXT`: any vendor rule, structural detector or generic rule
claiming the same span wins; a value starting with a vendor's prefix is left to that vendor's
rule).

Speed: SHAPE (keyword, separator, then a digit within the next 25 token characters) is this
detector's prefilter, one more expression in the engine's single Hyperscan database (the text is
read by Hyperscan once for rules and detectors); RE2 and the Python checks then run only in the
WINDOW bytes before each SHAPE match end (≈ 7 % of source files have one). Every repetition in
SHAPE is bounded (whitespace runs by ASSIGN's WS_MAX), WINDOW is its longest match, so the
windows hold every match and the result is exactly that of the RE2 fallback, which (without
Hyperscan) searches the whole text. About 1.5 ms per MB of ordinary source (≈ 5 % of a scan);
files dense with keyword-then-digit shapes (`#define KEY_F1 60` tables, `"token_count": 1`
JSON) cost 0.3–0.6 s per MB, the Python checks per candidate. A value is read for at most 2 048
bytes.
"""
from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import math
import re
from typing import Iterable, Iterator

import re2

from repoguard.credentials.alphabet import edited_hex
from repoguard.credentials.assign import ASSIGN, WS_MAX
from repoguard.credentials.entropy import shannon_entropy as entropy
from repoguard.credentials.priority import CONTEXT
from repoguard.credentials.rule_types import max_width
from repoguard.credentials.structural.base import Detector, Hit
from repoguard.credentials.structural.placeholders import is_placeholder, keyboard_walk

KEYWORDS = (b"secret", b"token", b"tkn", b"password", b"passwd", b"passphrase", b"pwd",
            b"credential", b"auth", b"access", b"private", b"key")
_KW = rb"(?:secret|token|tkn|passw(?:or)?d|passphrase|pwd|credential|auth|access|private|key)"
_WS = rb"[ \t]{0,%d}" % WS_MAX  # a run of spaces/tabs, bounded as in ASSIGN
_WS1 = rb"[ \t]{1,%d}" % WS_MAX
# Terraform `variable "acme_token" {\n  default = "v"`: the block's default is the value.
_TF = rb"[\"']?" + _WS + rb"\{\s{0,40}default" + _WS + b"=" + _WS + rb"\""
# keyword, rest of the name, a separator (assignment, call, flag, phrase or glue), up to two
# words, then a value with a digit in its first 25 characters (matched up to its first digit:
# the same starts as up to any digit, one reported end instead of one per digit). Every
# repetition is bounded.
SHAPE = (_KW + rb"[a-z0-9_.-]{0,30}(?:" + ASSIGN.encode()
         + rb"|[\\\"'`\])]{0,3}" + _WS + rb"(?:=>|:=|=|:|,|\(|>|[ \t]|\r?\n)" + _WS
         + rb"(?:\r?\n" + _WS + rb")?[\\\"'`(\[]{0,3}" + _WS
         + rb"|[-_.]|[\"']" + _WS1 + b"value" + _WS + b"=" + _WS + rb"[\"']|" + _TF
         + rb"|" + _WS1 + rb"-{1,2}" + _WS1 + rb"[\"'`]?"
         + rb")(?:[a-z]{2,16}" + _WS1 + rb"){0,2}[a-z+/_=~.-]{0,24}[0-9]")
# Bytes before a SHAPE match end where the match can start (all its characters are ASCII): the
# RE2 search window before each end the prefilter reports.
WINDOW = max_width(SHAPE.decode())
_TF_DEFAULT = re.compile(_TF)
# The rules' assignment fragment (Makefile `::=`/`?=`, PHP `.=`, typed `var N string =`, `N[] =`,
# XML element with the value on the next line); a comma stays with the loop in `_value_after`,
# which asks for a quoted name before it. The value (≥ 16 token characters) must follow, so that
# `N: String = "v"` is read as a typed declaration, not as `N:` followed by the word `String`.
_ASSIGN_RE = re.compile(ASSIGN.encode() + rb"(?=[A-Za-z0-9+/_=~.-]{16})")
_KW_RE = re2.compile(rb"(?i)" + _KW)
_NOUN_RE = re2.compile(rb"(?i)secret|token|tkn|passw(?:or)?d|passphrase|pwd|credential|key")
_SHAPE_RE = re2.compile(rb"(?i)" + SHAPE)

_ALNUM = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_NAMECH = _ALNUM | frozenset(b"_.-")
_TOKCH = _ALNUM | frozenset(b"+/_=~.-")
_SEP = frozenset(b" \t\"'`()[]\\")
_GLUE = frozenset(b"$%^*")  # never right after a generated token (`%` unless URL-encoding)
_GLUE_INSIDE = frozenset(b"?!|#")  # sentence or table punctuation, glue only inside a value
_QUOTES = frozenset(b"\"'`")
_PCT = re.compile(rb"%[0-9A-Fa-f]{2}")
_OPS = frozenset(b"=:>")  # `=`, `:`, `=>`, and `>` closing an XML tag (`<apiKey>v</apiKey>`)
_HEX = frozenset(b"0123456789abcdefABCDEF-")

# Words that contain a keyword but do not name a secret.
_NOT_SECRET = tuple(
    b"keyword keyboard keyfram keycode keypress keydown keyup keystroke keyspace keyval keyerror "
    b"keypath keyserver keyid monkey turkey hockey donkey jockey whiskey author tokeniz tiktoken "
    b"accessor accessib accesslog privatemode passthrough passage bypass "
    b"csrf xsrf requestverificationtoken".split())  # anti-forgery form tokens (csrfmiddlewaretoken)
# A name ending in one of these words holds something else than the secret itself.
_NOT_VALUE = frozenset(
    b"id ids uuid guid name names url urls uri uris host hostname domain endpoint endpoints path "
    b"paths file files filename dir directory folder type types kind mode length len size count "
    b"num number header headers prefix suffix field fields env var version format fmt algorithm "
    b"algo alg method hash hashed digest checksum sha sha1 sha256 md5 fingerprint index idx ref "
    b"label template regex pattern expiry expires expiration exp ttl timeout scope scopes column "
    b"table attr attribute param params class cls provider store manager policy arn location region "
    b"bucket topic queue cache schema spec test tests example sample icon color image date time "
    b"ip address port user username login email owner account role group level status state "
    b"sid pid uid ref rev revision commit tag branch key_id keyid lifetime limit max min".split())
# Words before the keyword that make it a lookup or protocol value, not a credential.
_NOT_CREDENTIAL = frozenset(
    b"public pub publishable cache sort primary foreign partition hash range row lookup dict map "
    b"unique composite idempotency dedup shard routing object page next continuation cursor csrf "
    b"xsrf sync nonce correlation trace request etag i18n translation registry entry column "
    b"property prop metric label event sequence resume ssh gpg pgp host known recv authenticity "
    b"spreadsheet sheet document doc".split())  # a Google Sheets `spreadsheet_key` is a document id
# A log line's level marker: there a bare `Key=`/`key:` names a credential, not a mapping's key.
_LOG_LINE = re.compile(rb"\[(?i:debug|info|warn|warning|error|trace|fatal)\]|\b(?:DEBUG|INFO|WARN|WARNING|ERROR|TRACE|FATAL)\b"
                       rb"|level=")
_VERSION = re.compile(rb"v?[0-9]+\.[0-9]+(?:[.-]|$)")  # 1.2.3-cp310-...: a version or file name
# 1.7976931348623157e+308: a float (written so that no two parts can take the same digits)
_NUMBER = re.compile(rb"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_FILE_EXT = re.compile(rb"\.[A-Za-z][A-Za-z0-9]{0,4}$")  # scripts/backfill_s3.py
_MODULE = re.compile(rb"[a-z]{2,8}[0-9]{1,3}[a-z]{0,8}$")  # win32api, utf8, py3k: module names
_CAMEL_WORD = re.compile(rb"[A-Z][a-z]{2,}")
_SYLLABLE = re.compile(rb"[aeiouAEIOU]")
_CLUSTER = re.compile(rb"[^aeiouAEIOU]{4}")  # 4 consonants in a row: not an English word
_WORD_SPLIT = re.compile(rb"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_REPEAT5 = re.compile(rb"(.)\1{4}")
_CONSONANTS5 = re.compile(rb"[^aeiouy]{5}")
_NAME_SEPS = re.compile(rb"[_.-]+")
_B64_TEXT = re.compile(rb"[A-Za-z0-9+/]+={0,2}")
_MAX_VALUE = 2048  # `random_token` rejects longer values: no scan needs to read past one
# Words between a secret's name and its value: `api key <v>`, prose `your token is <v>`.
_HOP_AFTER_SPACE = frozenset((b"code", b"api", b"value", b"bearer", b"basic", b"is", b"was"))

# Published, non-secret values (SHA-256 of each), in order: OpenSSL's FIPS module integrity key
# (FIPS_KEY_STRING in fipskey.h, the same in every build); the Azure Storage emulator's account
# key (learn.microsoft.com, "Azurite": the same for every developer); the example consumer key,
# token and signature of RFC 5849 §3.5.1; the example access and refresh tokens of RFC 6749
# §4.1.4 (copied into OAuth libraries' docs and tests).
_WELL_KNOWN = frozenset((
    "d0720d84879472284611dc023d47fc39cf655d377117a9fb879c7da7ec807e6b",
    "0011cc25eb4320717494d2703e8cba85743e71b500283c21c8b88147992f9059",
    "8d567eb88afff34f31ab97fbb2731e582703bdeaf3c92b989cf568e0b23cef31",
    "9d03b692e941d5ace207a9f8048834439f6de98e5c6c1590c22c4f4577c88a42",
    "199a18992e0079f4b405af79e9e99fe88f2514baccf7b875577b56f73217a488",
    "6c96130f130ab0d6d158397e24d2bcc1c9a5e73ae081f6e983f1c7b545d24a4c",
    "00cf4c781dc37003f7c7dd7d4c9a6ef1e0f4c62d9a291aa8bc398774e3fefd32",
))

# RFC 4122's example UUID (123e4567-e89b-12d3-a456-426614174000) and its hand-edited variants.
_SAMPLE_UUID = b"123e4567-e89b-12d3-a456-"


def _words(name: bytes) -> list[bytes]:
    return [w.lower() for w in _WORD_SPLIT.findall(name)]


def _sequence_fraction(s: bytes) -> float:
    """Fraction of `s` in runs of ≥ 3 characters stepping by +1 or −1 (`abc`, `4321`)."""
    if len(s) < 3:
        return 0.0
    covered = [False] * len(s)
    for step in (1, -1):
        run = 1
        for i in range(1, len(s) + 1):
            if i < len(s) and s[i] - s[i - 1] == step:
                run += 1
                continue
            if run >= 3:
                for k in range(i - run, i):
                    covered[k] = True
            run = 1
    return sum(covered) / len(s)


def _hand_typed(tok: bytes) -> bool:
    """True for sequences (`abcd1234efgh`, `a1b2c3d4`, `0987654321`), keyboard walks
    (`asdfqwer1234asdf`) and repetitions."""
    core = bytes(c for c in tok if c in _ALNUM)
    if len(core) < 8:
        return True
    if _sequence_fraction(core) >= 0.4:
        return True
    digits = bytes(c for c in core if 48 <= c <= 57)
    letters = bytes(c for c in core.lower() if 97 <= c <= 122)
    for part in (digits, letters):
        if len(part) >= 8 and _sequence_fraction(part) >= 0.6:
            return True
    n = len(core)
    for p in range(1, n // 2 + 1):  # periodic: `abc123abc123`
        if core[p:] == core[:n - p]:
            return True
    return _REPEAT5.search(core) is not None or tok.lower().startswith(_SAMPLE_UUID) or keyboard_walk(tok)


def _pronounceable(word: bytes) -> bool:
    low = word.lower()
    vowels = sum(c in b"aeiouy" for c in low)
    return vowels >= 0.2 * len(low) and _CONSONANTS5.search(low) is None


def _identifier_like(tok: bytes) -> bool:
    """True when `tok` reads as words (a name or path segment), e.g. `AccessTokenProvider2`,
    `SECRET_KEY_2024`, `xchacha20poly1305_keygen`: split at case changes, digits and
    punctuation, its pieces are few (≥ 3.5 characters each on average) and ≥ 70 % of its
    letters sit in pronounceable words of ≥ 3 letters (random strings break into many short,
    unpronounceable pieces); or ≥ 60 % of it is capitalised words of ≥ 3 letters with a vowel
    and no 4 consonants in a row (CamelCase)."""
    segs = [p for p in _NAME_SEPS.split(tok) if p]
    if len(segs) >= 2 and sum(len(p) for p in segs if _namelike(p)) > 0.6 * sum(map(len, segs)):
        return True
    camel = [w for w in _CAMEL_WORD.findall(tok) if _SYLLABLE.search(w) and not _CLUSTER.search(w)]
    if sum(map(len, camel)) >= 0.6 * len(tok):
        return True  # CamelCase: `T5Gemma2PreTrainedModel`, `Data2VecTextModel`
    words = _WORD_SPLIT.findall(tok)
    letters = sum(len(w) for w in words if not w.isdigit())
    if not letters:
        return True
    if len(tok) / len(words) < 3.5:
        return False
    wordy = sum(len(w) for w in words if len(w) >= 3 and not w.isdigit() and _pronounceable(w))
    return wordy >= 0.7 * letters


def _path_or_dotted(tok: bytes) -> bool:
    """A file/URL path (`a/b/c.txt`), a dotted name (`com.acme.Auth2`) or a version (`1.2.3-rc1`)."""
    if tok[:1] in (b"/", b".", b"~") or (b"/" in tok and _FILE_EXT.search(tok)):
        return True
    for sep in (b"/", b"."):
        parts = [p for p in tok.split(sep) if p]
        if len(parts) >= 2 and all(p.isdigit() or _identifier_like(p) or len(p) <= 4 or _MODULE.match(p)
                                   for p in parts):
            return True
    parts = [p.strip(b"_") for p in tok.split(b".") if p.strip(b"_")]
    return len(parts) >= 3 and sum(_namelike(p) or _identifier_like(p) for p in parts) > len(parts) / 2


def _decodes_to_text(tok: bytes) -> bool:
    """True when `tok` is base64 of printable text with spaces or words (`dGhlIHNhbXBsZQ==`,
    "the sample"), not of random bytes or a random printable string."""
    if len(tok) % 4 or not _B64_TEXT.fullmatch(tok):
        return False
    try:
        raw = base64.b64decode(tok, validate=True)
    except (binascii.Error, ValueError):
        return False
    if not raw or sum(32 <= c < 127 for c in raw) < 0.95 * len(raw):
        return False
    # Text has spaces or words; base64 of a random printable key (`Xk29fQ...`) is still a key.
    return b" " in raw or _identifier_like(bytes(c for c in raw if c in _ALNUM))


# The lengths generated API keys come in (16–64 random bytes or characters, hex, base62 or base64
# encoded; a UUID), in one alphabet: hex, alphanumerics, base64url or base64 (no `.` or `~` inside:
# those join words, versions and paths, not key characters).
KEY_LENGTHS = frozenset((16, 20, 22, 24, 26, 28, 30, 32, 36, 40, 43, 44, 45, 48, 50, 56, 60, 64,
                         80, 86, 88, 96, 128))
_KEY_ALPHABET = re.compile(rb"[0-9A-Za-z_-]+|[0-9A-Za-z+/]+={0,2}")


def common_key_shape(tok: bytes) -> bool:
    """True when `tok` has one of the common key shapes (KEY_LENGTHS, one alphabet): the value
    test where the evidence around it is weak (prose and log glue, a vendor's name alone)."""
    return len(tok) in KEY_LENGTHS and _KEY_ALPHABET.fullmatch(tok) is not None


def random_token(tok: bytes) -> bool:
    """True when `tok` (token characters only) looks like a generated secret (see the module
    docstring for the tests)."""
    n = len(tok)
    if n < 16 or n > 2048:
        return False
    if not any(48 <= c <= 57 for c in tok) or not any(c in _ALNUM and c > 64 for c in tok):
        return False
    if _VERSION.match(tok) or _NUMBER.fullmatch(tok) or _path_or_dotted(tok) or is_placeholder(tok) \
            or _hand_typed(tok) or _identifier_like(tok) or edited_hex(tok):
        return False
    if _decodes_to_text(tok) or hashlib.sha256(tok).hexdigest() in _WELL_KNOWN:
        return False
    core = bytes(c for c in tok if c in _ALNUM)
    if all(c in _HEX for c in core):
        alphabet = 16
    elif core == core.lower() or core == core.upper():
        alphabet = 36
    else:
        alphabet = 64
    return entropy(tok) >= 0.75 * math.log2(min(len(core), alphabet))


def _name_means_secret(name: bytes, kw: bytes) -> bool:
    low = _NAME_SEPS.sub(b"", name.lower())  # `key_down_event` is `keydown…` too
    if any(w in low for w in _NOT_SECRET):
        return False
    words = _words(name)
    if not words:
        return False
    if words[-1] in _NOT_VALUE or (len(words) >= 2 and words[-2] + words[-1] in _NOT_VALUE):
        return False
    nouns = [i for i, w in enumerate(words) if _NOUN_RE.search(w)]
    if nouns and any(w in _NOT_VALUE for w in words[nouns[-1] + 1:]):
        return False  # `aws_access_key_id_backfill`, `token_url_v2`: the secret's id/url, not it
    try:
        k = next(i for i, w in enumerate(words) if kw in w)
    except StopIteration:
        k = len(words)
    return not any(w in _NOT_CREDENTIAL for w in words[max(0, k - 2):k + 1])


def _mirrors(name: bytes, tok: bytes) -> bool:
    """True when the value repeats its own name (`#define X_KEY_BAG "XKeyBag"`): a name, not a secret."""
    n = bytes(c for c in name.lower() if c in _ALNUM)
    t = bytes(c for c in tok.lower() if c in _ALNUM)
    return len(t) >= 8 and any(t[i:i + 8] in n for i in range(len(t) - 7))


def _scan_run(data: bytes, i: int, chars: frozenset) -> int:
    """End of the run of `chars` from `i`, read at most one byte past `_MAX_VALUE` (a longer run
    is never a value and never a name, so a megabyte blob costs no more than a token)."""
    n = min(len(data), i + _MAX_VALUE + 1)
    while i < n and data[i] in chars:
        i += 1
    return i


def _value_end(data: bytes, j: int) -> int:
    """End of the value starting at `j`: token characters, with `=` only as trailing padding
    (`a=b` inside a run is an assignment or a query string, not one value)."""
    e = _scan_run(data, j, _TOKCH)
    eq = data.find(b"=", j, e)
    if eq >= 0 and data[eq:e].strip(b"="):
        return eq
    return e


def _namelike(seg: bytes) -> bool:
    """A word of a name (letters, at most two trailing digits), not a value."""
    core = seg.rstrip(b"0123456789")
    return bool(core) and core.isalpha() and len(seg) - len(core) <= 2 and len(seg) <= 32


# What a bare `key` labels when it names a credential (`_key_label`).
_SECTION = re.compile(rb"[ \t]*\[([A-Za-z0-9_. -]{1,64})\][ \t]*\r?$")
_YAML_PARENT = re.compile(rb"([A-Za-z0-9_.-]{1,64}):[ \t]*$")  # `acme:` opening a mapping
_YAML_ENTRY = re.compile(rb"[A-Za-z0-9_.-]{1,64}:(?:[ \t]|$)")  # a sibling `name: v`
# Words before a bare `key` that make it code, not a label: declarations and types, and
# punctuation that joins a word into a call or a name (`cache.fetch key:`, `find_by key:`).
_DECLARATIONS = frozenset(b"const let var val local final static auto readonly string str byte bytes char "
                          b"int long dim def fn func public private protected".split())
_CODE_WORD = re.compile(rb"[._:$@(){}\[\]<>=]")
_HOLDER = frozenset(b"config configuration conf cfg settings options opts credentials creds params auth client "
                    b"clients keys secrets".split())


def _parent_names_secret(data: bytes, ls: int, indent: int) -> bool:
    """For a bare `key` first on the line starting at `ls` (after `indent` blanks): is it the key
    of an INI section (`[acme]` on the line above) whose name is no lookup or public key's
    (`[gpg]`), or of a YAML mapping (`acme:` above it, past its siblings `name: v`) named for a
    vendor of the table or for settings (`acme:`, `acmeConfig:`)? Each line above is read from
    its start, at most 256 bytes of it: the walk costs at most 8 lines whatever their length."""
    prev_end, siblings = ls - 1, 0
    while prev_end > 0 and siblings < 8:
        ps = data.rfind(b"\n", 0, prev_end) + 1
        prev = data[ps:min(prev_end, ps + 256)].rstrip(b"\r")
        if ps == 0 and prev.startswith(b"\xef\xbb\xbf"):
            prev = prev[3:]  # a UTF-8 byte-order mark
        long_line = prev_end - ps > 256
        prev_end = ps - 1
        body = prev.lstrip(b" \t")
        if not body or body.startswith(b"#"):
            continue
        m = None if long_line else _SECTION.match(prev)
        if m is None and indent:
            lead = len(prev) - len(body)
            if lead == indent and _YAML_ENTRY.match(body):
                siblings += 1
                continue
            m = _YAML_PARENT.match(body) if lead < indent and not long_line else None
            # a YAML mapping's `key` is a credential's only under a vendor's or a settings name
            # (`crowdin:`, `stripeConfig:`), not a selector's, ConfigMap's or table's (`data:`)
            if m is None:
                return False
            words = _words(m.group(1))
            return m.group(1).lower().decode() in vendor_aliases() or (bool(words) and words[-1] in _HOLDER)
        return m is not None and not any(w in _NOT_CREDENTIAL for w in _words(m.group(1)))
    return False


@functools.lru_cache(maxsize=1)
def vendor_aliases() -> frozenset[str]:
    """The vendor table's aliases (credentials.vendor_table), lower-case."""
    from repoguard.credentials.vendor_table import default_vendor_table
    return frozenset(a for r in default_vendor_table() for a in r.aliases)


def _key_label(data: bytes, s: int) -> bool:
    """True when the bare `key` starting at `s` names a credential, not a mapping's key: in a log
    line (`[DEBUG] Using Acme Key=v`); as a label in prose (`Acme API Key: v`, `- Acme (key): v`:
    a word and a space before it, not a declaration or a call: `const key =`, `String key =`,
    `cache.fetch key:`, `find_by key:`); as the key of an INI section or a YAML mapping (`[acme]`,
    `acme:` above it); or in an object named for settings or a request's parameters
    (`acmeConfig = { key: 'v' }`, `params={"key": "v"}`). A word before it that names a lookup
    or public key (`cache key:`, `public key:`, `[gpg]`) keeps it a mapping's key."""
    ls = data.rfind(b"\n", max(0, s - 200), s) + 1 if s else 0
    line = data[max(ls, s - 200):s]
    if _LOG_LINE.search(line):
        return True
    head = line.rstrip(b" \t\"'")
    if head.endswith(b"{"):  # an object literal: its name says what it holds
        words = _words(head[:-1].rstrip(b" \t=:("))
        return bool(words) and words[-1] in _HOLDER
    if line.strip(b" \t") == b"":  # first on its line: an INI section's or a YAML mapping's key?
        return _parent_names_secret(data, ls, len(line))
    if line[-1:] not in (b" ", b"\t", b"("):
        return False
    if line.endswith(b"(") and line[-2:-1] not in (b" ", b"\t"):
        return False  # `f(key=…)`: an argument named key
    before = line.rstrip(b" \t(")
    word = before[before.rfind(b" ") + 1:].rsplit(b"\t", 1)[-1].lstrip(b"([\"'`*_")  # the word before
    if not word[-1:].isalnum() or _CODE_WORD.search(word) or word.lower() in _DECLARATIONS:
        return False  # `const key =`, `String key =`, `cache.fetch key:`, `find_by key:`: code
    words = _words(word)
    return bool(words) and words[-1] not in _NOT_CREDENTIAL


def _value_after(data: bytes, ks: int, ke: int) -> tuple[int, int, bytes, bool] | None:
    """(value start, value end, the name before it, weak) for the keyword at data[ks:ke], or None.
    `weak`: the value was joined to its name by a log line's or prose's glue (` - `, ` is `, a
    log line's bare `Key=`), so it must also have a common key shape (`common_key_shape`).
    A bare `key` assigned a value (`key: v`, `"key": "v"`) is a mapping's key (Kubernetes
    selectors, i18n tables, test vectors), not a credential's name: None, unless `_key_label`
    says the place names a credential (a log line, a prose label, an INI section, a settings
    object); then the value is weak."""
    n = len(data)
    s = ks
    while s > 0 and ks - s < 48 and data[s - 1] in _NAMECH:
        s -= 1
    if data[s - 1:s] in (b"/", b"+") or sum(48 <= c <= 57 for c in data[s:ke]) > 4:
        return None  # inside a URL path or a base64 blob, or a generated name, not a secret's name
    i, hops = ke, 0
    name_end = ke
    weak = False
    while True:
        # The rest of a glued name: word segments joined by _ - . (a segment with a digit inside
        # a glued run starts the value: `acme-secret-9f3a...`).
        while True:
            j = _scan_run(data, i, _ALNUM)
            seg = data[i:j]
            if seg and not _namelike(seg):
                if i > ke and data[i - 1] in b"-_.":
                    e = _value_end(data, i)
                    if e - i >= 16 and random_token(data[i:e]):
                        return i, e, data[s:name_end], weak
                return None
            i = name_end = j
            if i + 1 < n and data[i] in b"-_." and data[i + 1] in _ALNUM:
                i += 1
                continue
            break
        j, op, nl = i, False, 0
        tf = _TF_DEFAULT.match(data, i)
        am = None if tf else _ASSIGN_RE.match(data, i)
        if tf:
            j, op = tf.end(), True
        elif am and b"," not in am.group() and am.end() < n and data[am.end()] in _ALNUM:
            j, op, tf = am.end(), True, am
        while j < n and j - i <= 40 and not tf:
            c = data[j]
            if c in _SEP:
                pass
            elif c in _OPS or (c == 44 and data[i:i + 1] in (b"'", b'"')):
                op = True  # `=`, `:`, `=>`; `,` between a quoted name and its value
            elif c == 45 and data[j - 1:j] in (b" ", b"\t") and data[j + 1:j + 2] in (b" ", b"\t", b"-"):
                op = weak = True  # a log line's ` - ` (`acme token - 'v'`)
            elif c == 10 and nl == 0:
                nl = 1
            elif c != 13:
                break
            j += 1
        if j == i or j >= n or data[j] not in _ALNUM:
            return None
        gap = data[i:j]
        if (b")" in gap or b"," in gap) and (not op or b"\n" in gap):
            return None  # `f(x, key)\n'value'`, a list of strings: not an assignment
        if b"(" in gap and not op and not gap.startswith(b"("):
            return None  # `#define X_KEY (BASE + 1)`: a macro or expression, not a call
        if b"(" in data[i:j] and not _NOUN_RE.search(data[s:name_end]):
            return None  # `auth(...)`, `OAuth(...)`: a verb or protocol, not the secret's name
        if op and data[s:name_end].lower() == b"key":
            if not _key_label(data, s):
                return None  # a mapping's bare `key:`
            weak = True
        e = _value_end(data, j)
        if e - j >= 16 and random_token(data[j:e]):
            return j, e, data[s:name_end], weak
        k = _scan_run(data, j, _ALNUM)
        seg = data[j:k]
        if _namelike(seg) and hops < 2:
            low = seg.lower()
            secretish = _KW_RE.search(seg) is not None and not any(w in low for w in _NOT_SECRET)
            if (not op and (secretish or low in _HOP_AFTER_SPACE)) \
                    or (op and low in (b"bearer", b"basic", b"token")):
                i, hops = k, hops + 1
                weak = weak or low in (b"is", b"was")
                if secretish:
                    name_end = k
                continue
            return None
        return j, _value_end(data, j), data[s:name_end], weak


def _glued(data: bytes, b: int) -> bool:
    """Does the value ending at `b` go on past what a token holds? `$%^*` right after it
    (`…Yc0$`; `%` unless URL-encoding, `%2F`), or `?!|` followed by more token characters or a
    closing quote (`…3f?'`, `…9a!x`; not a sentence's or a table's end: `token: v!`, `| v |`),
    or `#` followed by a closing quote."""
    if b >= len(data):
        return False
    c, nxt = data[b], data[b + 1] if b + 1 < len(data) else -1
    if c in _GLUE:
        return not (c == 37 and _PCT.match(data, b))
    if c not in _GLUE_INSIDE:
        return False
    return nxt in _QUOTES or (c != 35 and nxt in _TOKCH)


def _windows(data: bytes, ends: Iterable[int] | None) -> Iterator[tuple[int, int]]:
    """(start, end) ranges that hold every SHAPE match, in increasing order: the whole text when
    `ends` is None (no Hyperscan), else the WINDOW bytes before each SHAPE match end in `ends`
    (none for the ~93 % of source files without one), overlapping ranges merged, so RE2 runs only
    near candidates and once per stretch of them."""
    if ends is None:
        yield 0, len(data)
        return
    lo = hi = -1
    for e in sorted(ends):          # overlapping windows are merged so that a dense file costs
        start = max(0, e - WINDOW)  # one RE2 search per real match
        if start <= hi:
            hi = max(hi, e)
            continue
        if hi >= 0:
            yield lo, hi
        lo, hi = start, e
    if hi >= 0:
        yield lo, hi


def find(data: bytes, path: str, ends: Iterable[int] | None = None) -> Iterator[Hit]:
    """Hits (value span, value) for random-looking values after a secret name in `data`.
    `ends`: end offsets of SHAPE's matches in `data` (the engine's Hyperscan pass reports them),
    or None to search the whole text with RE2; both give the same hits."""
    pos = 0
    for lo, hi in _windows(data, ends):
        lo = max(lo, pos)
        while lo < hi:
            m = _SHAPE_RE.search(data, lo, hi)
            if m is None:
                break
            km = _KW_RE.match(data, m.start())
            ks, ke = km.start(), km.end()
            lo = pos = ke
            if data[max(0, ks - 7):ks].lower() in (b'name="_', b"name='_"):
                continue  # `<input name="_token" value=…>`: a framework's form (CSRF) token (Laravel)
            got = _value_after(data, ks, ke)
            if got is None:
                continue
            a, b, name, weak = got
            after = data[b:b + 64].lstrip(b" \t")[:1]
            if after in (b"(", b"[") or data[b - 3:b] == b"...":
                continue  # a call or subscript (`base64.b64encode(...)`), or an elided sample
            if _glued(data, b):
                continue  # `…Yc0$`, `'…3f?'`: the value goes on past what a token holds
            if data[b:b + 1] == b"=" and data[b:_scan_run(data, b, _TOKCH)].strip(b"="):
                continue  # `…0_L=~lhX0`: `=` inside a run is no padding, so no generated token
            while b > a and data[b - 1] in b".-_~":
                b -= 1
            tok = data[a:b]
            if not random_token(tok) or not _name_means_secret(name, data[ks:ke].lower()) \
                    or _mirrors(name, tok) or (weak and not common_key_shape(tok)):
                continue
            yield Hit(a, b, tok)
            lo = pos = b


DETECTORS = (Detector("generic-keyword-context",
                      "Random-looking value next to a secret word (key, secret, token, password...)",
                      KEYWORDS, find, priority=CONTEXT, prefilter=SHAPE),)
