"""Jenkins credential stores in every form they are written (issue 43: "Jenkins credentials.xml",
the held-out set's largest miss). Forms from the credentials plugin's own docs (docs/user.adoc:
the REST and CLI `create-credentials-by-xml` bodies, `<secret-redacted/>` replaced by the value,
pretty-printed on its own line), the ssh-credentials plugin's `<privateKey>` (plain text before
1.12, written by XStream with `&#xd;` for a pasted key's carriage returns) and Configuration as
Code YAML. Every value is drawn here (tests/fake_values.py); each form has a twin without a
literal (a `${…}` reference, `<secret-redacted/>`, an encrypted `{AQAAAB…}` handled by its own
detector) that must stay silent."""
from __future__ import annotations

import base64
import random

import pytest

from fake_values import random_key
from repoguard.credentials.engine import Engine
from repoguard.credentials.rules import load_rules


@pytest.fixture(scope="module")
def engine():
    return Engine.build(load_rules())


def _reported(engine, text: str, path: str) -> list[str]:
    return [f.rule_id for f in engine.scan(text.encode(), path) if f.confidence != "low"]


_RNG = random.Random(4343)
# A generated password with a symbol, 12 characters: too short and too mixed for the generic
# key rules (20+ characters), the shape a password manager gives.
_PW = random_key(_RNG, 6) + "-" + random_key(_RNG, 5)
_UP = "com.cloudbees.plugins.credentials.impl.UsernamePasswordCredentialsImpl"
_STRING = "org.jenkinsci.plugins.plaincredentials.impl.StringCredentialsImpl"
_AWS = "com.cloudbees.jenkins.plugins.awscredentials.AWSCredentialsImpl"
_SSH = "com.cloudbees.jenkins.plugins.sshcredentials.impl.BasicSSHUserPrivateKey"


def _store(entry: str) -> str:
    """A controller's credentials.xml holding one credential entry."""
    return ("<?xml version='1.1' encoding='UTF-8'?>\n"
            '<com.cloudbees.plugins.credentials.SystemCredentialsProvider plugin="credentials@1337.v60b_d7b_c7b_c9f">\n'
            '  <domainCredentialsMap class="hudson.util.CopyOnWriteMap$Hash">\n    <entry>\n'
            "      <com.cloudbees.plugins.credentials.domains.Domain>\n        <specifications/>\n"
            "      </com.cloudbees.plugins.credentials.domains.Domain>\n"
            f"      <java.util.concurrent.CopyOnWriteArrayList>\n{entry}"
            "      </java.util.concurrent.CopyOnWriteArrayList>\n    </entry>\n  </domainCredentialsMap>\n"
            "</com.cloudbees.plugins.credentials.SystemCredentialsProvider>\n")


def _entry(cls: str, body: str) -> str:
    return (f"        <{cls}>\n          <scope>GLOBAL</scope>\n          <id>deploy</id>\n"
            f"          <description>deploy</description>\n{body}        </{cls}>\n")


FOUND = [
    # the REST/CLI body of the plugin's docs, a secret text credential
    ("credential.xml", f"<{_STRING}>\n  <scope>GLOBAL</scope>\n  <id>slack</id>\n  <secret>{_PW}</secret>\n"
                       f"  <description>TEST</description>\n</{_STRING}>\n"),
    # list-credentials-as-xml's output with <secret-redacted/> replaced, the value on its own line
    ("jenkins_home/credentials.xml", _store(_entry(_UP, f"          <username>deploy</username>\n"
                                                      f"          <password>\n            {_PW}\n          </password>\n"))),
    # a Secret-typed field with its class attribute, and an AWS secret key
    ("jenkins_home/credentials.xml", _store(_entry(_UP, f'          <username>deploy</username>\n'
                                                      f'          <password class="hudson.util.Secret">{_PW}</password>\n'))),
    ("jenkins_home/credentials.xml", _store(_entry(_AWS, "          <accessKey>${AWS_ACCESS_KEY_ID}</accessKey>\n"
                                                  f"          <secretKey>{_PW}</secretKey>\n"))),
    # an SSH key's passphrase
    ("jenkins_home/credentials.xml", _store(_entry(_SSH, f"          <username>git</username>\n"
                                                       f"          <passphrase>{_PW}</passphrase>\n"))),
    # Configuration as Code
    ("casc/jenkins.yaml", "credentials:\n  system:\n    domainCredentials:\n      - credentials:\n"
                          f"          - string:\n              scope: GLOBAL\n              id: slack\n              secret: \"{_PW}\"\n"
                          f"          - aws:\n              id: aws\n              secretKey: {_PW}\n"),
]


@pytest.mark.parametrize("path,text", FOUND)
def test_jenkins_credential_is_reported(engine, path, text):
    assert _reported(engine, text, path), path


def _hudson_secret(rng: random.Random) -> str:
    """hudson.util.Secret's ciphertext layout: version 1, IV length 16, data length, IV, data."""
    raw = bytes([1]) + (16).to_bytes(4, "big") + (32).to_bytes(4, "big") + rng.randbytes(48)
    return "{" + base64.b64encode(raw).decode() + "}"


SILENT = [
    ("jenkins_home/credentials.xml", _store(_entry(_UP, "          <username>deploy</username>\n"
                                                      "          <password>\n            <secret-redacted/>\n          </password>\n"
                                                      "          <usernameSecret>false</usernameSecret>\n"))),
    ("credential.xml", f"<{_STRING}>\n  <id>slack</id>\n  <secret>${{SLACK_TOKEN}}</secret>\n"
                       f"  <tokenCredentialId>slack-token-id</tokenCredentialId>\n</{_STRING}>\n"),
    ("casc/jenkins.yaml", "credentials:\n  system:\n    domainCredentials:\n      - credentials:\n"
                          "          - string:\n              secret: \"${SLACK_TOKEN}\"\n"),
]


@pytest.mark.parametrize("path,text", SILENT)
def test_reference_or_redacted_is_not(engine, path, text):
    assert _reported(engine, text, path) == [], path


def test_encrypted_value_is_one_finding_of_its_own_detector(engine):
    text = _store(_entry(_UP, f"          <username>deploy</username>\n"
                              f"          <password>{_hudson_secret(_RNG)}</password>\n"))
    assert _reported(engine, text, "jenkins_home/credentials.xml") == ["jenkins-encrypted-secret"]


def _pem(rng: random.Random) -> str:
    """A PKCS#1-shaped block: 64-character base64 lines of random bytes (not a usable key)."""
    body = base64.b64encode(b"\x30\x82\x04\xa4\x02\x01\x00" + rng.randbytes(1180)).decode()
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize("cr", ["&#xd;", "&#13;"])
def test_private_key_with_xml_escaped_carriage_returns(engine, cr):
    """ssh-credentials before 1.12 kept `<privateKey>` in plain text; XStream writes the CR of a
    key pasted with CRLF line ends as a character reference."""
    key = _pem(_RNG).replace("\n", cr + "\n")
    text = _store(_entry(_SSH, "          <username>git</username>\n"
                               '          <privateKeySource class="' + _SSH + '$DirectEntryPrivateKeySource">\n'
                               f"            <privateKey>{key}</privateKey>\n          </privateKeySource>\n"))
    found = [f for f in engine.scan(text.encode(), "jenkins_home/credentials.xml") if f.confidence != "low"]
    assert found and all("private-key" in f.rule_id for f in found)
    s, e = text.index("-----BEGIN"), text.index("PRIVATE KEY-----", text.index("-----END")) + 16
    assert any(f.start <= s and f.end >= e for f in found)  # the whole block, for redaction
