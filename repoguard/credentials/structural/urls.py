"""Credentials in URLs: `scheme://user:password@host` for any scheme (databases, brokers, HTTP,
FTP, SSH, LDAP, caches, ...), as RFC 3986 §3.2.1 `userinfo` (deprecated there for the password
part precisely because it leaks). The secret is the password; placeholders, template variables,
`user == password` sample pairs (`guest:guest`), passwords with spaces and short lower-case words
(`github://org:repo@sha`, documentation forms) and hosts reserved for documentation (`example.com`,
`*.test`, RFC 2606) are rejected.
"""
from __future__ import annotations

from typing import Iterator
from urllib.parse import unquote_to_bytes

import re2

from repoguard.credentials.structural.base import Detector, Hit
from repoguard.credentials.structural.placeholders import is_placeholder, is_reserved_host

# scheme (RFC 3986 §3.1, plus `_`: SQLAlchemy's `oracle+cx_oracle`), userinfo without '?', '#',
# whitespace or quotes (the user may be empty: `redis://:password@host`; SMB's may follow a
# Windows domain and `;`: `smb://CORP;svc:password@server/share`), then a host. RFC 3986 wants '/' and '@' percent-encoded in a password, but
# generated passwords hold them raw (base64's '/', a '@' typed in): the password runs to the last
# '@' before the host, and may hold '/' unless what precedes the first '/' is a port (`host:8080/`).
_URL = re2.compile(
    rb"\b([A-Za-z][A-Za-z0-9_+.-]{1,30})://((?:[A-Za-z0-9_.-]{1,64};)?[^\s:@/?#\"'<>`\\,;(){}\[\]]{0,128})"
    rb":([^\s@/?#\"'<>`\\][^\s?#\"'<>`\\]{0,255}?)@([A-Za-z0-9_\-\[][A-Za-z0-9_.:\-\[\]]{0,254})"
    rb"(?:[/?#\"'<>`\\,;)\s]|$)")
# A password spelled as a variable name of a credential (`aws_secret`, `uri_secret`, `db_pass`:
# lower-case words joined by `_`, no digit, one of them a credential word) names the value it
# stands for; scrapy's docs and tests write `s3://aws_key:aws_secret@bucket`.
_NAME_WORDS = {b"secret", b"password", b"passwd", b"pass", b"pwd", b"pw", b"key", b"token"}


def _names_a_credential(raw: bytes) -> bool:
    parts = raw.split(b"_")
    return len(parts) > 1 and all(x.isalpha() and x.islower() for x in parts) and bool(_NAME_WORDS & set(parts))


def find(data: bytes, path: str) -> Iterator[Hit]:
    """Hits for each URL carrying a real-looking password: (offset of the password, its end, it)."""
    for m in _URL.finditer(data):
        user, pw = m.group(2), m.group(3)
        a = m.start(3)
        if b"/" in pw and (pw.split(b"/", 1)[0].isdigit() or b"//" in pw or b"@" in pw.split(b"/", 1)[1]):
            continue  # `host:8080/path@x`: a port and a path, not a password; `@` after a `/` is a path's
        if b"," in pw:  # a multi-host authority (libpq, MongoDB): `h1:123,user:pw@h2`; the last segment's userinfo
            head, _, seg = pw.rpartition(b",")
            if b":" not in seg:
                continue
            user, pw = seg.split(b":", 1)
            a += len(head) + 1 + len(user) + 1
        if b"$" in pw[:2] or b"{" in pw or b"%(" in pw:
            continue
        raw = unquote_to_bytes(pw)
        if is_placeholder(raw, min_len=3) or raw.lower() == unquote_to_bytes(user).lower() or _names_a_credential(raw):
            continue
        if not user and (len(raw) < 8 or raw.startswith(b":")):
            continue  # `http://::@c@d:2` (WHATWG's URL tests): no user, a scrap of punctuation
        if any(c in b" \t" for c in raw) or (raw.isalpha() and raw.islower() and len(raw) < 8):
            continue  # "a secret", "org:repo": documentation, not a password
        if m.group(4).startswith(b"[") and not m.group(4).rstrip(b".").endswith(b"]"):
            continue
        if is_reserved_host(m.group(4)):
            continue
        yield Hit(a, m.end(3), pw)


DETECTORS = (Detector("url-credentials", "Password in a URL's userinfo (scheme://user:password@host)",
                      (b"://",), find),)
