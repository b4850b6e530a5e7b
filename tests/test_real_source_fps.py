"""False positives found by scanning real source (issue 27, "findings per 100 MB of real source"):
installed packages, wagtail, scrapy, django-rest-framework, celery, flask, sqlalchemy, requests,
httpx, spring-petclinic, (session 11) laravel, (session 13) werkzeug and oauthlib, and (issue 43)
getmoto/moto. Each case is written here in the form it was found in, with our own
values where the value was not a published example; each has a twin that must still be reported,
so a rule cannot pass by going blind."""
from __future__ import annotations

import pytest

from repoguard.credentials.engine import Engine
from repoguard.credentials.rules import load_rules


@pytest.fixture(scope="module")
def engine():
    return Engine.build(load_rules())


def _ids(engine, text: str, path: str) -> list[str]:
    return [f.rule_id for f in engine.scan(text.encode(), path)]


# (text, path): never a finding.
NOT_CREDENTIALS = [
    # password hashes in a password field: Django fixtures (wagtail), modular crypt
    ('{"model": "customuser.customuser", "fields": {"password": '
     '"md5$seasalt$0f1e2d3c4b5a69788796a5b4c3d2e1f0", "is_superuser": true}}', "app/fixtures/test.json"),
    ('"password": "pbkdf2_sha256$600000$Qm9vYmF6$Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA="', "app/fixtures/users.json"),
    # sample passwords: a single lower-case word, 'password' in leetspeak or with accents, a CamelCase
    # phrase, two or three lower-case words, an e-mail address in a password field
    ('self.client.post(url, {"password": "swordfish"})', "app/tests/test_privacy.py"),
    ('"password": "P@ssw0rd123!"', "docs/reference/models.md"),
    ("password = 'pässwörd'", "tests/test_authentication.py"),
    ("model = Model(password='IAmSensitive', password_bytes=b'IAmSensitiveBytes')", "pkg/types.py"),
    ('u = make_url("dbtype://username:apples%2Foranges@hostspec/database")', "tests/test_url.py"),
    ("url = 'elasticsearch+https://fake_user:fake_pass@localhost:9200/'", "t/test_elasticsearch.py"),
    ('    # user: "me", password: "user@domain.com"', "tests/test_utils_url.py"),
    ('conn = "DSN=mydsn;UID=ed;PWD=pass+word"', "tests/test_engine.py"),
    ('RABBITMQ_PASSWORD="t3s71ng"', "funtests/stress/run/provision/provision.sh"),
    ("broker_url = 'pyamqp://testing:t3s71ng@192.168.33.123//testing'", "funtests/stress/templates.py"),
    ("assert x.password == 'bosco'", "t/unit/backends/test_redis.py"),
    # hosts reserved for documentation (RFC 2606): no credential for them is real
    ('FEED_URI = "ftp://user:2%23um25%21M%23JZ@ftp.example.com/%(name)s.csv"', "tests/test_feedexport.py"),
    ("engine = create_engine('postgresql://app:Zq8vT2mWx4Lp@db.example.org:5432/app')", "docs/engines.rst"),
    ("url = 'https://deploy:Zq8vT2mWx4Lp@git.acme.test/app.git'", "docs/deploy.md"),
    ('f.write("machine example.com login aaaa password bbbb\\n")', "tests/test_utils.py"),
    # a multi-host authority whose credential is a placeholder (pydantic's MultiHostUrl docs)
    ("mhu = MultiHostUrl('https://foo.com:123,foo:bar@bar.com/path')", "pkg/networks.py"),
    # the Service Binding spec's well-known entries of a Kubernetes Secret (spring-petclinic)
    ('apiVersion: v1\nkind: Secret\nmetadata:\n  name: demo-db\ntype: servicebinding.io/postgresql\n'
     'stringData:\n  type: "postgresql"\n  provider: "postgresql"\n  host: "demo-db"\n  password: "pass"\n',
     "k8s/db.yml"),
    # published documentation examples, copied verbatim
    ('"AWS_ACCESS_KEY_ID": "0PN5J17HBGZHT7JJ3X82",\n'
     '"AWS_SECRET_ACCESS_KEY": "uV3F3YluFJax1cknvbcGwgjvx4QpvB+leU8dUj2o",', "tests/test_downloader.py"),
    ("    Authorization: Token 9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b", "docs/api-guide/authentication.md"),
    # published specification examples (RFC 7617, 6749, 5849; jwt.io; Stripe's API reference)
    ("headers={'Authorization': 'Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=='}", "src/werkzeug/testsuite/wrappers.py"),
    ('Authorization: Basic czZCaGRSa3F0MzpnWDFmQmF0M2JW', "docs/oauth2/server.rst"),
    ('client_secret = "7Fjfp0ZBr1KtDRbnfVdmIw"', "app/oauth.py"),
    ('{"access_token": "2YotnFZFEjr1zCsicMWpAA", "refresh_token": "tGzv3JOkF0XG5Qx2TlKWIA"}', "app/client.py"),
    ('consumer_secret = "kd94hf93k423kf44"\ntoken_secret = "pfkkdhi9sl3r4s00"', "app/oauth1.py"),
    ("        'oauth_token=\"kkk9d7dh3k39sjv7\",',", "tests/oauth1/rfc5849/test_parameters.py"),
    ("            oauth_token=hh5s93j4hdidpola&oauth_verifier=hfdp7dh39dks9884", "authlib/oauth1/server.py"),
    ("            token=45ghiukldjahdnhzdauz&token_type_hint=refresh_token", "authlib/oauth2/revocation.py"),
    ('token = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0'
     'IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"', "app/auth.py"),
    ('stripe.api_key = "sk_test_4eC39HqLyjWDarjtT1zdp7dc"', "app/billing.py"),
    # a request's signature is on the wire, not a secret (oauthlib's tests)
    ("    'oauth_consumer_key=\"client_key\", '\n    'oauth_signature=\"hH5BWYVqo7QI4EmPBUUe9owRUUQ%3D\"')",
     "app/oauth1.py"),
    # a keyword argument read after a key's name is not a token; a phrase is not a bearer token
    ("client = Client('client_key', signature_method=SIGNATURE_HMAC_SHA256,", "app/oauth1.py"),
    ("headers={'Authorization': 'Bearer some-token-from-header'}", "app/views.py"),
    # values mashed on the keyboard's home row (requests-oauthlib's docstrings), a class name
    # after a package named for auth (authlib's docs), a bearer value of two words (authlib's tests)
    ("        'oauth_token': 'sdf0o9823sjdfsdf',\n        'oauth_token_secret': '2kjshdfp92i34asdasd',",
     "requests_oauthlib/oauth1_session.py"),
    ('            "access_token": "asdfoiw37850234lkjsdfsdf",', "tests/test_oauth2_session.py"),
    (":class:`~authlib.integrations.httpx_client.AsyncOAuth1Client` and", "docs/client/starlette.rst"),
    ('headers = {"Authorization": "bearer unauthorized_token"}', "tests/flask/test_oauth2/test_client.py"),
    # sample passwords in title case or another script (werkzeug's tests)
    ('assert a.password == "Буквы"', "tests/test_http.py"),
    ("password = 'Swordfish'", "app/fixtures.py"),
    ("SECRET_KEY = '192b9bdd22ab9ed4d12e236c78afcb9a393ec15f71bbf5dc987d54727823bcbf'", "docs/config.rst"),
    ("$ export FLASK_SECRET_KEY=5f352379324c22463451387a0aec5d2f", "docs/config.rst"),
    ('    password="kx@jj5/g",', "doc/build/core/engines.rst"),
    # keyboard walks as sample passwords (laravel's tests, session 11)
    ("'password' => 'asdfqwer1234asdf',", "tests/Support/ConfigurationUrlParserTest.php"),
    ('DB_PASSWORD="qwerty123"', "tests/.env.testing"),
    # an installed wheel's hash manifest (every file of the venv scanned, session 11)
    ("spacy/tokens/token.pyx,sha256=Xq8vT2mWx4Lp9RkQ3nB7cDZq8vT2mWx4Lp9RkQ3nB7c,33403\n"
     "pydantic/_docs_extraction.py,sha256=V8_-TfG1oUHpEThCvNtZjJaPwd-zVod9nB7cDZq8vT2m,4708\n",
     "site-packages/spacy-3.8.18.dist-info/RECORD"),
    # a vendor's name as an e-mail domain, next to Transifex's hashed user names (a .po header)
    ("# d55ee35323c0c760f088259cd23b1b6d_9e8a7d1 <5459f3ae99ecdd5ed0be0220acd46004_1019581>, 2025\n"
     "# Viktor Shytiuk <vic@yandex.ua>, 2026\n", "wagtail/admin/locale/uk/LC_MESSAGES/djangojs.po"),
    # a project id in a badge link beside the vendor's name
    (".. |Codacy-Grade| image:: https://app.codacy.com/project/badge/Grade/3f965571598f44549c7818f29cdcf177",
     "tqdm-4.70.1.dist-info/METADATA"),
    # made-up values in moto (issue 43): CSV column names, a counted UUID placeholder, base64 of
    # `AWS:123456789012-auth-token`, a value spelling its own name, a UUID idempotency token
    ('        report = "user,arn,user_creation_time,password_enabled,access_key_1_active,'
     'access_key_1_last_used_date,access_key_1_last_used_region,access_key_2_last_used_region\\n"',
     "moto/iam/models.py"),
    ('        self.update_token = "1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d"', "moto/networkfirewall/models.py"),
    ('            "authorizationToken": "QVdTOjEyMzQ1Njc4OTAxMi1hdXRoLXRva2Vu",', "tests/test_ecr/test_ecr.py"),
    ('        ApiKeySelectionExpression="api_key_s3l3ction",', "tests/test_apigatewayv2/test_apigatewayv2.py"),
    ('    client_request_token = "ED9F8B6C-85B7-B7E4-38F2A3BEB13C"', "tests/test_secretsmanager/test_server.py"),
    # a docstring's "For example:" shows a header's shape (django-rest-framework's TokenAuthentication
    # form, our own value: DRF's own is allowlisted by value)
    ('    HTTP header, prepended with the string "Token ".  For example:\n\n'
     '        Authorization: Token 7d2e94b1c05f3a86e1d4b7092c3f58ae16b9d04c\n', "rest_framework/authentication.py"),
    # the Amazon SES API Reference's example VerifyDomainIdentity response (moto/ses/responses.py)
    ('        result = {"VerificationToken": "QTKknzFg2J4ygwa+XvHAxUl1hyHoY0gVfZdfjIedHZ0="}', "moto/ses/responses.py"),
    # a passphrase that names itself (jenkinsci/ssh-credentials-plugin's and configuration-as-code's
    # Configuration as Code tests, issue 43)
    ('          - basicSSHUserPrivateKey:\n              id: "userid2"\n'
     '              passphrase: "passphrase-of-userid2"\n', "src/test/resources/jcasc/configuration-as-code.yaml"),
]

