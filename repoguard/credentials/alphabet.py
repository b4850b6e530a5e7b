"""Does a value read as one token alphabet? Generated keys are an encoding of random bytes: hex,
base62, standard base64 (`+`, `/`, `=` padding) or URL-safe base64 (`-`, `_`; RFC 4648 §4–5),
sometimes with `.`/`_`/`-` between parts. A value that mixes the two base64 alphabets, or carries
`~` (in no RFC 4648 alphabet), is hand-typed or mangled — unless it has the one documented shape
that uses `~`: an Azure AD (Entra ID) client secret (3 characters, a digit, `Q~`, then 31–34).
A value that is hex but for a few letters scattered inside it (`3d06416cha4b65ea…`) is a hex
value edited by hand: generated hex has no such letters, and a generated base62/base64 value is
hex in only about a third of its characters (so ≥ 80 % hex happens by chance with probability
below 10⁻³ at 20 characters, binomial tail). A value that starts with a snake_case name and `=`
(`signature_method=SIGNATURE_HMAC_SHA256`, read after `Client('client_key', `) is a keyword
argument: base64 holds `=` only as trailing padding.
Used by the engine on generic findings only: a vendor rule's own alphabet is its own business."""
from __future__ import annotations

import re

_STD = re.compile(rb"[+/]")
_URL = re.compile(rb"[_-]")
_AZURE_CLIENT_SECRET = re.compile(rb"^[A-Za-z0-9_~.-]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}$")
_RUN = re.compile(rb"[0-9A-Za-z]{20,}")  # an unbroken alphanumeric run (parts joined by _-. are read apart)
_NOT_HEX = re.compile(rb"[g-zG-Z]")
_KWARG = re.compile(rb"^[a-z][a-z0-9]*(?:_[a-z0-9]+)+=[^=]")


def mixed_alphabet(secret: bytes) -> bool:
    """True when `secret` (bytes) mixes standard and URL-safe base64 characters, or holds `~`
    outside an Azure client secret's shape, is hex edited by hand (`edited_hex`) or starts with a
    keyword argument (`name_x=`): no generated token looks like that."""
    if _KWARG.match(secret):
        return True
    if b"~" in secret and not _AZURE_CLIENT_SECRET.match(secret):
        return True
    return (_STD.search(secret) is not None and _URL.search(secret) is not None) or edited_hex(secret)


def edited_hex(secret: bytes) -> bool:
    """True when an alphanumeric run of `secret` (20 characters or more) is hex but for a few
    letters g–z (at most a fifth of it), some of them past its first and before its last four
    characters: a hex value typed over, not a generated key. A vendor tag at either end of a hex
    value (`dapi0f3a…`, `…9c2eus12`) keeps its letters at the ends and is left alone."""
    for m in _RUN.finditer(secret):
        run = m.group()
        bad = [k.start() for k in _NOT_HEX.finditer(run)]
        if bad and len(bad) <= len(run) // 5 and any(4 <= k < len(run) - 4 for k in bad):
            return True
    return False
