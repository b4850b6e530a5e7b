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

The value is a run of token characters (`[A-Za-z0-9+/_=~.-]`) that must look generated
(`tokens.random_token`: entropy, a letter and a digit, no placeholder, sequence, identifier, path
or version). A value glued to a character no token holds (`…Yc0$`, `'…f3?'`, `…9a!x`: see
`_glued`), or to an `=` that more token characters follow (`…0_L=~lh…`), is part of a longer
string, not a generated key.

The name must mean a secret: names ending in a non-secret word (`token_url`, `auth0_client_id`,
`key_path`, `secret_name`, `token_type`, `oauth_signature`), public keys (`public_key`,
`publishable_key`), lookup/pagination keys (`cache_key`, `sort_key`, `page_token`, `csrf_token`)
and words that merely contain a keyword (`keyboard`, `monkey`, `author`, `tokenizer`,
`accessor`) are skipped.

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

import functools
import re
from typing import Iterable, Iterator

import re2

from repoguard.credentials.assign import ASSIGN, WS_MAX
from repoguard.credentials.priority import CONTEXT
from repoguard.credentials.rule_types import max_width
from repoguard.credentials.structural.base import Detector, Hit
from repoguard.credentials.structural.tokens import (ALNUM, NAME_SEPS, common_key_shape, name_words, namelike,
                                                     random_token)

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

_NAMECH = ALNUM | frozenset(b"_.-")
_TOKCH = ALNUM | frozenset(b"+/_=~.-")
_SEP = frozenset(b" \t\"'`()[]\\")
_GLUE = frozenset(b"$%^*")  # never right after a generated token (`%` unless URL-encoding)
_GLUE_INSIDE = frozenset(b"?!|#")  # sentence or table punctuation, glue only inside a value
_QUOTES = frozenset(b"\"'`")
_PCT = re.compile(rb"%[0-9A-Fa-f]{2}")
_OPS = frozenset(b"=:>")  # `=`, `:`, `=>`, and `>` closing an XML tag (`<apiKey>v</apiKey>`)

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
    b"sid pid uid ref rev revision commit tag branch key_id keyid lifetime limit max min "
    b"signature sig nonce timestamp".split())  # a request's signature and nonce go on the wire
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
_MAX_VALUE = 2048  # `random_token` rejects longer values: no scan needs to read past one
# Words between a secret's name and its value: `api key <v>`, prose `your token is <v>`.
_HOP_AFTER_SPACE = frozenset((b"code", b"api", b"value", b"bearer", b"basic", b"is", b"was"))

def _name_means_secret(name: bytes, kw: bytes) -> bool:
    low = NAME_SEPS.sub(b"", name.lower())  # `key_down_event` is `keydown…` too
    if any(w in low for w in _NOT_SECRET):
        return False
    words = name_words(name)
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
    n = bytes(c for c in name.lower() if c in ALNUM)
    t = bytes(c for c in tok.lower() if c in ALNUM)
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
            words = name_words(m.group(1))
            return m.group(1).lower().decode() in vendor_aliases() or (bool(words) and words[-1] in _HOLDER)
        return m is not None and not any(w in _NOT_CREDENTIAL for w in name_words(m.group(1)))
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
        words = name_words(head[:-1].rstrip(b" \t=:("))
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
    words = name_words(word)
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
            j = _scan_run(data, i, ALNUM)
            seg = data[i:j]
            if seg and not namelike(seg):
                if i > ke and data[i - 1] in b"-_.":
                    e = _value_end(data, i)
                    if e - i >= 16 and random_token(data[i:e]):
                        return i, e, data[s:name_end], weak
                return None
            i = name_end = j
            if i + 1 < n and data[i] in b"-_." and data[i + 1] in ALNUM:
                i += 1
                continue
            break
        j, op, nl = i, False, 0
        tf = _TF_DEFAULT.match(data, i)
        am = None if tf else _ASSIGN_RE.match(data, i)
        if tf:
            j, op = tf.end(), True
        elif am and b"," not in am.group() and am.end() < n and data[am.end()] in ALNUM:
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
        if j == i or j >= n or data[j] not in ALNUM:
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
        k = _scan_run(data, j, ALNUM)
        seg = data[j:k]
        if namelike(seg) and hops < 2:
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
