"""Keyword-anchored vendor values: a value of a vendor's documented shape within `DIST` bytes of
the vendor's name, whatever stands between them (`=`, `:`, ` - `, ` is `, quotes, a log prefix
such as `[DEBUG] Using Mailgun Key=`, a comment naming the vendor above a call).

The table is data (`rules/vendor_keywords.toml`, credentials.vendor_table). All aliases form one
caseless alternation, the detector's prefilter, compiled into the engine's single Hyperscan
database; `find` reads only the windows around the alias ends it reports: `DIST` bytes before the
alias and after it, widened to whole tokens. In a window, each row of that alias looks for a value
of its exact shape (prefix, alphabet, length, bounded by characters outside the alphabet) that
looks generated (`tokens.random_token`, entropy, no placeholder). A hit is reported under
the row's own rule (`<id>-keyword`, tag `keyword-anchored`, medium severity: credentials.triage).

The veto: a random-looking token in the window that no row of a documented-shape alias accepts
is returned as a veto span: the engine keeps `generic-api-key` / `generic-keyword-context` /
`generic-hex-secret` / `generic-client-key` findings on it at low confidence (a Mailgun-named
value of the wrong length is no key of Mailgun's: not reported by default, still redacted from
training text). A token with a common key shape (`tokens.common_key_shape`: maybe a format the
table lacks) is vetoed the same way (SHAPE_REJECTED). A token with a row's
prefix and length written in another alphabet (over a quarter of it outside the row's) is not
vetoed at all: the docs state a length, the alphabet is often read off one example (a few
characters outside it are a value edited by hand, which stays vetoed). Where a row says
`veto = "length"` (the vendor states the length in words, the alphabet was assumed), a token of a
row's length is not vetoed whatever its alphabet, and one of another length is, as above;
next to a name-only vendor, a token without a common key shape is vetoed for those two. A
vendor's short tag before a key (`scp-live-`, `k_`: `_TAG`) is read apart: a tag and a tail of a
common key shape is that name-only vendor's key.
"""
from __future__ import annotations

import math
import re

import re2

from repoguard.credentials.entropy import shannon_entropy
from repoguard.credentials.priority import STRUCTURAL
from repoguard.credentials.rule_types import Rule
from repoguard.credentials.structural.base import Detector, Hit
from repoguard.credentials.structural.tokens import common_key_shape, random_token
from repoguard.credentials.structural.placeholders import is_placeholder
from repoguard.credentials.vendor_table import VendorRow, default_vendor_table

DIST = 40  # bytes between the vendor's name and its value (either side)
TAGS = ("keyword-anchored",)
CONTEXT_ONLY = "generic-keyword-context"  # a veto Hit's rule: veto the weak-evidence detectors only
SHAPE_REJECTED = "vendor-shape-rejected"  # a veto Hit's rule: every generic rule (engine.SHAPE_REJECTED)
NAME_ONLY = "name-only"  # a generic row's tag: a value another vendor's prefix owns is left to that vendor
_TOKCH = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_.~-")
_ALPHA = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_LOWER = frozenset(b"abcdefghijklmnopqrstuvwxyz")
_LOWER_DIGIT = _LOWER | frozenset(b"0123456789")
_ALNUM = _ALPHA | frozenset(b"0123456789")
_DIGITS = frozenset(b"0123456789")
_DIGIT_BYTES = b"0123456789"
# A generic row's value, and a veto candidate: a token of 16–128 characters (base64 padding last).
_TOKEN = re.compile(rb"(?<![A-Za-z0-9+/_.~-])([A-Za-z0-9][A-Za-z0-9+/_~.-]{14,126}[A-Za-z0-9]={0,2})"
                    rb"(?![A-Za-z0-9+/=_.~-])")
_HEX40 = re.compile(rb"[0-9a-f]{40}")  # a git object id
_WORD_HEAD = re.compile(rb"[A-Za-z]{2,12}[-_]")  # `key-`, `secret_`: a word glued before a value
_PASSWORD = re.compile(rb"(?i)pass|pwd")
# A digest, not a credential: `--hash=sha256:…`, `"integrity": "sha512-…"`, `commit abc…`.
_DIGEST_BEFORE = re.compile(rb"(?i)(?:sha[0-9]*|md5|hash|digest|integrity|checksum|etag|commit|rev(?:ision)?)"
                            rb"[\"' \t:=-]{0,4}$")


