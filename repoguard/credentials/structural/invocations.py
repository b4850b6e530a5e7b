"""Passwords passed as arguments to Windows administration commands and .NET constructors, by
their documented signatures:

- Sysinternals PsExec: `psexec \\\\host -u USER -p PASSWORD cmd` (`-p`: the password of `-u`);
- VMware PowerCLI: `Connect-VIServer -Server H -User U -Password P`;
- .NET `System.Net.NetworkCredential(userName, password[, domain])` (C#, VB, PowerShell
  `New-Object System.Net.NetworkCredential("u", "p")`);
- .NET `System.DirectoryServices.DirectoryEntry(path, username, password)`;
- `docker login -p PASSWORD` / `--password PASSWORD` (Docker CLI reference: docker login);
- MySQL clients `mysql`/`mysqldump`/`mysqladmin -pPASSWORD` (glued: `-p PASSWORD` names a
  database) or `--password=PASSWORD` (MySQL manual, 6.2.2.1 Using Options on the Command Line);
- `sshpass -p PASSWORD` (sshpass(1)).

Only literal passwords count: variables (`$Password`, `%PW%`), placeholders (`PASSWORD`,
`changeme`) and template expressions are rejected (`placeholders.is_placeholder`).
"""
from __future__ import annotations

from typing import Callable, Iterator

import re2

from repoguard.credentials.structural.base import Detector, Hit, group_hits
from repoguard.credentials.structural.placeholders import is_placeholder

_ARG = rb"(?:\"([^\"\n]{1,128})\"|'([^'\n]{1,128})'|([^\s\"'|;&`]{1,128}))"
_QUOTED = rb"(?:\"([^\"\n]{1,128})\"|'([^'\n]{1,128})')"
_STR = rb"(?:\"[^\"\n]{0,256}\"|'[^'\n]{0,256}')"

_PSEXEC = re2.compile(rb"(?i)\bpsexec(?:64)?(?:\.exe)?[ \t][^\n]{0,300}?[ \t]-u[ \t]+(?:\"[^\"\n]{1,128}\"|[^\s\"]{1,128})"
                      rb"[ \t]+-p[ \t]+" + _ARG)
_VISERVER = re2.compile(rb"(?i)\bconnect-viserver\b[^\n]{0,300}?[ \t]-password[ \t]+" + _ARG)
_NETCRED = re2.compile(rb"(?i)\bnetworkcredential[ \t]*\([ \t]*" + _STR + rb"[ \t]*,[ \t]*" + _QUOTED)
_DOCKER_LOGIN = re2.compile(rb"\bdocker[ \t]+login\b[^\n|;&]{0,300}?[ \t](?:-p|--password)(?:[ \t]+|=)" + _ARG)
_MYSQL = re2.compile(rb"\bmysql(?:dump|admin|import|check|slap)?(?:\.exe)?[ \t][^\n|;&]{0,300}?[ \t]"
                     rb"(?:-p|--password=)" + _ARG)
_SSHPASS = re2.compile(rb"\bsshpass[ \t]+(?:-[a-oq-zA-Z][^ \t\n]*[ \t]+){0,4}-p[ \t]*" + _ARG)
_DIRENTRY = re2.compile(rb"(?i)\bdirectoryentry[ \t]*\(\s*" + _STR + rb"\s*,\s*" + _STR + rb"\s*,\s*" + _QUOTED)


def _literal(value: bytes) -> bool:
    """A literal password, not a variable, environment reference or placeholder."""
    value = value.lstrip(b"\\")  # `\$DOCKER_PASS`: a variable escaped in a Groovy string or a heredoc
    if value.startswith((b"$", b"%", b"(", b"[")) or value.endswith(b"%") or (
            value.startswith(b"@@") and value.endswith(b"@@")):
        return False  # a variable, an environment reference or a template token (`@@ROOT_PW@@`)
    return not is_placeholder(value, min_len=4)


def _find(rx) -> Callable[[bytes, str], Iterator[Hit]]:
    """A detector's `find`: the first non-empty group of each `rx` match, when it is a literal."""
    return lambda data, path: group_hits(rx, data, _literal)


DETECTORS = (
    Detector("psexec-password", "Password given to Sysinternals PsExec with -u/-p", (b"psexec",), _find(_PSEXEC)),
    Detector("connect-viserver-password", "Password given to VMware PowerCLI Connect-VIServer",
             (b"connect-viserver",), _find(_VISERVER)),
    Detector("dotnet-networkcredential-password", "Literal password in a .NET NetworkCredential constructor",
             (b"networkcredential",), _find(_NETCRED)),
    Detector("dotnet-directoryentry-password", "Literal password in a .NET DirectoryEntry constructor",
             (b"directoryentry",), _find(_DIRENTRY)),
    Detector("docker-login-password", "Password given to docker login with -p/--password", (b"docker",),
             _find(_DOCKER_LOGIN)),
    Detector("mysql-cli-password", "Password given to a MySQL client with -pPASSWORD/--password=", (b"mysql",),
             _find(_MYSQL)),
    Detector("sshpass-password", "Password given to sshpass -p", (b"sshpass",), _find(_SSHPASS)),
)
