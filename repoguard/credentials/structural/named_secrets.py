"""Literal passwords and signing secrets recognised by the name or sentence around them:

- documentation prose that states a password: `the (default) password (for user 'u') is 'P'`;
- code that compares a password with a literal: `password == "P"`, `creds.Secret != 'P'`;
- JWT signing secrets: `jwt_secret = "S"`, `JWT_SECRET_KEY: S`, YAML `jwt:` → `secret: S`;
- .NET `appSettings`: `<add key="SmtpPassword" value="P" />` (a key ending in password, secret,
  api key, access key or token; URLs and paths are not secrets);
- client-side build variables, which are compiled into the public bundle:
  `REACT_APP_*PASSWORD=P` (also `VITE_`, `NEXT_PUBLIC_`, `VUE_APP_`), and Android Gradle
  `buildConfigField "String", "API_KEY", "\"K\""` (compiled into the APK);
- Gradle repository credentials: `credentials { username "u"; password "P" }` (Groovy and Kotlin DSL).

Values must be literals: placeholders, template variables and sample words are rejected
(`placeholders.is_placeholder`), and prose values that are status words ("required",
"incorrect") or contain spaces are not passwords.
"""
from __future__ import annotations

from typing import Callable, Iterator

import re2

from repoguard.credentials.structural.base import Detector, Hit, first_group
from repoguard.credentials.structural.placeholders import is_placeholder

_Q = rb"(?:\"([^\"\n]{%d,128})\"|'([^'\n]{%d,128})')"
_VALUE = rb"(?:\"([^\"\n]{4,200})\"|'([^'\n]{4,200})'|\x60([^\x60\n]{4,200})\x60|([^\s\"'\x60#,;]{4,200}))"

_PROSE = re2.compile(rb"(?i)\bpassword(?:[ \t]+for[ \t]+(?:the[ \t]+)?user[ \t]+(?:\"[^\"\n]{1,64}\"|'[^'\n]{1,64}'))?"
                     rb"[ \t]+is[ \t]+" + _Q % (3, 3))
_COMPARE_WORDS = (b"password", b"passwd", b"passphrase", b"pwd", b"secret")
_COMPARE = re2.compile(rb"(?i)\b(?:password|passwd|passphrase|pwd|secret)[ \t]?(?:===?|!==?)[ \t]*" + _Q % (4, 4))
_JWT = re2.compile(rb"(?i)\bjwt[_.-]?(?:signing[_.-]?)?(?:secret|key)(?:[_.-]?key)?[\"']?[ \t]*(?:=>|:=|=|:)[ \t]*" + _VALUE)
_JWT_YAML = re2.compile(rb"(?im)^[ \t]*jwt:[ \t]*\r?\n(?:[ \t]+[0-9A-Za-z_-]+:[^\n]*\n){0,6}?[ \t]+secret:[ \t]*" + _VALUE)
_APPSETTING = re2.compile(rb"(?i)<add[ \t]+key[ \t]*=[ \t]*\"[^\"\n]{0,64}(?:password|passwd|pwd|secret|secretkey|apikey|api_key"
                          rb"|accesskey|access_key|token)[0-9]?\"[ \t]+value[ \t]*=[ \t]*\"([^\"\n]{4,256})\"")
_CLIENT_ENV = re2.compile(rb"\b(?:REACT_APP|VITE|NEXT_PUBLIC|VUE_APP)_[A-Z0-9_]{0,40}(?:PASSWORD|PASSWD|PASS|PWD|SECRET)"
                          rb"[ \t]*=[ \t]*" + _VALUE)
_BUILDCONFIG = re2.compile(rb"\bbuildConfigField[ \t]*\(?[ \t]*[\"']String[\"'][ \t]*,[ \t]*[\"'][A-Za-z0-9_]{0,40}"
                          rb"(?:KEY|TOKEN|SECRET|PASSWORD|PASS)[A-Za-z0-9_]{0,40}[\"'][ \t]*,[ \t]*"
                          rb"(?:'\\?\"([^\"'\\\n]{8,200})\\?\"'|\"\\\"([^\"\\\n]{8,200})\\\"\")")
_GRADLE = re2.compile(rb"\bcredentials[ \t]*(?:\([A-Za-z]*Credentials(?:::class)?\))?[ \t]*\{[^{}]{0,400}?\bpassword"
                      rb"[ \t]*(?:=[ \t]*)?(?:\"([^\"\n]{4,128})\"|'([^'\n]{4,128})')")

_STATUS = {b"required", b"invalid", b"incorrect", b"wrong", b"missing", b"expired", b"weak", b"strong",
           b"correct", b"valid", b"blank", b"optional", b"mandatory", b"hidden", b"visible", b"changed",
           b"locked", b"unknown", b"unset", b"set", b"true", b"false", b"same", b"different", b"ignored"}


