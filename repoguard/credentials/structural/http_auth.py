"""HTTP authentication in code and commands: `Authorization: Basic|Bearer|Token <value>` headers
(RFC 7617 Basic, RFC 6750 Bearer) in strings, dicts and `curl -H`, and `curl -u user:password`.

A Basic value must decode (base64) to `user:password` with a real password; a Bearer/Token value
must be ≥ 16 token characters, not a placeholder nor a phrase of lower-case words
(`unauthorized_token`, `some-token-from-header`), with Shannon entropy ≥ 3 bits per character.
"""
from __future__ import annotations

import base64
import binascii
from typing import Iterator

import re2

from repoguard.credentials.entropy import shannon_entropy as entropy
from repoguard.credentials.structural.base import Detector, Hit
from repoguard.credentials.structural.placeholders import is_placeholder

_HEADER = re2.compile(
    rb"(?i)authorization[\"']?\s*(?::|=>|=|,)\s*[\"']?\s*(basic|bearer|token)\s+"
    rb"([A-Za-z0-9._~+/-]{8,}={0,2})")
_PHRASE = re2.compile(rb"^[a-z]+(?:[-_.][a-z]+)+$")  # words a person typed: no generated token
_CURL_U = re2.compile(
    rb"\bcurl\b[^\n]{0,300}?\s(?:-u|--user)(?:\s+|=)[\"']?([^\s:\"'$]{1,64}):([^\s\"']{1,128})")



def basic_password(value: bytes) -> bool:
    """True when base64 `value` decodes to `user:password` with a real password."""
    try:
        raw = base64.b64decode(value + b"=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    user, sep, pw = raw.partition(b":")
    if not sep or not all(32 <= c < 127 for c in raw):
        return False
    return not is_placeholder(pw, min_len=3) and pw.lower() != user.lower()


def find(data: bytes, path: str) -> Iterator[Hit]:
    """Basic and Bearer/Token values of Authorization headers in `data`, checked as the module doc
    says, and the password of `curl -u user:password` (not a variable, placeholder or the user name)."""
    for m in _HEADER.finditer(data):
        kind, val = m.group(1).lower(), m.group(2)
        a, b = m.span(2)
        if kind == b"basic":
            if basic_password(val):
                yield Hit(a, b, val)
        elif len(val) >= 16 and not is_placeholder(val) and not _PHRASE.match(val) \
                and entropy(val) >= 3.0:
            yield Hit(a, b, val)
    if b"curl" in data:
        for m in _CURL_U.finditer(data):
            pw = m.group(2)
            if pw.startswith((b"$", b"%", b"<", b"{")) or is_placeholder(pw, min_len=3) \
                    or pw.lower() == m.group(1).lower():
                continue
            yield Hit(*m.span(2), pw)


DETECTORS = (Detector("http-authorization", "HTTP Authorization header or curl -u credentials",
                      (b"authorization", b"curl"), find),)