def _shape(row: VendorRow) -> re.Pattern:
    """The row's value regex: prefix + class{lo,hi}, bounded by neither class nor alphanumeric
    characters (a hex key is not cut out of a longer alphanumeric word); a base64 value may end in
    `=` padding and may follow an `=` (`Key=<value>`), but no `=` may follow it."""
    bound = "0-9A-Za-z" + (row.cls if row.cls not in ("0-9A-Za-z",) else "")
    after = bound
    if row.alphabet == "uuid":
        body = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    elif row.alphabet == "base64":
        body = f"[{row.cls}]{{{row.lo},{row.hi}}}={{0,2}}"
        after += "="
    else:
        body = f"[{row.cls}]{{{row.lo},{row.hi}}}"
    return re.compile(f"(?<![{bound}])({re.escape(row.prefix)}{body})(?![{after}])".encode())


def _looks_random(value: bytes, row: VendorRow) -> bool:
    core = value[len(row.prefix):]
    if is_placeholder(core):
        return False
    if row.alphabet == "digits":
        return len(set(core)) >= 6 and core not in b"01234567890123456789"
    if row.alphabet == "uuid":
        hexes = core.replace(b"-", b"")
        return len(set(hexes)) >= 8 and shannon_entropy(hexes) >= 3.0
    if not any(c in _DIGITS for c in core) and len(core) < 40:
        return False
    if len(core) >= 16:
        return random_token(core)
    s = set(core)
    size = 16 if s <= set(b"0123456789abcdefABCDEF") else 36 if core in (core.lower(), core.upper()) else 62
    return any(c in _ALPHA for c in core) and shannon_entropy(core) >= 0.7 * math.log2(min(len(core), size))


# The name right before a value says it is an identifier, not a secret (`--org=<uuid>`, `project_id:`).
_ID_BEFORE = re.compile(rb"(?i)(?:^|[^a-z])(?:org(?:ani[sz]ation)?|project|user|account|team|workspace|tenant|"
                        rb"request|trace|session|[a-z]*[_.-]?(?:id|uuid|guid))[\"']?[ \t]{0,4}[=:,(][ \t]{0,4}[\"']?$")
# A REST path names the collection before a member's id (`…/apps/<uuid>/github/push`): an id, not a key.
_COLLECTION_BEFORE = re.compile(rb"(?i)/(?:apps|projects|users|accounts|orgs|organi[sz]ations|teams|workspaces|"
                                rb"tenants|sessions|pipelines|spaces|sites|services|environments|resources)/$")
# A package lock's resolved URL carries the file's digest as its fragment (`…/pkg-1.2.4.tgz#<sha1>`).
_ARCHIVE_HASH = re.compile(rb"(?i)\.(?:tgz|tar\.gz|tar\.bz2|tar\.xz|zip|whl|jar|gem|nupkg|crate)#$")


def _identifier(data: bytes, s: int) -> bool:
    before = data[max(0, s - 40):s]
    return bool(_ID_BEFORE.search(before) or _COLLECTION_BEFORE.search(before))


def _archive_digest(data: bytes, s: int) -> bool:
    """Is the value at `s` the `#` fragment of an archive's URL (a lock file's digest of it)?"""
    return _ARCHIVE_HASH.search(data[max(0, s - 12):s]) is not None


# A link in markup: a badge or image (`.. image::`, `![…](`, `<img src=`, `…/badge/…`, `.svg`).
_LINK = re.compile(rb"(?i)image::|!\[|<img\b|src=|/badges?/|\.svg\b|shields\.io")


def _link_path(data: bytes, s: int) -> bool:
    """Is the value at `s` a segment of a badge or image link's path
    (`.. image:: https://app.acme.io/project/badge/Grade/<id>`)? A project id in a link, not a key.
    Other URL paths are read as usual: some vendors put the key there (`…infura.io/v3/<key>`)."""
    if data[s - 1:s] != b"/":
        return False
    ls = data.rfind(b"\n", max(0, s - 300), s) + 1
    le = data.find(b"\n", s, s + 300)
    line = data[max(ls, s - 300):le if le >= 0 else s + 300]
    return b"://" in line and _LINK.search(line) is not None


