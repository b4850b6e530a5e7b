"""Structural detectors (repoguard.credentials.structural): one test per detector, each run by
the full engine on both backends (Hyperscan and RE2), with true and false positives. Secrets are
assembled at run time (random or encoded here), so this file holds no literal credential."""
from __future__ import annotations

import base64
import os

import pytest

from repoguard.credentials.engine import Engine
from repoguard.credentials.keys import fingerprint
from repoguard.credentials.rules import load_rules
from repoguard.credentials.structural import all_detectors
from repoguard.credentials.structural.placeholders import is_placeholder

RULES = load_rules()


@pytest.fixture(scope="module", params=["hyperscan", "re2"])
def engine(request):
    # Hyperscan's database from the on-disk cache (compiling the default rules costs ~6 s of CPU
    # per module and xdist worker); the cache round trip itself is tested in test_engine.py.
    return Engine.build(RULES) if request.param == "hyperscan" else Engine(RULES, use_hyperscan=False)


def _ids(engine, text: str | bytes, path: str = "app/settings.py") -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    return [f.rule_id for f in engine.scan(data, path)]


def _b64(s: str | bytes) -> str:
    return base64.b64encode(s.encode() if isinstance(s, str) else s).decode()


def _pem(label: str, nbytes: int) -> str:
    body = _b64(os.urandom(nbytes))
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n"


def test_detector_ids_unique_and_lowercase_triggers():
    dets = all_detectors()
    assert len({d.id for d in dets}) == len(dets) >= 9
    assert all(t == t.lower() for d in dets for t in d.triggers)


def test_placeholders():
    for v in (b"${DB_PASSWORD}", b"{{ .Values.pw }}", b"%(password)s", b"<password>", b"changeme",
              b"xxxxxxxx", b"********", b"your_password_here", b"password", b"aaaa", b"abc"):
        assert is_placeholder(v), v
    for v in (b"Tr0ub4dor3x9", b"q8Vn3LmZ0aPw7XcR", b"7hGk2LmQp9xZ"):
        assert not is_placeholder(v), v


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["postgresql", "mysql", "mongodb+srv", "redis", "rediss", "amqp",
                                    "amqps", "mssql", "sqlserver", "oracle", "kafka", "nats", "mqtt",
                                    "https", "ftp", "sftp", "ldap", "smtp", "clickhouse", "cassandra"])
def test_url_credentials_every_scheme(engine, scheme):
    pw = "Tr0ub" + "4dor3x9"
    found = engine.scan(f'URL = "{scheme}://svc_user:{pw}@db.internal.corp:5432/app"\n'.encode(), "a.py")
    assert found and found[0].secret_hmac == fingerprint(engine.key, pw.encode())
    assert all(pw not in repr(f.to_json()) for f in found)


@pytest.mark.parametrize("text", [
    'u = "postgresql://user:${DB_PASSWORD}@db:5432/app"',
    'u = "redis://:{password}@redis:6379"',
    'u = "amqp://guest:guest@localhost:5672/"',
    'u = "mysql://root:<password>@localhost/db"',
    'u = "postgres://user:password@localhost/db"',
    'u = "mongodb://admin:changeme@mongo:27017"',
    'u = "https://user:xxxxxxxx@example.com/"',
    'see https://docs.python.org/3/library/urllib.html#module-urllib',
    "- 'github://org:repo@sha/precip/catalog.yml', where the sha is included",
    'url = URL("https://jo%40email.com:a%20secret@www.host.io")',
    '-   ``s3://aws_key:aws_secret@mybucket/path/to/export.csv``',      # scrapy's docs
    '"s3://uri_key:uri_secret@mybucket/export.csv",',                   # scrapy's tests
])
def test_url_credentials_placeholders_rejected(engine, text):
    assert "url-credentials" not in _ids(engine, text)
    assert _ids(engine, text) == []


