"""CI/CD credential stores: Jenkins' encrypted-at-rest secrets (`credentials.xml`, `secrets/*.xml`,
job `config.xml`).

Jenkins keeps every credential as `hudson.util.Secret`'s ciphertext, `{AQAAAB…}` in braces: the
base64 of a version byte 0x01, the IV length (4 bytes, big-endian, 16), the data length (4 bytes,
a multiple of 16, the AES-CBC block), then the IV and the data. The controller's
`secrets/master.key` and `secrets/hudson.util.Secret` decrypt it, and they travel with the same
`JENKINS_HOME` backups: an encrypted value next to its key material is still a secret. The layout
check makes the detector exact (a random base64 string passes it with probability ~2⁻⁴⁰). The key
files themselves are path rules (`rules/ci.toml`).
"""
from __future__ import annotations

import base64
import binascii
import re

from repoguard.credentials.structural.base import Detector, Hit

# `{AQAAAB` = base64 of 0x01 00 00 00 1?: version 1, then the IV length's high bytes.
PREFILTER = rb"\{AQAAAB[A-Za-z0-9+/]{16}"
_PREFIX_LEN = 23  # bytes of a PREFILTER match: `{AQAAAB` and 16 more
_VALUE = re.compile(rb"\{(AQAAAB[A-Za-z0-9+/]{40,8000}={0,2})\}")


def hudson_secret(b64: bytes) -> bool:
    """True when `b64` decodes to hudson.util.Secret's layout (version 1, a 16-byte IV, data a
    whole number of AES blocks, lengths adding up)."""
    try:
        raw = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        return False
    if len(raw) < 9 or raw[0] != 1:
        return False
    iv_len = int.from_bytes(raw[1:5], "big")
    data_len = int.from_bytes(raw[5:9], "big")
    return iv_len == 16 and data_len > 0 and data_len % 16 == 0 and len(raw) == 9 + iv_len + data_len


def find(data: bytes, path: str, ends=None):
    """Hits for each `{AQAAAB…}` value (the base64 inside the braces) with a valid
    hudson.util.Secret layout; `ends`: the prefilter's match ends (each 23 bytes after a `{`)."""
    if ends is None:
        starts = [m.start() for m in _VALUE.finditer(data)]
    else:
        starts = sorted({e - _PREFIX_LEN for e in ends if e >= _PREFIX_LEN})
    for s in starts:
        m = _VALUE.match(data, s)
        if m is not None and hudson_secret(m.group(1)):
            yield Hit(*m.span(1), m.group(1))


DETECTORS = (
    Detector(id="jenkins-encrypted-secret",
             description="Jenkins credential encrypted at rest (hudson.util.Secret {AQAAAB…})",
             triggers=(), find=find, prefilter=PREFILTER),
)