# A vendor's tag before a key (`scp-live-`, `k_`, `tkn.v1_`, `sk_test_`): a short lower-case word
# and at most two short parts, each ended by `-`, `_` or `.`. Vendors mark their keys so (GitHub,
# Stripe and Slack publish theirs), and the tag is what a table without the vendor's format lacks.
_TAG = re.compile(rb"[a-z]{1,5}(?:[-_.][a-z0-9]{1,5}){0,2}[-_.]")


def _generic_value(value: bytes) -> bool:
    """A name-only row's value test on the value alone: a common key shape (after a vendor's tag,
    `_TAG`, if any), no git object id, random."""
    if common_key_shape(value):
        return not _HEX40.fullmatch(value) and random_token(value.rstrip(b"="))
    tag = _TAG.match(value)
    if tag is None:
        return False
    tail = value[tag.end():]
    return common_key_shape(tail) and not _HEX40.fullmatch(tail) and random_token(tail.rstrip(b"="))


def _tagged_key(tok: bytes) -> bool:
    """A common key shape, bare or after a vendor's tag (`_TAG`)."""
    if common_key_shape(tok):
        return True
    tag = _TAG.match(tok)
    return tag is not None and common_key_shape(tok[tag.end():])


def _generic_ok(data: bytes, s: int, value: bytes, memo: dict | None = None) -> bool:
    ok = _memo(memo, "*", value, lambda: _generic_value(value)) if memo is not None else _generic_value(value)
    if not ok or data[s - 1:s] in (b"/", b"#", b"@", b"?", b"&", b"%"):
        return False  # a path segment, fragment, URL parameter or an e-mail's domain part
    return not (_DIGEST_BEFORE.search(data[max(0, s - 16):s]) or _identifier(data, s))


def _other_alphabet(table: "_Table", rows: list[VendorRow], tok: bytes) -> bool:
    """Does `tok` have the prefix and length of one of the documented-shape `rows`, with over a
    quarter of its characters outside that row's alphabet? Then it is written in another alphabet
    (the docs' may be too narrow), not a value of the row's alphabet edited by hand (a few
    characters typed over, the way sample and mangled keys look)."""
    for r in rows:
        if r.generic or not tok.startswith(r.prefix.encode()) or not r.lo <= len(tok) - len(r.prefix) <= r.hi:
            continue
        core = tok[len(r.prefix):]
        outside = len(table.alphabet_re(r).sub(b"", core))
        if outside > len(core) // 4:
            return True
    return False


def _row_length(rows: list[VendorRow], tok: bytes) -> bool:
    """Does `tok` have the prefix and the length of one of `rows`, whatever its alphabet?"""
    return any(tok.startswith(r.prefix.encode()) and (r.lo <= len(t) - len(r.prefix) <= r.hi)
               for r in rows for t in {tok, tok.rstrip(b"=")})