def test_http_authorization(engine):
    tok = "9f8e7d6c" + "5b4a39281726354a5b6c7d8e"
    basic = _b64("ci-bot:Xk29dLp0q")
    assert _ids(engine, f'curl -H "Authorization: Bearer {tok}" https://api.x.io\n', "deploy.sh")
    assert _ids(engine, f'headers = {{"Authorization": "Basic {basic}"}}\n', "client.py")
    assert _ids(engine, f'req.setRequestHeader("Authorization", "Token {tok}");\n', "a.js")
    assert _ids(engine, "curl -u deploy:" + "Zq8vLm2Npw https://x.io/upload\n", "up.sh")
    for neg in ('headers = {"Authorization": f"Bearer {token}"}\n',
                'curl -H "Authorization: Bearer $TOKEN" https://api\n',
                'curl -H "Authorization: Bearer <your-token>" https://api\n',
                f'h = {{"Authorization": "Basic {_b64("user:password")}"}}\n',
                'curl -u "$USER:$PASS" https://x.io\n',
                'curl -u admin:admin https://x.io\n'):
        assert _ids(engine, neg, "a.sh") == [], neg


def test_netrc_and_npmrc_pypirc_docker(engine):
    assert _ids(engine, "machine api.github.com\n  login bot\n  password 7hGk2" + "LmQp9xZ\n", ".netrc") \
        == ["netrc-password"]
    assert _ids(engine, 'RUN echo "machine gitlab.corp login ci password Pq72mZ' + 'x0Lk" > ~/.netrc\n',
                "Dockerfile")
    assert _ids(engine, "machine x login y password $NETRC_PASSWORD\n", ".netrc") == []
    npm = "//registry.corp/:_auth=" + _b64("ci:Mv7Rq2" + "zXp0") + "\nalways-auth=true\n"
    assert _ids(engine, npm, ".npmrc")
    assert _ids(engine, "//registry.corp/:_auth=" + _b64("user:password") + "\n", ".npmrc") == []
    assert _ids(engine, "//registry.npmjs.org/:_authToken=${NPM_TOKEN}\n", ".npmrc") == []
    pypirc = "[distutils]\nindex-servers = internal\n[internal]\nrepository = https://pypi.corp\n" \
             "username = ci\npassword = Hq8" + "vN2mLx7\n"
    assert _ids(engine, pypirc, ".pypirc")
    assert _ids(engine, "[pypi]\nusername = __token__\npassword = <your token>\n", ".pypirc") == []
    docker = '{"auths": {"ghcr.io": {"auth": "' + _b64("bot:Rk3" + "mWq8zPv") + '"}}}'
    assert _ids(engine, docker, ".docker/config.json")
    assert _ids(engine, '{"auths": {"ghcr.io": {"auth": "' + _b64("user:changeme") + '"}}}',
                ".docker/config.json") == []


def test_kubernetes_secret_data_decoded(engine):
    pw = _b64("Sup3rS4f3" + "Pw!")
    doc = ("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\ndata:\n"
           f"  username: {_b64('admin')}\n  db-pass: {pw}\n  ca.crt: {_b64('not secret at all!')}\n"
           "stringData:\n  api: q8Vn3" + "LmZ0aPw7XcR\n  other: changeme\n---\nkind: ConfigMap\n"
           "data:\n  key: q8Vn3" + "LmZ0aPw7XcR\n")
    found = [(f.rule_id, f.line) for f in engine.scan(doc.encode(), "k8s/secret.yaml")]
    assert ("kubernetes-secret-manifest", 11) in found
    assert ("kubernetes-secret-manifest", 8) in found  # db-pass (decoded)
    assert not any(line in (7, 9, 12, 16) for _, line in found)  # username, ca.crt, placeholder, ConfigMap
    placeholder = "kind: Secret\ndata:\n  password: " + _b64("changeme") + "\n"
    assert "kubernetes-secret-manifest" not in _ids(engine, placeholder, "k8s/s.yaml")