# (text, path, rule): the same forms with a value or host that is real-looking: still reported.
STILL_CREDENTIALS = [
    ('"password": "Zq8-vT2m-Wx4L"', "app/fixtures/test.json", "password-assignment"),
    ('FEED_URI = "ftp://user:2%23um25%21M%23JZ@ftp.acme.io/%(name)s.csv"', "tests/test_feedexport.py",
     "database-connection-string-password"),
    ("engine = create_engine('postgresql://app:Zq8vT2mWx4Lp@db.internal:5432/app')", "docs/engines.rst",
     "database-connection-string-password"),
    ("u = 'postgresql://db1.internal:5432,svc:Zq8vT2mWx4Lp@db2.internal:5432/app'", "app/settings.py",
     "database-connection-string-password"),
    ("url = 'https://deploy:Zq8vT2mWx4Lp@git.acme.io/app.git'", "docs/deploy.md", "url-credentials"),
    ("mhu = MultiHostUrl('https://foo.com:123,svc:Zq8vT2mWx4Lp@bar.com/path')", "pkg/networks.py", "url-credentials"),
    ('f.write("machine git.acme.io login ci password Zq8vT2mWx4Lp\\n")', "tests/test_utils.py", "netrc-password"),
    ('apiVersion: v1\nkind: Secret\nmetadata:\n  name: demo-db\ntype: servicebinding.io/postgresql\n'
     'stringData:\n  type: "postgresql"\n  password: "Zq8vT2mWx4Lp"\n', "k8s/db.yml", "kubernetes-secret-manifest"),
    ('conn = "DSN=mydsn;UID=ed;PWD=Zq8+vT2m+Wx4L"', "app/db.py", "sqlserver-connection-string-password"),
    ("model = Model(password='IAmSensitive7!')", "pkg/types.py", "password-assignment"),
    ("headers={'Authorization': 'Basic dXNlcjpUN2ZrUTJ4OXBMbTNaYQ=='}", "app/client.py", "http-authorization"),
    ('client_secret = "8Gkgq1ACs2LuESWodgWenJx"', "app/oauth.py", "generic-api-key"),
    ("        'oauth_token=\"lll0e8ei4l40tkw8\",',", "tests/oauth1/rfc5849/test_parameters.py",
     "generic-keyword-context"),
    ("            oauth_token=ii6t04k5ieiepqmb&oauth_verifier=igeq8ei40elt0995", "authlib/oauth1/server.py",
     "generic-keyword-context"),
    ("            token=56qwjvlmxkbrtoyaepcz&token_type_hint=refresh_token", "authlib/oauth2/revocation.py",
     "generic-keyword-context"),
    ('consumer_secret = "Le05ig04L534lg55x"', "app/oauth1.py", "generic-keyword-context"),
    ('stripe.api_key = "sk_test_5fD40IrMzkXEbskU2aeq8edq"', "app/billing.py", "stripe-test-secret-key"),
    ("    'oauth_consumer_key=\"client_key\", '\n    'oauth_token_secret=\"hH5BWYVqo7QI4EmPBUUe9owRUUQ\"')",
     "app/oauth1.py", "generic-api-key"),
    ("client = Client('client_key', signature_method_x9Fq2ZpQ9wLm3vR7tYbK4,", "app/oauth1.py", "generic-api-key"),
    ("headers={'Authorization': 'Bearer some-tok3n-fr0m-header'}", "app/views.py", "http-authorization"),
    ('assert a.password == "Бук8вы!q"', "tests/test_http.py", "password-comparison"),
    ("        'oauth_token': 'qZ0o9823sjNfWAf',\n        'oauth_token_secret': '2kjqhUfp92i34bYtcmd',",
     "requests_oauthlib/oauth1_session.py", "generic-keyword-context"),
    ('            "access_token": "qwXoiw37850234lkjvPfsVf",', "tests/test_oauth2_session.py", "generic-api-key"),
    (":class:`~authlib.integrations.httpx_client.Zq8vT2mWx4Lp9RkQ3nB7` and", "docs/client/starlette.rst",
     "generic-keyword-context"),
    ('headers = {"Authorization": "bearer unauth0rized_t0ken"}', "tests/flask/test_oauth2/test_client.py",
     "http-authorization"),
    ("password = 'Sw0rdf1sh!'", "app/fixtures.py", "password-assignment"),
    ('RABBITMQ_PASSWORD="t3s7-Zq8vT2m"', "provision.sh", "password-assignment"),
    ("assert x.password == 'Zq8vT2mWx4'", "t/unit/backends/test_redis.py", "password-comparison"),
    ("'password' => 'asdfqwer1234Zq8v',", "tests/Support/ConfigurationUrlParserTest.php", "password-assignment"),
    ("spacy/tokens/token.pyx,sha256=Xq8vT2mWx4Lp9RkQ3nB7cDZq8vT2mWx4Lp9RkQ3nB7c,33403\n"
     "api_token = 'Zq8vT2mWx4Lp9RkQ3nB7cD'\n", "site-packages/spacy/settings.py", "generic-api-key"),
    ("# Yandex key: d55ee35323c0c760f088259cd23b1b6d_9e8a7d1\n", "notes.md", "yandex-keyword"),
    ("curl -H 'X-Api-Key: 3f965571598f44549c7818f29cdcf177' https://app.codacy.com/api/v3/user",
     "docs/ci.md", "codacy-keyword"),
    ('        report = "access_key_1: Zq8vT2mW_x4Lp9RkQ3nB7cD\\n"', "moto/iam/models.py", "generic-api-key"),
    ('        self.update_token = "7f3c9e21-4b8d-4a6e-9c15-2d8b6e0f4a73"', "moto/networkfirewall/models.py",
     "generic-api-key"),
    ('            "authorizationToken": "QVdTOlpxOHZUMm1XeDRMcDlSa1EzbkI3",', "tests/test_ecr/test_ecr.py",
     "generic-api-key"),
    ('        ApiKeySelectionExpression="api_key_Zq8vT2mWx4Lp9Rk",', "tests/test_apigatewayv2/test_apigatewayv2.py",
     "generic-keyword-context"),
    ('    client_request_token = "Zq8vT2mWx4Lp9RkQ3nB7cD"', "tests/test_secretsmanager/test_server.py",
     "generic-api-key"),
    ('    api_token = "ED9F8B6C-85B7-B7E4-38F2A3BEB13C"', "tests/test_secretsmanager/test_server.py",
     "generic-api-key"),
    ('    Clients send the token key in the "Authorization" header:\n\n'
     '        Authorization: Token 7d2e94b1c05f3a86e1d4b7092c3f58ae16b9d04c\n', "rest_framework/authentication.py",
     "http-authorization"),
    ('          - basicSSHUserPrivateKey:\n              id: "userid2"\n'
     '              passphrase: "Zq8v-T2mWx4Lp9"\n', "src/test/resources/jcasc/configuration-as-code.yaml",
     "password-assignment"),
    ('        result = {"VerificationToken": "Zq8vT2mWx4Lp9RkQ3nB7cDh5Jf1Ks6Gt0Ya8Ue2Wi4Q="}', "moto/ses/responses.py",
     "generic-api-key"),
]


