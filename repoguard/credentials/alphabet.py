"""Does a value read as one token alphabet? Generated keys are an encoding of random bytes: hex,
base62, standard base64 (`+`, `/`, `=` padding) or URL-safe base64 (`-`, `_`; RFC 4648 §4–5),
sometimes with `.`/`_`/`-` between parts. A value that mixes the two base64 alphabets, or carries
`~` (in no RFC 4648 alphabet), is hand-typed or mangled — unless it has the one documented shape
that uses `~`: an Azure AD (Entra ID) client secret (3 characters, a digit, `Q~`, then 31–34).
Used by the engine on generic findings only: a vendor rule's own alphabet is its own business."""
from __future__ import annotations

import re

_STD = re.compile(rb"[+/]")
_URL = re.compile(rb"[_-]")
_AZURE_CLIENT_SECRET = re.compile(rb"^[A-Za-z0-9_~.-]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}$")


def mixed_alphabet(secret: bytes) -> bool:
    """True when `secret` (bytes) mixes standard and URL-safe base64 characters, or holds `~`
    outside an Azure client secret's shape: no generated token looks like that."""
    if b"~" in secret and not _AZURE_CLIENT_SECRET.match(secret):
        return True
    return _STD.search(secret) is not None and _URL.search(secret) is not None