def test_connection_strings(engine):
    for text in ('s = "jdbc:sqlserver://db:1433;databaseName=x;user=sa;password=Qw7!z' + 'Lp0v9;"',
                 's = "jdbc:mysql://db:3306/app?user=app&password=Rt5' + 'vXq2m&useSSL=true"',
                 's = "jdbc:oracle:thin:scott/Ti9' + 'gRw4x@db:1521:orcl"',
                 's = "Driver={ODBC Driver 18};Server=db;Uid=sa;Pwd=Mn4b' + 'V8cX2z;"',
                 's = "Data Source=db;Initial Catalog=app;User ID=sa;Password=Kz7' + 'pQw2n;"',
                 'conn.Open("Provider=SQLOLEDB.1;User ID=rpt; " & "Password=Hv6' + 'tQz3k;Data Source=db01;")'):
        assert _ids(engine, text, "App.java"), text
    for text in ('s = "jdbc:postgresql://db/app?user=app&password=${DB_PASSWORD}"',
                 's = "Server=db;Uid=sa;Pwd=<password>;"',
                 's = "jdbc:mysql://db/app?user=root&password=password"'):
        assert _ids(engine, text, "App.java") == [], text


def test_private_key_base64_at_any_length(engine):
    """A 2048-bit-size key (1,190 bytes of DER) as one base64 value: ≈ 2,200 characters, past the
    blob decoder's window; found whole. Also 4096-bit size, and with escaped newlines."""
    for nbytes in (1190, 2350):
        pem = _pem("RSA PRIVATE KEY", nbytes)
        found = engine.scan(f"PRIVATE_KEY_B64={_b64(pem)}\n".encode(), "deploy/.env")
        assert [f.rule_id for f in found] == ["private-key-base64"]
        assert found[0].end - found[0].start == len(_b64(pem))
    der = bytes([0x30, 0x82, 0x04, 0xBD, 0x02, 0x01, 0x00, 0x30, 0x0D, 0x06, 0x09, 0x2A, 0x86, 0x48,
                 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01, 0x05, 0x00, 0x04, 0x82]) + os.urandom(1190)
    assert _ids(engine, f"key: {_b64(der)}\n", "c.yaml") == ["private-key-base64"]
    # A base64 "-----BEGIN CERTIFICATE-----" is public: not reported.
    cert = _pem("CERTIFICATE", 900)
    assert _ids(engine, f"CERT_B64={_b64(cert)}\n", ".env") == []


@pytest.mark.parametrize("label", ["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY",
                                   "ENCRYPTED PRIVATE KEY", "OPENSSH PRIVATE KEY",
                                   "PGP PRIVATE KEY BLOCK"])
def test_private_key_blocks(engine, label):
    big = _pem(label, 9000)  # past the regex rules' 16 KiB window: still one finding
    assert len(engine.scan(big.encode(), "keys/id")) == 1
    escaped = _pem(label, 600).replace("\n", "\\n")
    assert engine.scan(f'{{"private_key": "{escaped}"}}'.encode(), "sa.json")
    elided = f"-----BEGIN {label}-----\n...\n-----END {label}-----\n"
    assert engine.scan(elided.encode(), "README.md") == []


def test_jwt_needs_json_header_and_signature(engine):
    def seg(obj: str) -> str:
        return base64.urlsafe_b64encode(obj.encode()).decode().rstrip("=")
    head, body = seg('{"alg":"HS256","typ":"JWT"}'), seg('{"sub":"1234567890","name":"svc","iat":1700000000}')
    sig = base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")
    assert _ids(engine, f"token = '{head}.{body}.{sig}'\n") in (["jwt"], ["jwt-signed"])
    none_head = seg('{"alg":"none","typ":"JWT"}')
    from repoguard.credentials.structural.jwt import find
    assert list(find(f"{head}.{body}.{sig}".encode(), "x"))
    assert not list(find(f"{none_head}.{body}.{sig}".encode(), "x"))
    assert not list(find(f"{head}.{body}.".encode(), "x"))
    assert not list(find(f"eyJhbGciOiJIUzI1NiJ9xx.eyJzdWIiOiIxMjM0NTY3ODkwIn0xx.{sig}".encode(), "x"))


def test_structural_findings_never_hold_the_secret(engine):
    pw = "Tr0ub4" + "dor3x9Q"
    f = engine.scan(f"postgres://svc:{pw}@db/app\n".encode(), "a.py")[0]
    assert pw not in str(f.to_json()) and f.redacted == f"****({len(pw)} chars)"