@pytest.mark.parametrize("text,path", NOT_CREDENTIALS, ids=[p for _, p in NOT_CREDENTIALS])
def test_real_source_false_positive_is_not_reported(engine, text, path):
    assert _ids(engine, text, path) == []


@pytest.mark.parametrize("text,path,rule", STILL_CREDENTIALS, ids=[r for _, _, r in STILL_CREDENTIALS])
def test_its_real_looking_twin_is_still_reported(engine, text, path, rule):
    assert rule in _ids(engine, text, path)


@pytest.mark.parametrize("path,where", [
    ("t/unit/security/__init__.py", "test"),         # Perl's and celery's top-level t/
    ("funtests/stress/templates.py", "test"),
    ("werkzeug/testsuite/wrappers.py", "test"),      # werkzeug's old test directory
    ("src/t/config.py", "source"),                   # only a top-level t/ is a test directory
])
def test_test_directories(path, where):
    from repoguard.credentials.triage import location
    assert location(path) == where


def test_keyboard_walk_regex_is_the_rules_one():
    """The password rules' sample-password allowlist (rules/generic.toml) and the generic detectors
    (`placeholders.keyboard_walk`) read keyboard walks with one regex."""
    import tomllib

    from repoguard.credentials.rules import rules_dir
    from repoguard.credentials.structural.placeholders import keyboard_walk, keyboard_walk_regex
    doc = tomllib.loads((rules_dir() / "generic.toml").read_text())
    sample = next(a for a in doc["allowlists"] if a["description"].startswith("sample passwords"))
    assert keyboard_walk_regex() in sample["regexes"]
    assert keyboard_walk(b"asdfqwer1234asdf") and keyboard_walk(b"qwerty123") and not keyboard_walk(b"qwZ8vT2m")
