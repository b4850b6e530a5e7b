"""Does a value look generated? `random_token` is the test every generic detector applies to a
candidate value (keyword_context, vendor_keywords, client_calls): 16–2048 token characters
(`[A-Za-z0-9+/_=~.-]`) with a letter and a digit; Shannon entropy (bits per character,
H = −Σ p log₂ p [Shannon 1948]) at least 0.75·log₂ min(length, alphabet) where the alphabet is 16
(hex), 36 (one-case alphanumeric) or 64 (mixed case, base64); not a placeholder
(`placeholders.is_placeholder`), a hand-typed sequence (`abcd1234`, `a1b2c3`, the RFC 4122 example
UUID), a keyboard walk or home-row mash (`placeholders.keyboard_walk`, `home_row_mash`), hex
edited by hand (`alphabet.edited_hex`), a repetition, an identifier made of words
(`AccessTokenProvider2`, `SECRET_KEY_2024`), a number, a dotted name or version, a file/URL path,
base64 of text, or a published example value.
`common_key_shape` is the stricter test where the evidence around a value is weak: one of the
lengths generated keys come in, in one alphabet. `name_words` and `namelike` read names.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import math
import re

from repoguard.credentials.alphabet import edited_hex
from repoguard.credentials.entropy import shannon_entropy as entropy
from repoguard.credentials.structural.placeholders import home_row_mash, is_placeholder, keyboard_walk

ALNUM = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")  # token letters and digits
_HEX = frozenset(b"0123456789abcdefABCDEF-")
_VERSION = re.compile(rb"v?[0-9]+\.[0-9]+(?:[.-]|$)")  # 1.2.3-cp310-...: a version or file name
# 1.7976931348623157e+308: a float (written so that no two parts can take the same digits)
_NUMBER = re.compile(rb"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_FILE_EXT = re.compile(rb"\.[A-Za-z][A-Za-z0-9]{0,4}$")  # scripts/backfill_s3.py
_MODULE = re.compile(rb"[a-z]{2,8}[0-9]{1,3}[a-z]{0,8}$")  # win32api, utf8, py3k: module names
_CAMEL_WORD = re.compile(rb"[A-Z][a-z]{2,}")
_SYLLABLE = re.compile(rb"[aeiouAEIOU]")
_CLUSTER = re.compile(rb"[^aeiouyAEIOUY]{4}")  # 4 consonants in a row (`Async`: y a vowel): no English word
_WORD_SPLIT = re.compile(rb"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_REPEAT5 = re.compile(rb"(.)\1{4}")
_CONSONANTS5 = re.compile(rb"[^aeiouy]{5}")
NAME_SEPS = re.compile(rb"[_.-]+")
_B64_TEXT = re.compile(rb"[A-Za-z0-9+/]+={0,2}")

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


def name_words(name: bytes) -> list[bytes]:
    """The words of a name, lower-cased, split at case changes, digits and punctuation
    (`acmeAPIKey_2` → acme, api, key, 2)."""
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
    (`asdfqwer1234asdf`), home-row mashes (`sdf0o9823sjdfsdf`) and repetitions."""
    core = bytes(c for c in tok if c in ALNUM)
    if len(core) < 8 or home_row_mash(core):
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
    segs = [p for p in NAME_SEPS.split(tok) if p]
    if len(segs) >= 2 and sum(len(p) for p in segs if namelike(p)) > 0.6 * sum(map(len, segs)):
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
    return len(parts) >= 3 and sum(namelike(p) or _identifier_like(p) for p in parts) > len(parts) / 2


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
    return b" " in raw or _identifier_like(bytes(c for c in raw if c in ALNUM))


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
    if not any(48 <= c <= 57 for c in tok) or not any(c in ALNUM and c > 64 for c in tok):
        return False
    if _VERSION.match(tok) or _NUMBER.fullmatch(tok) or _path_or_dotted(tok) or is_placeholder(tok) \
            or _hand_typed(tok) or _identifier_like(tok) or edited_hex(tok):
        return False
    if _decodes_to_text(tok) or hashlib.sha256(tok).hexdigest() in _WELL_KNOWN:
        return False
    core = bytes(c for c in tok if c in ALNUM)
    if all(c in _HEX for c in core):
        alphabet = 16
    elif core == core.lower() or core == core.upper():
        alphabet = 36
    else:
        alphabet = 64
    return entropy(tok) >= 0.75 * math.log2(min(len(core), alphabet))


def namelike(seg: bytes) -> bool:
    """A word of a name (letters, at most two trailing digits), not a value."""
    core = seg.rstrip(b"0123456789")
    return bool(core) and core.isalpha() and len(seg) - len(core) <= 2 and len(seg) <= 32