class _Table:
    """The compiled table: rows by alias, one shape regex per distinct shape."""

    def __init__(self, rows: tuple[VendorRow, ...]) -> None:
        self.rows = rows
        self.by_alias: dict[bytes, list[VendorRow]] = {}
        for r in rows:
            for a in r.aliases:
                self.by_alias.setdefault(a.encode(), []).append(r)
        self.by_tail: dict[bytes, list[bytes]] = {}  # last 3 bytes → aliases, longest first
        for a in sorted(self.by_alias, key=len, reverse=True):
            self.by_tail.setdefault(a[-3:], []).append(a)
        self._shapes: dict[tuple, re.Pattern] = {}  # compiled on first use: most rows never see a window
        self._alphabets: dict[str, re.Pattern] = {}
        # aliases with a row whose value may lack a digit (40 characters or more)
        self.long = {a: any(not r.generic and r.hi >= 40 for r in rs) for a, rs in self.by_alias.items()}
        # how a token the rows of an alias reject is vetoed: "shape" (every row's shape is
        # exclusive), "length" (some row's alphabet is assumed: another length only), "" (name-only)
        self.vetoing = {a: "shape" if all(not r.generic and r.veto is True for r in rs) else
                        "length" if all(not r.generic and r.veto in (True, "length") for r in rs) else ""
                        for a, rs in self.by_alias.items()}
        alts = b"|".join(re.escape(a.decode()).encode() for a in sorted(self.by_alias, key=len, reverse=True))
        self.prefilter = b"(?:" + alts + b")" if alts else b""
        self._re2 = None  # the RE2 backend's alias search, compiled on first use
        self.by_rule_id = {r.rule_id: r for r in rows}
        self._rules: dict[str, Rule] = {}

    def rule_for(self, rule_id: str) -> Rule | None:
        """The finding rule of a row (`<id>-keyword`), built on its first hit."""
        rule = self._rules.get(rule_id)
        if rule is None and rule_id in self.by_rule_id:
            r = self.by_rule_id[rule_id]
            rule = self._rules[rule_id] = Rule(
                id=r.rule_id, description=f"{r.vendor} (keyword-anchored)", regex=None,
                tags=TAGS + (NAME_ONLY,) * r.generic, priority=STRUCTURAL,
                source=f"rules/vendor_keywords.toml ({r.source})" if r.source else "rules/vendor_keywords.toml")
        return rule

    def shape(self, row: VendorRow) -> re.Pattern:
        key = (row.prefix, row.cls, row.lo, row.hi, row.alphabet)
        rx = self._shapes.get(key)
        if rx is None:
            rx = self._shapes[key] = _shape(row)
        return rx

    def alphabet_re(self, row: VendorRow) -> re.Pattern:
        """A regex of one character of the row's alphabet (`sub` removes them: what is left is outside)."""
        rx = self._alphabets.get(row.cls)
        if rx is None:
            rx = self._alphabets[row.cls] = re.compile(f"[{row.cls}]".encode())
        return rx

    def alias_re2(self):
        if self._re2 is None:
            self._re2 = re2.compile(b"(?i)" + self.prefilter)
        return self._re2

    def alias_at(self, data: bytes, e: int) -> bytes | None:
        """The longest alias ending at `e` that starts a word and is not a longer word's start."""
        for a in self.by_tail.get(data[max(0, e - 3):e].lower(), ()):
            n = len(a)
            s = e - n
            if s >= 0 and data[s:e].lower() == a:
                if s > 0 and (data[s - 1] in _ALNUM or data[s - 1] == 64):
                    continue  # inside a word or a base64 run; after `@`: an e-mail address's domain
                if e < len(data) and data[e] in (_LOWER_DIGIT if n < 6 else _LOWER):
                    continue  # `boxes`, `mux` of `muxer`: an alias must end the word (or camelCase)
                return a
        return None


def _windows(table: _Table, data: bytes, ends) -> list[tuple[bytes, int, int, list[tuple[int, int]]]]:
    """(alias, window start, window end, the alias's spans in it): `DIST` bytes either side of
    each occurrence (at most one line break away, widened to whole tokens); overlapping windows of
    one alias are merged, so a text repeating a vendor's name is read once, in linear time."""
    n = len(data)
    open_: dict[bytes, list] = {}
    out = []
    for e in sorted(set(ends)):
        alias = table.alias_at(data, e)
        if alias is None:
            continue
        s = e - len(alias)
        lo, hi = max(0, s - DIST), min(n, e + DIST)
        # at most one line break between the name and its value (a section header, a comment above)
        nl = data.find(b"\n", e, hi)
        if nl >= 0:
            nl2 = data.find(b"\n", nl + 1, hi)
            hi = hi if nl2 < 0 else nl2
        nl = data.rfind(b"\n", lo, s)
        if nl >= 0:
            nl2 = data.rfind(b"\n", lo, nl)
            lo = lo if nl2 < 0 else nl2 + 1
        while lo > 0 and data[lo - 1] in _TOKCH:
            lo -= 1
        while hi < n and data[hi] in _TOKCH:
            hi += 1
        w = open_.get(alias)
        if w is not None and lo <= w[2]:
            w[2] = max(w[2], hi)
            w[3].append((s, e))
            continue
        w = open_[alias] = [alias, lo, hi, [(s, e)]]
        out.append(w)
    return [tuple(w) for w in out]


def _memo(memo: dict, key: str, value: bytes, test) -> bool:
    k = (key, value)
    r = memo.get(k)
    if r is None:
        r = memo[k] = test()
    return r


