"""Values a person made up, found by generic rules in real code (moto, django-rest-framework):
no generator writes them, so they are not credentials.

- `spells_a_name`: a name, not a value — three or more words and numbers joined by `_`, `-`, `.`
  or `:`, one of them a credential word: a CSV column (`access_key_1_last_used_region`) or a value
  that spells its own name, leetspeak read back (`api_key_s3l3ction`). A generated value of 20 or
  more characters drawn from a 64-letter alphabet has all its parts lower-case words or digit runs
  with probability below (37/64)^20 ≈ 10⁻⁵.
- `counting`: hex typed by counting — the digits step 1, 2, 3, … and the letters a, b, … f, a, …
  (`1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d`, a UUID placeholder). A random hex value takes each step
  by chance 1/10 (digits) or 1/6 (letters).
- `base64_of_made_up`: base64 of text whose secret part (after a `user:`) spells a name
  (`AWS:123456789012-auth-token`, moto's ECR authorisation token).
- `idempotency_token`: a UUID-shaped value named a request token (AWS's ClientRequestToken): it
  makes a retried call safe, it grants nothing.
- `after_for_example`: the value's line follows a line ending "For example:" (a docstring showing a
  header's shape, as django-rest-framework's TokenAuthentication does).

Used by the engine on the generic key/token rules only (vendor formats know their own shapes)."""
from __future__ import annotations

import base64
import binascii
import re

_PARTS = re.compile(rb"[-_.:/ ]+")
_CRED_WORDS = frozenset((b"key", b"keys", b"token", b"tokens", b"secret", b"secrets", b"password", b"passwd",
                         b"pass", b"auth", b"credential", b"credentials", b"apikey", b"api"))
_LEET = bytes.maketrans(b"013457@$", b"oieastas")
_WORD = re.compile(rb"^[a-z]+$")
_DIGITS = re.compile(rb"^[0-9]+$")


def _word(part: bytes) -> bytes | None:
    """`part` as a lower-case word (leetspeak read back: `s3l3ction` → `selection`), or None. A
    leetspeak word has at least 4 letters and digits in at most 30 % of it (`a3f1e0`, hex, is not)."""
    if _WORD.match(part):
        return part
    digits = sum(48 <= c <= 57 for c in part)
    if len(part) - digits >= 4 and digits <= 0.3 * len(part):
        w = part.translate(_LEET)
        if _WORD.match(w):
            return w
    return None


def spells_a_name(value: bytes) -> bool:
    """True when `value` is three or more parts (split at `_-.:/` and spaces), each a lower-case
    word (leetspeak allowed) or a run of digits, and at least one word a credential word (key,
    token, secret, password, auth, api…): a name written where a value would be."""
    parts = [p for p in _PARTS.split(value) if p]
    if len(parts) < 3:
        return False
    words = []
    for p in parts:
        if _DIGITS.match(p):
            continue
        w = _word(p)
        if w is None:
            return False
        words.append(w)
    return any(w in _CRED_WORDS for w in words) and any(len(w) >= 3 for w in words)


_HEXISH = re.compile(rb"^[0-9a-f]+(?:-[0-9a-f]+)*$")


def _steps(seq: bytes, lo: int, n: int) -> float:
    """Fraction of neighbours in `seq` that step +1, cyclically over the `n` symbols from `lo`."""
    ok = sum((b - lo) == (a - lo + 1) % n for a, b in zip(seq, seq[1:]))
    return ok / max(1, len(seq) - 1)


def counting(value: bytes) -> bool:
    """True when `value` is hex (dashes apart) whose digits, read in order, count up (1 2 3 … 9 0 1)
    and so do its letters (a b c d e f a b …), each for at least 4 symbols and 85 % of their steps:
    a UUID or hex placeholder typed by counting (`1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d`)."""
    low = value.lower()
    if not _HEXISH.match(low):
        return False
    digits = bytes(c for c in low if 48 <= c <= 57)
    letters = bytes(c for c in low if 97 <= c <= 102)
    if len(digits) + len(letters) < 12 or len(digits) < 4 or len(letters) < 4:
        return False
    return _steps(digits, 48, 10) >= 0.85 and _steps(letters, 97, 6) >= 0.85


_PRINTABLE = re.compile(rb"^[\x20-\x7e]+$")


def base64_of_made_up(value: bytes) -> bool:
    """True when `value` is base64 of printable text whose secret part (after the first `:`, as in
    `user:password`) spells a name or counts (`spells_a_name`, `counting`)."""
    v = value.strip(b"=")
    if len(v) < 16:
        return False
    try:
        raw = base64.b64decode(v + b"=" * (-len(v) % 4), altchars=b"-_" if b"-" in v or b"_" in v else None,
                               validate=True)
    except (binascii.Error, ValueError):
        return False
    if not _PRINTABLE.match(raw):
        return False
    secret = raw.split(b":", 1)[1] if b":" in raw else raw
    return spells_a_name(secret) or counting(secret)


_UUIDISH = re.compile(rb"^[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){1,3}-[0-9A-Fa-f]{12}$")
_REQUEST_TOKEN = re.compile(rb"(?i)(?:request|idempotency)[_.-]?token|idempotency[_.-]?key")


def idempotency_token(value: bytes, name: bytes) -> bool:
    """True when a UUID-shaped `value` is assigned to a name saying request/idempotency token
    (`client_request_token`, `ClientRequestToken`): a retry's identity, not a credential."""
    return _UUIDISH.match(value) is not None and _REQUEST_TOKEN.search(name) is not None


_REACH = 2048
# "For example:" in prose, not a bare "Example:" heading (a config file's comment may head real values).
_FOR_EXAMPLE = re.compile(rb"(?i)(?:\bfor example|\bfor instance|\be\.g\.)\s*:\s*$")


def after_for_example(data: bytes, start: int) -> bool:
    """True when the line holding byte `start` follows (blank lines apart, at most two) a line
    ending `For example:`/`For instance:`/`e.g.:`: a documented shape, shown to the reader."""
    # Look back at most _REACH bytes: a finding on a 100 MB line costs a bounded search, not the line.
    lo = max(0, start - _REACH)
    ls = data.rfind(b"\n", lo, start)
    for _ in range(3):
        if ls <= lo:
            return False
        prev = data.rfind(b"\n", lo, ls) + 1
        if prev == 0 and lo > 0:
            return False  # the line above is longer than the reach: no prose line
        line = data[prev:ls].strip()
        if line:
            return _FOR_EXAMPLE.search(line) is not None
        ls = prev - 1
    return False
