"""Private keys at any length (up to the file cap): PEM/PKCS#1/PKCS#8/SEC 1/OpenSSH/PGP/PuTTY
armored blocks (RFC 7468), raw, with escaped newlines (JSON strings) or split into concatenated
string literals (`"-----BEGIN RSA PRIVATE KEY-----" +\n"MIIE..." +`), and the same blocks
base64-encoded as one value (`PRIVATE_KEY_B64=LS0tLS1CRUdJTi...`), which the generic blob decoder
cannot reach past its 1,000-character window. Also bare base64 DER of an unencrypted PKCS#8 or
PKCS#1 RSA key (`MIIEvQIBADANBgkqhkiG9w0BAQEFAASC...`). A block must hold ≥ 64 base64 characters
(`...`, `<key>` and other elisions are rejected).
"""
from __future__ import annotations

import base64
import binascii
from typing import Iterator

import re2

from repoguard.credentials.structural.base import Detector, Hit

_BEGIN = re2.compile(rb"-----BEGIN ((?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?)-----")
_PUTTY = re2.compile(rb"PuTTY-User-Key-File-[23]: [a-z0-9-]+\r?\nEncryption: [a-z0-9-]+")
_B64_RUN = re2.compile(rb"[A-Za-z0-9+/]+={0,2}")
# base64 of "-----BEGIN" at the three alignments a block can start at.
_B64_PEM = (b"LS0tLS1CRUdJT", b"0tLS0tQkVHSU4", b"tLS0tLUJFR0lO")
# Bare DER: PKCS#8 rsaEncryption and PKCS#1 RSAPrivateKey (version 0, 1024–8192-bit modulus).
_DER = (b"BADANBgkqhkiG9w0BAQEFAASC", b"IBAAKCAQEA", b"IBAAKCAgEA", b"IBAAKBgQ")
_XML_CR = re2.compile(rb"&#(?:[xX]0*[dD]|0*13);")
_BODY_OK = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")


def _pem_blocks(data: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of armored private-key blocks with a real body."""
    for m in _BEGIN.finditer(data):
        label = m.group(1)
        end_marker = b"-----END " + label + b"-----"
        e = data.find(end_marker, m.end())
        if e < 0:
            continue
        body = data[m.end():e]
        # Header lines (Proc-Type, DEK-Info, Comment, Version) and escaped newlines are allowed;
        # so is a block split into string literals joined by `+`/`&`/`,` (Java, C#, JS, VB), and
        # XML's escaped carriage return (`&#xd;`: Jenkins' XStream writes a key pasted with CRLF
        # line ends so, in the plain-text `<privateKey>` of older ssh-credentials releases).
        lines = _XML_CR.sub(b"\n", body).replace(b"\\r", b"\n").replace(b"\\n", b"\n").split(b"\n")
        lines = [ln.strip().strip(b"\"'+&,; \t") for ln in lines]
        b64 = sum(len(ln) for ln in lines if ln and set(ln) <= _BODY_OK)
        if b64 >= 64 and b"..." not in body and b"<" not in body:
            yield m.start(), e + len(end_marker)


def find_pem(data: bytes, path: str) -> Iterator[Hit]:
    """Each armored private-key block in `data` with a real body (≥ 64 base64 characters, no
    elision), and each PuTTY key file up to its `Private-MAC:` line; the whole block is the hit."""
    for s, e in _pem_blocks(data):
        yield Hit(s, e, data[s:e])
    for m in _PUTTY.finditer(data):
        e = data.find(b"Private-MAC:", m.end())
        if e > 0:
            end = data.find(b"\n", e)
            end = len(data) if end < 0 else end
            yield Hit(m.start(), end, data[m.start():end])


def _run_around(data: bytes, i: int) -> tuple[int, int]:
    """The base64 run (letters, digits, + / =, and escaped or real line breaks) holding offset i."""
    ok = _BODY_OK | set(b"\r\n\\")
    s = i
    while s > 0 and data[s - 1] in ok and data[s - 1] != 0x3D:
        s -= 1
    e = i
    while e < len(data) and data[e] in ok:
        e += 1
    while s < i and data[s] in b"\r\n\\":
        s += 1
    while e > i and data[e - 1] in b"\r\n\\":
        e -= 1
    return s, e


def _decode(blob: bytes) -> bytes | None:
    b = blob.replace(b"\\n", b"").replace(b"\\r", b"").translate(None, b"\r\n\\")
    try:
        return base64.b64decode(b + b"=" * (-len(b) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def find_encoded(data: bytes, path: str) -> Iterator[Hit]:
    """Each base64 run in `data` (≥ 128 characters) that decodes to an armored private-key block, or
    to a bare DER RSA key (a SEQUENCE of ≥ 300 bytes); the whole run is the hit, each run once."""
    done = -1
    for marker in _B64_PEM + _DER:
        pos = data.find(marker)
        while pos >= 0:
            if pos >= done:
                s, e = _run_around(data, pos)
                raw = _decode(data[s:e])
                if raw is not None and e - s >= 128:
                    if marker in _DER:
                        ok = raw[:1] == b"\x30" and len(raw) >= 300  # a DER SEQUENCE, ≥ 1024-bit
                    else:
                        ok = any(True for _ in _pem_blocks(raw))
                    if ok:
                        done = max(done, e)
                        yield Hit(s, e, data[s:e])
            pos = data.find(marker, pos + 1)


DETECTORS = (
    Detector("private-key-block", "Armored private key (PEM/PKCS#8/OpenSSH/PGP/PuTTY) of any length",
             (b"private key-----", b"private key block-----", b"putty-user-key-file"), find_pem),
    Detector("private-key-base64", "Base64-encoded private key (PEM block or bare DER) of any length",
             tuple(m.lower() for m in _B64_PEM + _DER), find_encoded),
)