def _find(table: _Table, data: bytes, path: str, ends=None):
    if ends is None:
        if not table.prefilter:
            return []
        ends = [m.end() for m in table.alias_re2().finditer(data)]
    out: dict[tuple, Hit] = {}
    memo: dict[tuple[str, bytes], bool] = {}  # a value repeated in one text is judged once
    for alias, lo, hi, spans in _windows(table, data, ends):
        win = data[lo:hi]
        if not table.long[alias] and win.translate(None, _DIGIT_BYTES) == win:
            continue  # no digit: nothing a row of this alias accepts or vetoes (`_looks_random`)
        names = bytearray(hi - lo)  # 1 where the alias stands: no value may overlap it
        for s, e in spans:
            names[s - lo:e - lo] = b"\x01" * (e - s)
        taken = bytearray(hi - lo)  # 1 where a row accepted a value
        tokens = None
        for row in table.by_alias[alias]:
            if row.generic:
                if tokens is None:
                    tokens = list(_TOKEN.finditer(win))
                found = ((m.start(1), m.end(1), m.group(1)) for m in tokens)
                ok = lambda a, v: _generic_ok(data, a, v, memo)  # noqa: E731
            else:
                found = ((m.start(1), m.end(1), m.group(1)) for m in table.shape(row).finditer(win))
                ok = (lambda row: lambda a, v: _memo(memo, row.id, v, lambda: _looks_random(v, row)) and not (
                    row.alphabet == "uuid" and _identifier(data, a)))(row)
            for a, b, v in found:
                if names.find(1, a, b) >= 0:
                    continue  # the alias itself, or a word holding it
                if _link_path(data, lo + a) or _archive_digest(data, lo + a):
                    taken[a:b] = b"\x01" * (b - a)  # an id in a badge link, a file's digest: no finding, no veto
                    continue
                if ok(lo + a, v):
                    out.setdefault((lo + a, lo + b), Hit(lo + a, lo + b, v, row.rule_id))
                    taken[a:b] = b"\x01" * (b - a)
        mode = table.vetoing[alias]
        for m in tokens if tokens is not None else _TOKEN.finditer(win):
            a, b = m.start(1), m.end(1)
            if names.find(1, a, b) >= 0 or taken.find(1, a, b) >= 0:
                continue
            a, b = lo + a, lo + b
            if _PASSWORD.search(data[max(0, a - 24):a]):
                continue  # a password next to the vendor's name is still a password
            tok = m.group(1)
            if mode == "length" and _row_length(table.by_alias[alias], tok):
                continue  # a stated length, an assumed alphabet: another alphabet may be the vendor's
            if not mode:  # a name-only vendor: its value has a common key shape, or it is no key
                if not _tagged_key(tok) and random_token(tok.rstrip(b"=")):
                    out.setdefault((a, b, "veto"), Hit(a, b, tok, CONTEXT_ONLY, True))
                continue
            if _other_alphabet(table, table.by_alias[alias], tok):
                continue  # a row's length in another alphabet: perhaps the alphabet stated too narrowly
            if _generic_ok(data, a, tok, memo):
                # A common key shape that no documented shape of this vendor accepts: perhaps a
                # format the table lacks, so every generic finding on it is kept at low confidence
                # (redacted from training, not reported by default) rather than dropped.
                out.setdefault((a, b, "veto"), Hit(a, b, tok, SHAPE_REJECTED, True))
                continue
            if _memo(memo, "", tok, lambda: random_token(tok.rstrip(b"="))):
                out.setdefault((a, b, "veto"), Hit(a, b, tok, "", True))
                continue
            # `key-<random>`, `secret_<random>`: a word glued before a random tail (the generic rules
            # read the tail); the tail that fits no row is no key of this vendor's either.
            pm = _WORD_HEAD.match(tok)
            if pm is not None:
                tail = tok[pm.end():]
                if _memo(memo, "", tail, lambda: random_token(tail.rstrip(b"="))):
                    out.setdefault((a + pm.end(), b, "veto"), Hit(a + pm.end(), b, tail, "", True))
    return list(out.values())


_TABLE = _Table(default_vendor_table())


def find(data: bytes, path: str, ends=None):
    """Keyword-anchored vendor hits (and veto spans) in `data`, near the alias ends `ends`."""
    return _find(_TABLE, data, path, ends)


DETECTORS = (
    Detector(id="vendor-keyword", description="Vendor credential found by the vendor's name nearby",
             triggers=(), find=find, tags=TAGS, prefilter=_TABLE.prefilter, rule_for=_TABLE.rule_for),
) if _TABLE.prefilter else ()
