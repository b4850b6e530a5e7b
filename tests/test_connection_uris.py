"""Connection strings (issue 43, the largest miss left by input): a generated password holds `/`
(base64) or `@` raw in a URL's userinfo, SQLAlchemy's dialect+driver schemes carry `_`
(`oracle+cx_oracle`), Redis URLs have no user (`redis://:password@host`), libpq's conninfo is
space-separated `key=value` pairs, and SMB's userinfo may start with a Windows domain and `;`. Each form has a twin that is no credential: a port and a path
(`host:8080/a@b`), WHATWG's URL-parser test vectors, placeholders."""
from __future__ import annotations

import pytest

from repoguard.credentials.engine import Engine
from repoguard.credentials.rules import load_rules

PW_SLASH = "Zq8vT2/mWx4Lp9Rk"
PW_AT = "Zq8vT2@mWx4Lp9Rk"


@pytest.fixture(scope="module")
def engine():
    return Engine.build(load_rules())


def _secrets(engine, text: str, path: str = "config/settings.py") -> list[str]:
    data = text.encode()
    return [data[f.start:f.end].decode() for f in engine.scan(data, path) if f.confidence != "low"]


@pytest.mark.parametrize("text,secret", [
    (f"DATABASE_URL=postgres://app:{PW_SLASH}@db.internal:5432/app", PW_SLASH),
    (f'MONGO_URI="mongodb+srv://svc:{PW_SLASH}@cluster0.ab1cd.mongodb.net/app?retryWrites=true"', PW_SLASH),
    (f"BROKER_URL=amqps://svc:{PW_AT}@mq.internal:5671/vhost", PW_AT),
    (f"SMTP_URL=smtp://mailer:{PW_AT}@smtp.internal:587", PW_AT),
    ('engine = create_engine("oracle+cx_oracle://svc:Zq8vT2mWx4Lp9Rk@db.internal:1521/?service_name=XE")',
     "Zq8vT2mWx4Lp9Rk"),
    (f"REDIS_URL=redis://:{PW_SLASH}@cache.internal:6379/0", PW_SLASH),
    ('psql "host=db.internal port=5432 dbname=app user=app password=Zq8vT2mWx4Lp9Rk sslmode=require"',
     "Zq8vT2mWx4Lp9Rk"),
    # SMB's URL puts a Windows domain and `;` before the user (smbclient, Samba's smb:// URIs)
    ('BACKUP_SHARE = "smb://CORP;svc_backup:Zq8vT2mWx4Lp9Rk@fileserver/backups"', "Zq8vT2mWx4Lp9Rk"),
])
def test_connection_string_password_is_found(engine, text, secret):
    assert secret in _secrets(engine, text)


@pytest.mark.parametrize("text", [
    "see https://localhost:8080/users/@alice for the profile",     # a port, then a path holding '@'
    '    "input": "http://::@c@d:2",',                               # WHATWG URL test vector
    "REDIS_URL=redis://:changeme@cache.internal:6379/0",
    "DATABASE_URL=postgres://app:${DB_PASSWORD}@db.internal:5432/app",
    'psql "host=db.internal dbname=app user=app password=$PGPASSWORD"',
    "url = https://deploy:Zq8v/T2mWx4Lp@git.example.com/app.git",   # RFC 2606 host
    'BACKUP_SHARE = "smb://CORP;svc_backup:changeme@fileserver/backups"',
    'x = "smb://"; y = "CORP;svc:Zq8vT2mWx4Lp9Rk@fileserver"',      # no URL holds that userinfo
])
def test_its_non_credential_twin_is_not(engine, text):
    assert _secrets(engine, text) == []


def test_a_raw_at_in_the_password_is_redacted_whole(engine):
    """The database rule stops at the first `@`; the URL detector runs to the host's: the whole
    password leaves the training text, not its head alone."""
    from repoguard.credentials.redact import redact
    out, _ = redact(f"BROKER_URL=amqps://svc:{PW_AT}@mq.internal:5671/vhost\n", "config/settings.py", engine=engine)
    assert "Zq8vT2" not in out and "mWx4Lp9Rk" not in out and "@mq.internal:5671" in out