def _pw(n: int = 12) -> str:
    """A random password-like literal (letters and digits, no placeholder word)."""
    import secrets
    import string
    alphabet = string.ascii_letters + string.digits
    while True:
        s = "".join(secrets.choice(alphabet) for _ in range(n))
        if any(c.isdigit() for c in s) and any(c.isupper() for c in s) and not is_placeholder(s.encode()):
            return "Zq" + s


def _found(engine, text: str, rule: str, path: str = "app/settings.py") -> list:
    return [f for f in engine.scan(text.encode(), path) if f.rule_id == rule]


# (path, {rule: texts with `{pw}`}, texts that are no literal password): the invocation detectors.
_INVOCATIONS = [
    ("tools/deploy.ps1", {
        "psexec-password": ["psexec \\\\10.0.0.5 -u CORP\\svc -p {pw} cmd /c whoami",
                            'PsExec64.exe \\\\srv01 -u admin -p "{pw}" -i calc.exe'],
        "connect-viserver-password": ["Connect-VIServer -Server vc01 -User admin@vsphere.local -Password {pw}",
                                      "$c = connect-viserver esx1.lab -user root -password '{pw}'"],
        "dotnet-networkcredential-password": ['client.Credentials = new NetworkCredential("builder", "{pw}");',
                                              '$wc.Credentials = New-Object System.Net.NetworkCredential("ci", "{pw}")'],
        "dotnet-directoryentry-password": ['var de = new DirectoryEntry("LDAP://dc01",\n    "CORP\\\\svc",\n    "{pw}");'],
    }, ("psexec \\\\srv -u User -p $Password -i calc.exe",
        "PsExec.exe \\\\srv -u DOMAIN\\ADMIN -p PASSWORD cmd",
        "psexec \\\\srv -u svc -p %SVC_PW% cmd",
        "PSEXEC.EXE \\\\host -u CORP\\me -p mypass CMD",
        'Connect-VIServer "$endpoint" -User "$username" -Password "$password"',
        "Connect-VIServer $h -user $u -password $ESXipass",
        'new NetworkCredential("user", password)',
        'new NetworkCredential("user", "changeme")',
        'new DirectoryEntry("LDAP://dc01", "CORP\\\\user", "secret")')),
    # session 11: docker login, the MySQL clients, sshpass; stdin and a bare `-p` (MySQL's prompt)
    ("scripts/deploy.sh", {
        "docker-login-password": ["docker login -u deploy -p {pw} registry.acme.internal",
                                  "docker login --username ci --password={pw} ghcr.io"],
        "mysql-cli-password": ["mysqldump -uroot -p{pw} app > dump.sql",
                               "mysql -h db.internal -u app --password={pw} app < seed.sql"],
        "sshpass-password": ["sshpass -p '{pw}' ssh deploy@10.0.0.5"],
    }, ("docker login -u deploy -p $REGISTRY_PASSWORD registry.acme.internal",
        'echo "$PW" | docker login -u deploy --password-stdin ghcr.io',
        "mysql -u root -p app < dump.sql",
        'mysql -u root -p"$MYSQL_PWD" app',
        "sshpass -e ssh deploy@10.0.0.5",
        "sshpass -p changeme ssh deploy@10.0.0.5")),
]


@pytest.mark.parametrize("path,cases,not_literal", _INVOCATIONS, ids=[p for p, _, _ in _INVOCATIONS])
def test_invocations(engine, path, cases, not_literal):
    pw = _pw()
    for rule, texts in cases.items():
        for text in texts:
            text = text.replace("{pw}", pw)
            hits = _found(engine, text, rule, path)
            assert hits and hits[0].secret_hmac == fingerprint(engine.key, pw.encode()), (rule, text)
    for text in not_literal:
        assert _ids(engine, text, path) == [], text


