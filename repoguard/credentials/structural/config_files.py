"""Credential files of package managers and tools, by their documented formats:

- `.netrc` (GNU inetutils: `machine H login U password P`, tokens in any order, also inlined in
  a Dockerfile/CI `echo "machine ... password ..." > ~/.netrc`);
- `.npmrc` (`_authToken=`, `_auth=` base64 of user:password, `_password=` base64 of the password);
- `.pypirc` / `pip.conf` / `.pip/pip.ini` (`password = ` in a `[pypi]`-style section; URLs with a
  password are the url detector's);
- Docker `config.json` (`"auths": {host: {"auth": base64(user:password)}}`, `identitytoken`).
"""
from __future__ import annotations

import base64
import binascii
from typing import Iterator

import re2

from repoguard.credentials.structural.base import Detector, Hit
from repoguard.credentials.structural.placeholders import is_placeholder, is_reserved_host

# The password ends at whitespace, a quote or a backslash (`"...password P\\n"` written from code).
_NETRC = re2.compile(rb"\bmachine\s+([^\s\"']+)(?:\s+(?:login|account)\s+[^\s\"']+){0,2}\s+password\s+([^\s\"'\\]+)")
_NPMRC = re2.compile(rb"(?m)(?:^|[\s:/\"'])(_authToken|_auth|_password)[ \t]*=[ \t]*[\"']?([A-Za-z0-9+/=._~-]{8,})(?:[\s\"']|$)")
_INI_PW = re2.compile(rb"(?mi)^[ \t]*password[ \t]*[=:][ \t]*([^\s#;]+)")
_DOCKER = re2.compile(rb"\"(auth|identitytoken|registrytoken)\"\s*:\s*\"([^\"]{8,1000})\"")


def _b64(value: bytes) -> bytes | None:
    try:
        return base64.b64decode(value + b"=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def _userpass_ok(raw: bytes | None) -> bool:
    if raw is None or not all(32 <= c < 127 for c in raw):
        return False
    user, sep, pw = raw.partition(b":")
    return bool(sep) and not is_placeholder(pw, min_len=3) and pw.lower() != user.lower()


def netrc(data: bytes, path: str) -> Iterator[Hit]:
    """Passwords of `machine H … password P` entries in `data`, but template variables ($…, %…),
    placeholders and reserved hosts (`is_reserved_host`: example.com, .test, …)."""
    for m in _NETRC.finditer(data):
        pw = m.group(2)
        if not (pw.startswith((b"$", b"%")) or is_placeholder(pw, min_len=3) or is_reserved_host(m.group(1))):
            yield Hit(*m.span(2), pw)


def npmrc(data: bytes, path: str) -> Iterator[Hit]:
    """`_authToken`, `_auth` (base64 of user:password, a real password) and `_password` (base64 of
    the password) values in `data`, but template variables and placeholders."""
    for m in _NPMRC.finditer(data):
        key, val = m.group(1), m.group(2)
        if val.startswith((b"$", b"%")) or is_placeholder(val):
            continue
        if key == b"_auth" and not _userpass_ok(_b64(val)):
            continue
        if key == b"_password":
            pw = _b64(val)
            if pw is None or is_placeholder(pw, min_len=3):
                continue
        yield Hit(*m.span(2), val)


def pypirc(data: bytes, path: str) -> Iterator[Hit]:
    """`password =` values of a .pypirc/pip.conf/pip.ini (by `path`'s name or by a `[distutils]`,
    `index-servers`, `[pypi]` or `[testpypi]` line in the first 64 KiB), but template variables and
    placeholders."""
    name = path.rsplit("/", 1)[-1].lower()
    low = data[:65536].lower()
    if not (name in (".pypirc", "pip.conf", "pip.ini", ".pypirc.template")
            or b"[distutils]" in low or b"index-servers" in low or b"[pypi]" in low or b"[testpypi]" in low):
        return
    for m in _INI_PW.finditer(data):
        pw = m.group(1)
        if not (pw.startswith((b"$", b"%", b"{")) or is_placeholder(pw, min_len=3)):
            yield Hit(*m.span(1), pw)


def docker_config(data: bytes, path: str) -> Iterator[Hit]:
    """The `auth` (base64 of user:password, a real password), `identitytoken` and `registrytoken`
    (≥ 16 characters, not a placeholder) values of a Docker config.json in `data`."""
    if b"\"auths\"" not in data and b"identitytoken" not in data.lower():
        return
    for m in _DOCKER.finditer(data):
        key, val = m.group(1), m.group(2)
        if key == b"auth":
            if not _userpass_ok(_b64(val)):
                continue
        elif is_placeholder(val) or len(val) < 16:
            continue
        yield Hit(*m.span(2), val)


DETECTORS = (
    Detector("netrc-password", ".netrc machine entry with a password", (b"machine",), netrc),
    Detector("npmrc-credential", ".npmrc _authToken/_auth/_password", (b"_auth", b"_password"), npmrc),
    Detector("pypirc-password", ".pypirc/pip.conf index password",
             (b"[distutils]", b"index-servers", b"[pypi]", b"[testpypi]"), pypirc),
    Detector("docker-config-credential", "Docker config.json registry auth",
             (b"\"auths\"", b"identitytoken"), docker_config),
)
