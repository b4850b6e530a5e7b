"""Kubernetes `Secret` manifests (YAML): every value under `data:` is base64 (decoded here and
reported when it decodes to a real value), every value under `stringData:` is plain text.
Public material (`ca.crt`, `tls.crt`, `*.pub`) and non-secret keys (`username`, `host`, `port`)
are skipped; so are placeholders. Documents are split at `---`; only those with `kind: Secret`.
"""
from __future__ import annotations

import base64
import binascii
from typing import Iterator

import re2

from repoguard.credentials.structural.base import Detector, Hit
from repoguard.credentials.structural.placeholders import is_placeholder

_KIND = re2.compile(rb"(?mi)^[ \t]*kind:[ \t]*[\"']?Secret[\"']?[ \t]*(?:#.*)?$")
_BLOCK = re2.compile(rb"(?m)^([ \t]*)(data|stringData):[ \t]*\r?$")
_ITEM = re2.compile(rb"^([ \t]+)([\"']?[A-Za-z0-9_.\-]+[\"']?):[ \t]*([^\r\n]*)$")
# `type` and `provider` are the Service Binding spec's well-known entries (servicebinding.io, "Well-known
# Secret Entries"): they name the backing service, not a credential.
_PUBLIC = (b"ca.crt", b"tls.crt", b".pub", b"username", b"user", b"host", b"port", b"database",
           b"namespace", b"server", b"url", b"email", b".crt", b"config", b"region", b"type", b"provider")


def _values(data: bytes, lo: int, hi: int) -> Iterator[tuple[bytes, int, int, bool]]:
    """(key, value start, value end, is_base64) for the data/stringData items in data[lo:hi]."""
    for b in _BLOCK.finditer(data, lo, hi):
        indent, kind = len(b.group(1)), b.group(2)
        pos = b.end() + 1
        while pos < hi:
            nl = data.find(b"\n", pos, hi)
            end = hi if nl < 0 else nl
            line = data[pos:end]
            if line.strip() and not line.lstrip().startswith(b"#"):
                m = _ITEM.match(line)
                if m is None or len(m.group(1).expandtabs()) <= indent:
                    break
                v = m.group(3).rstrip(b" \t\r")
                if v.startswith((b"\"", b"'")) and len(v) >= 2 and v[-1:] == v[:1]:
                    s = pos + m.start(3) + 1
                    yield m.group(2).strip(b"\"'"), s, s + len(v) - 2, kind == b"data"
                elif v and v[:1] not in b"|>&*{[":
                    s = pos + m.start(3)
                    yield m.group(2), s, s + len(v), kind == b"data"
            pos = end + 1


def find(data: bytes, path: str) -> Iterator[Hit]:
    """The values under `data:` (valid base64 whose decoding has at most 1 control byte in 20) and
    `stringData:` of each `kind: Secret` document in `data`, but public entries (certificates, user
    names, hosts…), template variables and placeholders."""
    starts = [0] + [m.end() for m in re2.finditer(rb"(?m)^---[ \t]*\r?$", data)] + [len(data)]
    for lo, hi in zip(starts, starts[1:]):
        if not _KIND.search(data[lo:hi]):
            continue
        for key, s, e, is_b64 in _values(data, lo, hi):
            k = key.lower()
            if any(k == p or k.endswith(p) for p in _PUBLIC):
                continue
            val = data[s:e]
            plain = val
            if is_b64:
                try:
                    plain = base64.b64decode(val + b"=" * (-len(val) % 4), validate=True)
                except (binascii.Error, ValueError):
                    continue
                if not plain or sum(c < 32 and c not in (9, 10, 13) for c in plain) > len(plain) // 20:
                    continue
            if val.startswith((b"$", b"{{")) or is_placeholder(plain, min_len=4):
                continue
            yield Hit(s, e, val)


DETECTORS = (Detector("kubernetes-secret-manifest", "Value of a Kubernetes Secret manifest (data/stringData)",
                      (b"kind: secret", b"kind: \"secret\"", b"kind:secret"), find),)