def test_named_secrets_prose_and_comparison(engine):
    pw = _pw(8)
    for text in (f"The default password for the user \"svc\" is \"{pw}\".",
                 f"Log in as admin; the password is '{pw}'."):
        assert _found(engine, text, "password-in-prose", "docs/setup.md"), text
    for text in (f'if creds.Secret != "{pw}" {{', f"if user == 'ops' and password == '{pw}':"):
        assert _found(engine, text, "password-comparison", "app/auth.go"), text
    for text in ("The password is 'required'.", "raise ValueError(\"password is 'too short'\")",
                 "the password is '<your password>'", "if password == \"\":",
                 "if secret != 'undefined':", "if password == 'changeme':", "if secret == 'false':"):
        assert _ids(engine, text, "docs/setup.md") == [], text


def test_named_secrets_jwt_appsettings_client_env(engine):
    pw = _pw(16)
    assert _found(engine, f'JWT_SECRET="{pw}"\n', "jwt-signing-secret")
    assert _found(engine, f"jwt:\n  expires: 50m\n  secret: '{pw}#x'\n", "jwt-signing-secret", "config/app.yaml")
    assert _found(engine, f'<add key="SmtpPassword" value="{pw}$" />', "dotnet-appsetting-secret", "Web.config")
    assert _found(engine, f"REACT_APP_DB_PASSWORD={pw}  # dev\n", "client-bundle-env-password", ".env")
    assert _found(engine, f"VITE_API_SECRET='{pw}'\n", "client-bundle-env-password", ".env")
    for text, path in (("jwt_key = customer_user.jwt_token_key\n", "a.py"),
                       ("jwtSecret: process.env.JWT_SECRET,\n", "a.js"),
                       ("JWT_SECRET=${JWT_SECRET}\n", ".env"),
                       ("JWT_KEY=/run/secrets/jwt_signing.pem\n", ".env"),
                       ('jwt_key: "-----BEGIN PUBLIC KEY-----"\n', "config/app.yaml"),
                       ("JWT_KEY_URL=https://auth.corp.local/.well-known/jwks.json\n", ".env"),
                       ('<add key="SmtpPassword" value="" />', "Web.config"),
                       ('<add key="ApiToken" value="YOUR_API_TOKEN" />', "Web.config"),
                       ('<add key="TokenIssuer" value="https://login.corp.local/tenant" />', "Web.config"),
                       ('<add key="SecretsFile" value="C:\\app\\secrets.json" />', "Web.config"),
                       ("REACT_APP_MAILER_PASSWORD=smtp_password # your SMTP password\n", ".env"),
                       ("REACT_APP_AUTH_USERNAME=bowie\n", ".env")):
        assert _ids(engine, text, path) == [], text


def test_named_secrets_gradle_and_buildconfig(engine):
    pw = _pw(14)
    assert _found(engine, f'credentials {{\n    username "deployer"\n    password "{pw}"\n}}\n',
                  "gradle-repository-password", "build.gradle")
    assert _found(engine, f'credentials(PasswordCredentials::class) {{\n  password = "{pw}"\n}}\n',
                  "gradle-repository-password", "build.gradle.kts")
    assert _found(engine, f"buildConfigField 'String', 'MAPS_API_KEY', '\"{pw}\"'\n",
                  "android-buildconfig-secret", "app/build.gradle")
    for text in ("credentials {\n  username 'user'\n  password 'password'\n}\n",
                 'credentials {\n  username "SOME_USERNAME"\n  password "SOME_PASSWORD"\n}\n',
                 'credentials {\n  password = findProperty("repoPassword")\n}\n',
                 'buildConfigField "String", "API_KEY", "\\"${apiKey}\\""\n'):
        assert _ids(engine, text, "build.gradle") == [], text


def test_private_key_block_in_concatenated_strings(engine):
    body = _b64(os.urandom(600))
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    java = '"-----BEGIN RSA PRIVATE KEY-----" +\n' + "".join(f'"{ln}" +\n' for ln in lines) \
        + '"-----END RSA PRIVATE KEY-----"'
    assert _ids(engine, f"String key = {java};\n", "Keys.java") == ["private-key-block"]
    elided = '"-----BEGIN RSA PRIVATE KEY-----" +\n"..." +\n"-----END RSA PRIVATE KEY-----"'
    assert _ids(engine, elided, "Keys.java") == []
