"""JDBC URLs and ODBC / ADO.NET connection strings with a password:
`jdbc:<sub>://host;...;password=P` (SQL Server), `jdbc:<sub>://host/db?user=U&password=P`
(MySQL/PostgreSQL), `jdbc:oracle:thin:U/P@host` (Oracle), libpq's `host=h dbname=d password=P`, and `Server=...;Uid=U;Pwd=P;` /
`Data Source=...;Password=P;` (ODBC, ADO.NET, OLE DB), also when split into concatenated string
literals (`"...;User ID=u; " & "Password=P;..."`). Placeholders and template variables are rejected.
"""
from __future__ import annotations

from typing import Iterator

import re2

from repoguard.credentials.structural.base import Detector, Hit
from repoguard.credentials.structural.placeholders import is_placeholder

_JDBC = re2.compile(rb"(?i)jdbc:[a-z0-9]+:[^\s\"'`<>]{0,300}?[;?&:](?:password|pwd)=([^;&\s\"'`<>]{1,128})")
_ORACLE = re2.compile(rb"(?i)jdbc:oracle:(?:thin|oci8?):([A-Za-z0-9_$#]{1,64})/([^@\s\"'`/]{1,128})@")
# libpq's keyword/value conninfo (PostgreSQL docs §34.1.1): `host=h port=5432 dbname=d password=P`,
# pairs separated by spaces; the password after at least one connection keyword.
_LIBPQ = re2.compile(rb"\b(?:host|hostaddr|dbname|user|port)=[^\s\"'=]{1,64}(?:[ \t]+[a-z_]{2,30}=[^\s\"'=]{1,64}){0,8}?"
                     rb"[ \t]+password=([^\s\"'`]{1,128})")
# A connection string may be split into concatenated literals: `"...;User ID=u; " & "Password=p;..."`.
_ODBC = re2.compile(
    rb"(?i)(?:driver|server|data source|datasource|dsn|host|addr|address|initial catalog|database|provider)"
    rb"[ \t]*=(?:[^\n\"'`]|[\"'][ \t]*[&+][ \t]*[\"']){0,300}?;[ \t]*(?:[\"'][ \t]*[&+][ \t]*[\"'])?"
    rb"(?:pwd|password)[ \t]*=[ \t]*([^;\s\"'`]{1,128}|\{[^}\n]{1,128}\})")


def _ok(pw: bytes) -> bool:
    return not (pw.startswith((b"$", b"%", b"{{", b"<", b"#{")) or is_placeholder(pw.strip(b"{}"), min_len=3))


def find(data: bytes, path: str) -> Iterator[Hit]:
    """The passwords of JDBC URLs, Oracle thin URLs, ODBC/ADO.NET connection strings and libpq
    conninfo strings in `data` (module doc), each span once, but template variables and placeholders."""
    seen = set()
    for rx in (_JDBC, _ORACLE, _ODBC, _LIBPQ):
        for m in rx.finditer(data):
            g = m.lastindex or 1
            pw = m.group(g)
            if _ok(pw) and m.span(g) not in seen:
                seen.add(m.span(g))
                yield Hit(*m.span(g), pw)


DETECTORS = (Detector("connection-string-password", "Password in a JDBC URL or ODBC/ADO.NET connection string",
                      (b"jdbc:", b"pwd=", b"password=", b"pwd =", b"password ="), find),)