def _literal(value: bytes) -> bool:
    v = value.strip()
    if v.startswith((b"$", b"%", b"{", b"#{", b"@")) or b"process.env" in v or b"os.environ" in v:
        return False
    return not is_placeholder(v, min_len=4)


_EXPRESSION = re2.compile(rb"^[A-Za-z_$][0-9A-Za-z_$]*(?:\.[A-Za-z_]|\(|\[)|^[a-z_][a-z0-9]*_[a-z0-9_]*$")


def _matches(rx, data: bytes, ok: Callable[[bytes], bool] = _literal) -> Iterator[Hit]:
    """Hits of `rx`'s first matching group accepted by `ok`. An unquoted value (the 4th group of
    `_VALUE`) that reads as code (`user.jwt_key`, `get_secret()`, `jwt_secret_value`) is skipped."""
    for m in rx.finditer(data):
        g = first_group(m)
        if not g or (g == 4 and rx.groups >= 4 and _EXPRESSION.search(m.group(g))):
            continue
        if ok(m.group(g)):
            yield Hit(*m.span(g), m.group(g))


def _prose_ok(value: bytes) -> bool:
    return (b" " not in value and value.lower().rstrip(b".!") not in _STATUS
            and not is_placeholder(value, min_len=3) and not value.startswith((b"$", b"%", b"{", b"<")))


def prose(data: bytes, path: str) -> Iterator[Hit]:
    """Hits for "the (default) password (for user 'u') is 'P'" in any text; the secret is P."""
    yield from _matches(_PROSE, data, _prose_ok)


def compare(data: bytes, path: str) -> Iterator[Hit]:
    """Hits for `password == "P"` / `secret != 'P'` (one-word literal P)."""
    yield from _matches(_COMPARE, data, lambda v: b" " not in v and v.lower() not in _STATUS and _literal(v))


def _setting_ok(value: bytes) -> bool:
    return b"://" not in value and not value.startswith((b"/", b"~/", b"./")) and _literal(value)


_FILE_EXT = (b".pem", b".key", b".crt", b".json", b".pub", b".txt", b".der", b".p12", b".jwk", b".jwks")


def _jwt_ok(value: bytes) -> bool:
    """A literal signing secret: not a code call, URL, file path or PEM armor (a private key in
    PEM form is the private-key detector's)."""
    v = value.strip()
    if v.endswith((b"(", b")")) or b"://" in v or v.startswith((b"/", b"./", b"../", b"~/", b"-----")):
        return False
    return not v.lower().endswith(_FILE_EXT) and _literal(v)


def jwt_secret(data: bytes, path: str) -> Iterator[Hit]:
    """Hits for literal JWT signing secrets (`jwt_secret = S`, YAML `jwt:` → `secret: S`)."""
    seen = set()
    for rx in (_JWT, _JWT_YAML):
        for h in _matches(rx, data, _jwt_ok):
            if h.start not in seen:
                seen.add(h.start)
                yield h


def appsetting(data: bytes, path: str) -> Iterator[Hit]:
    """Hits for .NET `<add key="…Password" value="P" />` entries."""
    yield from _matches(_APPSETTING, data, _setting_ok)


def client_env(data: bytes, path: str) -> Iterator[Hit]:
    """Hits for `REACT_APP_…PASSWORD=P` (and VITE_, NEXT_PUBLIC_, VUE_APP_) build variables."""
    yield from _matches(_CLIENT_ENV, data)


def build_config(data: bytes, path: str) -> Iterator[Hit]:
    """Hits for Android `buildConfigField "String", "…KEY", "\"K\""` literals."""
    yield from _matches(_BUILDCONFIG, data)


def gradle(data: bytes, path: str) -> Iterator[Hit]:
    """Hits for `password "P"` / `password = "P"` inside a Gradle `credentials { }` block."""
    yield from _matches(_GRADLE, data)


DETECTORS = (
    Detector("password-in-prose", "Password stated in documentation ('the password is ...')",
             (b"password is", b"password for"), prose),
    Detector("password-comparison", "Password or secret compared with a literal in code",
             tuple(w + sp + op for w in _COMPARE_WORDS for sp in (b"", b" ") for op in (b"==", b"!=")), compare),
    Detector("jwt-signing-secret", "Literal JWT signing secret", (b"jwt",), jwt_secret),
    Detector("dotnet-appsetting-secret", ".NET appSettings entry holding a password, secret or token",
             (b"<add",), appsetting),
    Detector("client-bundle-env-password", "Password in a client-side build variable (REACT_APP_, VITE_, ...)",
             (b"react_app_", b"vite_", b"next_public_", b"vue_app_"), client_env),
    Detector("android-buildconfig-secret", "Key, token or password compiled into an Android BuildConfig field",
             (b"buildconfigfield",), build_config),
    Detector("gradle-repository-password", "Literal password in a Gradle repository `credentials { }` block",
             (b"credentials {", b"credentials{", b"credentials("), gradle),
)
