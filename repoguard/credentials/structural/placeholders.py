"""Placeholder values that are not credentials: template variables, masked values, sample words.

Used by every structural detector on the candidate value (password, token, decoded auth).
Ciphertexts that tools keep in plain files on purpose (SOPS `ENC[AES256_GCM,…]`, Ansible Vault
`$ANSIBLE_VAULT;…`, Vault transit `vault:v1:…`) are not credentials either: the key is elsewhere.
"""
from __future__ import annotations

import math
import re

import re2

_WORDS = {
    b"password", b"passwd", b"pass", b"pwd", b"secret", b"changeme", b"change_me", b"changeit",
    b"example", b"sample", b"test", b"testing", b"token", b"apikey", b"api_key", b"mypassword",
    b"yourpassword", b"your_password", b"mysecret", b"dummy", b"fake", b"placeholder", b"redacted",
    b"none", b"null", b"nil", b"undefined", b"empty", b"foo", b"bar", b"foobar", b"baz", b"xxx",
    b"user", b"username", b"login", b"pw", b"p", b"pa55word", b"p@ssw0rd", b"s3cr3t", b"qwerty",
    b"letmein", b"12345", b"123456", b"1234", b"secret123", b"password123", b"hunter2",
    b"mysecretpassword", b"supersecret", b"yoursecret", b"db_password", b"access_token", b"mypass",
    b"yourpass",
}
_MARKERS = (b"xxxx", b"****", b"....", b"####", b"your_", b"your-", b"<your", b"-here", b"_here",
            b"changeme", b"placeholder", b"example", b"redacted", b"dummy", b"insert", b"replace",
            b"abcdef", b"123456789", b"password", b"secret_", b"fake", b"sample", b"todo")
_CONSTANT = re.compile(rb"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")  # API_SECRET, DB_PASSWORD: a name, not a value
_CIPHERTEXT = (b"ENC[", b"$ANSIBLE_VAULT;", b"vault:v1:", b"vault:v2:")
_TEMPLATE = re.compile(rb"^(?:\$\{?[A-Za-z_]|\$\(|%\(|%[sd]$|\{\{|\{[A-Za-z_0-9]*\}|<[^>]*>$|\[[A-Za-z_ ]+\]$"
                       rb"|@[A-Za-z_]+@$|__[A-Z_]+__$|#\{|ENV\[|process\.env|os\.environ|getenv)")


# Names reserved for documentation and tests (RFC 2606, RFC 6761): no credential for them is real.
_RESERVED_HOST = re.compile(rb"(?i)^(?:[0-9a-z_-]+\.)*(?:example\.(?:com|net|org)|[0-9a-z_-]+\.(?:example|test|invalid))\.?(?::[0-9]*)?$")


def is_reserved_host(host: bytes) -> bool:
    """True when `host` (optionally `:port`) is `example.com`/`.net`/`.org`, or under `.example`,
    `.test` or `.invalid` (RFC 2606 §2–3, RFC 6761 §6): a credential for it cannot be real."""
    return _RESERVED_HOST.match(host.strip(b"[]").rstrip(b".:")) is not None


def keyboard_walk_regex() -> str:
    """The regex of a keyboard walk (`asdfqwer1234asdf`, `qwerty123`, `poiuytrewq`): runs of 4 or
    more neighbouring keys of one row (1234567890, qwertyuiop, asdfghjkl, zxcvbnm), either way,
    a separator between runs allowed, up to 4 digits or symbols after. rules/generic.toml's
    sample-password allowlist holds this very regex (a test keeps the two equal)."""
    runs = set()
    for row in ("1234567890", "qwertyuiop", "asdfghjkl", "zxcvbnm"):
        for r in (row, row[::-1]):
            runs.update(r[i:j] for i in range(len(r)) for j in range(i + 4, len(r) + 1))
    alts = "|".join(sorted(runs, key=lambda x: (-len(x), x)))
    return "(?i)^(?:(?:" + alts + ")[^0-9A-Za-z]?)+[0-9!@#$%^&*._-]{0,4}$"


# RE2: the runs overlap (`qwer|tyui` = `qwert|yui…`), so a backtracking engine would try every
# way of cutting a long non-walk before failing (exponential in its length).
_KEYBOARD_WALK = re2.compile(keyboard_walk_regex().encode())


def keyboard_walk(value: bytes) -> bool:
    """Is `value` a keyboard walk (`keyboard_walk_regex`)? A hand-typed sample, never generated."""
    return _KEYBOARD_WALK.match(value) is not None


_HOME_ROW = frozenset(b"asdfghjkl")
_P_HOME = 9 / 26  # a uniform letter's chance to sit on the home row
_LOG_P, _LOG_Q = math.log(_P_HOME), math.log(1 - _P_HOME)


def home_row_mash(value: bytes) -> bool:
    """Is `value` mashed on the keyboard's home row (`sdf0o9823sjdfsdf`, `asdfoiw37850234lkjsdfsdf`)?
    A generated value's letters are uniform, 9 of 26 on the home row (asdfghjkl); True when ≥ 8
    letters sit there so often that the binomial tail P(X ≥ k | n, 9/26) is below 10⁻³. Hex
    (letters a–f only, half of them on the home row) is left alone."""
    letters = [c for c in value.lower() if 97 <= c <= 122]
    n = len(letters)
    if n < 8 or all(c <= 102 for c in letters):
        return False
    k = sum(c in _HOME_ROW for c in letters)
    if k <= n * _P_HOME:
        return False  # at or below the mean: the tail is over a half
    # terms in log space (a 2 048-character value's binomial coefficients overflow a float); past
    # the mean they shrink, so the sum stops once they no longer count
    lg, tail = math.lgamma(n + 1), 0.0
    for i in range(k, n + 1):
        term = math.exp(lg - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * _LOG_P + (n - i) * _LOG_Q)
        tail += term
        if tail >= 1e-3:
            return False
        if term < 1e-12:
            break
    return True


def is_placeholder(value: bytes, *, min_len: int = 4) -> bool:
    """True when `value` is empty/short, a template (`${X}`, `{{ x }}`, `%(x)s`, `<x>`, `$X`),
    masked (`****`, `xxxx`), one repeated character, a sample word (`password`, `changeme`) or
    a SOPS / Ansible Vault / Vault transit ciphertext. Surrounding quotes and whitespace
    (a decoded `bar\\n` included) are ignored."""
    v = value.strip(b"\"' \t\r\n")
    if v.startswith(_CIPHERTEXT):
        return True
    if len(v) < min_len:
        return True
    low = v.lower()
    if low in _WORDS or _TEMPLATE.search(v) or _CONSTANT.match(v):
        return True
    if len(set(low)) <= 2:
        return True
    return any(m in low for m in _MARKERS)
