"""Secrets in the files CI/CD pipelines and servers keep them in (issue 27: "Jenkins credential
stores and similar CI/CD secret files"; session 11): one case per file kind, a random value from a
seeded generator (never a real credential), each found by the whole engine at the file's own path;
and the same places holding a reference or a placeholder instead, which are not findings."""
from __future__ import annotations

import base64
import random
import string

import pytest

from repoguard.credentials.engine import Engine
from repoguard.credentials.rules import load_rules
from fake_values import ALNUM, random_key

_RNG = random.Random(5)


def _k(n: int = 20, alphabet: str = ALNUM) -> str:
    return random_key(_RNG, n, alphabet)


PW = "Qz7" + _k(9)
AKIA = "AKIA" + _k(16, string.ascii_uppercase + string.digits)
B64 = string.ascii_letters + string.digits + "+/"

FOUND = [  # (path, the rule that reports it, text)
    ("settings.xml", "password-xml-element",
     f"<settings><servers><server><id>nexus</id><username>deploy</username><password>{PW}</password></server>"
     "</servers></settings>"),
    ("gradle.properties", "gradle-signing-password", f"signing.password={PW}\nsigning.keyId=24875D73\n"),
    (".travis.yml", "generic-api-key", f"env:\n  global:\n    - DEPLOY_TOKEN={_k(32)}\n"),
    (".gitlab-ci.yml", "password-assignment", f"variables:\n  REGISTRY_PASSWORD: \"{PW}\"\n"),
    ("terraform.tfvars", "password-assignment", f"db_password = \"{PW}\"\n"),
    ("values.yaml", "password-in-config-file", f"postgresql:\n  auth:\n    password: {PW}\n"),
    (".git-credentials", "url-credentials", f"https://deploy:{_k(40)}@git.acme.internal\n"),
    (".pgpass", "pgpass-password", f"db.acme.internal:5432:app:appuser:{PW}\n"),
    ("my.cnf", "password-in-config-file", f"[client]\nuser=root\npassword={PW}\n"),
    ("wp-config.php", "password-php-define", f"define( 'DB_PASSWORD', '{PW}' );\n"),
    ("config/database.yml", "password-in-config-file", f"production:\n  adapter: postgresql\n  password: {PW}\n"),
    ("application.properties", "password-in-config-file", f"spring.datasource.password={PW}\n"),
    ("appsettings.json", "sqlserver-connection-string-password",
     f'{{"ConnectionStrings": {{"Default": "Server=db.acme.internal;Database=app;User Id=sa;Password={PW};"}}}}'),
    ("web.config", "dotnet-appsetting-secret", f'<appSettings><add key="SmtpPassword" value="{PW}" /></appSettings>'),
    ("FileZilla/sitemanager.xml", "filezilla-password",
     "<Server><Host>ftp.acme.internal</Host><User>deploy</User>"
     f'<Pass encoding="base64">{base64.b64encode(PW.encode()).decode()}</Pass></Server>'),
    ("rclone.conf", "password-in-config-file",
     f"[remote]\ntype = sftp\nhost = sftp.acme.internal\npass = {_k(40, ALNUM + '-_')}\n"),
    (".vscode/sftp.json", "password-assignment",
     f'{{"host": "sftp.acme.internal", "username": "deploy", "password": "{PW}"}}'),
    (".aws/credentials", "aws-secret-access-key",
     f"[default]\naws_access_key_id = {AKIA}\naws_secret_access_key = {_k(40, B64)}\n"),
    ("docker-compose.yml", "password-in-config-file",
     f"services:\n  db:\n    environment:\n      POSTGRES_PASSWORD: {PW}\n"),
    ("Dockerfile", "password-in-config-file", f"ENV DB_PASSWORD={PW}\n"),
    (".env", "password-in-config-file", f"MAIL_PASSWORD={PW}\n"),
    ("Jenkinsfile", "docker-login-password", f"sh 'docker login -u deploy -p {PW} registry.acme.internal'\n"),
    ("scripts/backup.sh", "mysql-cli-password", f"mysqldump -uroot -p{PW} app > dump.sql\n"),
    ("scripts/deploy.sh", "sshpass-password", f"sshpass -p '{PW}' ssh deploy@10.0.0.5\n"),
    ("scripts/deploy.sh", "password-in-config-file", f"export PGPASSWORD={PW}\npsql -h db.acme.internal -U app\n"),
    ("Makefile", "password-in-config-file", f"DB_PASSWORD := {PW}\n"),
    ("ansible/hosts", "ansible-inventory-password", f"[db]\n10.0.0.7 ansible_user=root ansible_password={PW}\n"),
    ("pillar/secrets.sls", "password-in-config-file", f"mysql:\n  root_password: {PW}\n"),
    ("data_bags/ldap/app.json", "chef-data-bag-secret", f'{{"id": "ldap", "api_token": "{_k(14)}", "user": "admin"}}'),
]

NOT_FOUND = [
    ("settings.xml", "<server><id>nexus</id><password>{COQLCE6DU6GtcS5P=}</password></server>"),
    ("settings.xml", "<server><id>nexus</id><password>${env.NEXUS_PASSWORD}</password></server>"),
    ("wp-config.php", "define( 'DB_PASSWORD', 'password_here' );\n"),
    (".pgpass", "# hostname:port:database:username:password\n"),
    ("scripts/deploy.sh", "DB_PASSWORD=$1\nexport PGPASSWORD=\"$DB_PASSWORD\"\n"),
    ("scripts/deploy.sh", "DB_PASSWORD=$(cat /run/secrets/db)\n"),
    ("Jenkinsfile", "sh 'echo $REGISTRY_PW | docker login -u deploy --password-stdin registry.acme.internal'\n"),
    ("scripts/backup.sh", "mysqldump -u root -p app > dump.sql\n"),
    ("data_bags/ldap/app.json", '{"id": "ldap", "api_token": {"encrypted_data": "Zm9v", "iv": "YmFy", '
                                '"cipher": "aes-256-cbc"}}'),
]


@pytest.fixture(scope="module")
def engine():
    return Engine.build(load_rules())


@pytest.mark.parametrize("path,rule,text", FOUND, ids=[p for p, _, _ in FOUND])
def test_secret_file_is_found(engine, path, rule, text):
    assert [f.rule_id for f in engine.scan(text.encode(), path)] == [rule], (path, text)


@pytest.mark.parametrize("path,text", NOT_FOUND, ids=[p for p, _ in NOT_FOUND])
def test_reference_or_placeholder_is_not(engine, path, text):
    assert engine.scan(text.encode(), path) == [], (path, text)
