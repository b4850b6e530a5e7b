"""A deterministic evaluation set for the vendor-keyword layer and issue 27's other forms, generated
from repoguard's own table (`rules/vendor_keywords.toml`) and our own templates: every value is
random (seeded), never a real credential.

`cases(seed)` → [(text, path, label, family)], label 1 for a credential, 0 for a negative:
- kw-log, kw-prose, kw-config, kw-code: a value of a documented row's shape (or, for a name-only
  row, a random 32/40-character key) next to the vendor's name, in log lines, prose, configs, code;
- neg-wrong-length / neg-wrong-charset: a documented vendor's name (rows that veto) next to a random value of the
  wrong length (outside the documented range by 5–12) or with characters outside its alphabet;
- neg-far: the vendor's name three lines away from a value under an identifier's name;
- neg-placeholder, neg-framework, neg-conn-placeholder, neg-jenkins: placeholders (`YOUR_…`,
  `xxxx`, Slack's T00000000 webhook), anti-forgery tokens (csrfmiddlewaretoken, Laravel `_token`),
  connection strings with sample passwords, Jenkins values that fail hudson.util.Secret's layout;
- conn-uri, jenkins: connection strings with random passwords over many schemes, valid
  `{AQAAAB…}` values in credentials.xml.
"""
from __future__ import annotations

import base64
import random
import string

from repoguard.credentials.vendor_table import default_vendor_table

DIGITS, LOWER, UPPER = string.digits, string.ascii_lowercase, string.ascii_uppercase

LOG = ["[DEBUG] Using {V} Key={v}", "2026-01-02 03:04:05,678 INFO {a} key: {v}", "{a} token - '{v}'",
       "WARN  [{a}] credential {v} rejected, retrying", "level=debug msg=\"{a} client\" token={v}"]
PROSE = ["Your {V} API key is {v}", "- {V} (token): `{v}`", "here is the {a} secret {v} for the demo account"]
CONFIG = [("[{a}]\napi_key = {v}\n", "settings.ini"), ("{a}:\n  token: {v}\n", "config.yaml"),
          ('{{"{a}": {{"secret": "{v}"}}}}\n', "config.json"), ("# {V}\nexport API_KEY={v}\n", "env.sh")]
CODE = [("client = {V}Client(\"{v}\")  # {a}\n", "app.py"), ("// {V}\nconst apiKey = '{v}';\n", "app.js")]
FILLER = ["import os", "def handler(event):", "    return None", "retries = 3", "timeout = 30"]
SCHEMES = ["postgresql", "mysql", "mongodb+srv", "redis", "amqp", "mssql", "kafka", "sftp", "smtp",
           "ldaps", "influxdb", "cassandra", "couchbase", "neo4j"]


def _chars(cls: str) -> str:
    """The characters of a regex class body such as `0-9A-Za-z+/`."""
    out, i = [], 0
    while i < len(cls):
        if i + 2 < len(cls) and cls[i + 1] == "-":
            out += [chr(c) for c in range(ord(cls[i]), ord(cls[i + 2]) + 1)]
            i += 3
        else:
            out.append(cls[i])
            i += 1
    return "".join(dict.fromkeys(out))


def _random(rng: random.Random, chars: str, n: int) -> str:
    """n random characters of `chars`, with a digit and a letter when the alphabet has both."""
    while True:
        v = "".join(rng.choice(chars) for _ in range(n))
        has_alpha = any(c.isalpha() for c in chars)
        if (any(c.isdigit() for c in v) or not any(c.isdigit() for c in chars)) and \
                (any(c.isalpha() for c in v) or not has_alpha) and v[0].isalnum() and v[-1].isalnum():
            return v


HEX = "0123456789abcdef"


def _uuid(rng: random.Random) -> str:
    h = _random(rng, HEX, 32)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# Rows whose class allows a separator: the documented structure, not a random mix of the class.
_STRUCTURED = {
    "mailgun-v2": lambda rng: f"{_random(rng, HEX, 32)}-{_random(rng, HEX, 8)}-{_random(rng, HEX, 8)}",
    "mailchimp": lambda rng: f"{_random(rng, HEX, 32)}-us{rng.randint(1, 21)}",
    "deepl": lambda rng: _uuid(rng) + rng.choice(["", ":fx"]),
    "ghost-admin": lambda rng: f"{_random(rng, HEX, 24)}:{_random(rng, HEX, 64)}",
    "riot": lambda rng: "RGAPI-" + _uuid(rng),
}


def _value(rng: random.Random, row, n: int | None = None) -> str:
    """A random value of the row's shape (of length `n` after the prefix when given), drawn
    again while it looks hand-typed (`tokens.random_token`): a generated key would not."""
    from repoguard.credentials.structural.tokens import random_token
    if row.alphabet == "uuid":
        return _uuid(rng)
    if n is None and row.id in _STRUCTURED:
        return _STRUCTURED[row.id](rng)
    for _ in range(20):
        if row.generic:
            v = _random(rng, DIGITS + LOWER + UPPER, rng.choice([32, 40]))
        else:
            v = row.prefix + _random(rng, _chars(row.cls), n if n is not None else rng.randint(row.lo, row.hi))
        core = v[len(row.prefix):]
        if len(core) < 16 or random_token(core.encode()):
            return v
    return v


def _fill(tpl: str, alias: str, v: str) -> str:
    return tpl.format(a=alias, V=alias.title(), v=v)


def hudson_secret(rng: random.Random, *, valid: bool = True) -> str:
    """A random `{AQAAAB…}` value with hudson.util.Secret's layout (or a broken one)."""
    data_len = 16 * rng.randint(1, 4)
    raw = bytes([1]) + (16).to_bytes(4, "big") + (data_len + (0 if valid else 3)).to_bytes(4, "big")
    raw += bytes(rng.getrandbits(8) for _ in range(16 + data_len))
    return "{" + base64.b64encode(raw).decode() + "}"


def cases(seed: int = 27) -> list[tuple[str, str, int, str]]:
    rng = random.Random(seed)
    rows = default_vendor_table()
    out: list[tuple[str, str, int, str]] = []
    documented = [r for r in rows if not r.generic]
    named = [r for r in rows if r.generic]
    for row in documented:
        alias = rng.choice(row.aliases)
        out.append((_fill(rng.choice(LOG), alias, _value(rng, row)), "logs/app.log", 1, "kw-log"))
        out.append((_fill(rng.choice(PROSE), alias, _value(rng, row)), "notes.md", 1, "kw-prose"))
        tpl, path = rng.choice(CONFIG + CODE)
        out.append((_fill(tpl, alias, _value(rng, row)), path, 1, "kw-config" if (tpl, path) in CONFIG else "kw-code"))
        chars = _chars(row.cls)
        # `veto = false`: another shape may still be this vendor's secret, so no wrong-shape negative;
        # `veto = "length"`: another alphabet may be, so only a wrong-length one
        if row.veto:
            if row.alphabet != "uuid" and (rng.random() < 0.6 or chars == DIGITS + LOWER + UPPER
                                           or row.veto == "length"):
                n = rng.choice([max(8, row.lo - rng.randint(5, 9)), row.hi + rng.randint(6, 12)])
                v, fam = _value(rng, row, n), "neg-wrong-length"
            else:
                v = list(_value(rng, row))
                other = "".join(c for c in DIGITS + LOWER + UPPER + "~." if c not in chars) or "~."
                for k in rng.sample(range(len(row.prefix) + 1, len(v) - 1), max(3, len(v) // 6)):
                    v[k] = rng.choice(other)
                v, fam = "".join(v), "neg-wrong-charset"
            out.append((_fill(rng.choice(LOG[:3] + PROSE[:1]), alias, v), "logs/app.log", 0, fam))
        if rng.random() < 0.3:
            filler = "\n".join(rng.sample(FILLER, 3))
            out.append((f"# {alias} integration\n{filler}\nrequest_id = \"{_value(rng, row)}\"\n", "app.py", 0, "neg-far"))
    for row in rng.sample(named, 200):
        alias = rng.choice(row.aliases)
        tpl, path = rng.choice([(t, "logs/app.log") for t in LOG] + CONFIG)
        out.append((_fill(tpl, alias, _value(rng, row)), path, 1, "kw-named"))
    for row in rng.sample(rows, 80):  # placeholders next to any vendor's name
        alias = rng.choice(row.aliases)
        ph = rng.choice([f"YOUR_{alias.upper().replace(' ', '_').replace('.', '_')}_API_KEY", "x" * 32,
                         f"<your-{alias}-token>", "${" + alias.upper().replace(" ", "_") + "_TOKEN}",
                         "XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX", "0000000000000000000000000000000000000000"])
        out.append((_fill(rng.choice(LOG + PROSE), alias, ph), "docs/setup.md", 0, "neg-placeholder"))
    for _ in range(20):
        tok = _random(rng, DIGITS + LOWER + UPPER, rng.choice([32, 64]))
        out.append((rng.choice([
            f'response = self.client.post(url, {{"csrfmiddlewaretoken": "{tok}", "title": "x"}})',
            f'<input type="hidden" name="_token" value="{tok}">',
            f'headers = {{"X-CSRFToken": "{tok}"}}',
            f'<input name="authenticity_token" type="hidden" value="{tok}" />',
            f'<input name="__RequestVerificationToken" type="hidden" value="{tok}" />']),
            "tests/test_views.py", 0, "neg-framework"))
        out.append(("WAGTAILADMIN_NOTIFICATION_URL = \"https://hooks.slack.com/services/T00000000/B00000000/"
                    + "X" * 24 + "\"\n", "wagtail/settings.py", 0, "neg-placeholder"))
    for _ in range(40):
        scheme = rng.choice(SCHEMES)
        out.append((f'URL = "{scheme}://svc:{_random(rng, DIGITS + LOWER + UPPER, 14)}@db.internal:5432/app"\n',
                    "settings.py", 1, "conn-uri"))
        pw = rng.choice(["YOUR_PASSWORD", "your_password", "mypassword", "p@ssw0rd", "<password>",
                         "${DB_PASSWORD}", "changeme", "xxxxxxxx"])
        out.append((f'URL = "{scheme}://svc:{pw}@db.internal:5432/app"\n', "settings.py", 0, "neg-conn-placeholder"))
    for _ in range(20):
        tag = rng.choice(["password", "secret", "passphrase", "privateKey", "apiToken"])
        out.append((f"<com.cloudbees.plugins.credentials.impl.UsernamePasswordCredentialsImpl>\n"
                    f"  <id>deploy</id>\n  <{tag}>{hudson_secret(rng)}</{tag}>\n</x>\n",
                    "jenkins/credentials.xml", 1, "jenkins"))
        out.append((rng.choice([f"<{tag}>{hudson_secret(rng, valid=False)}</{tag}>\n",
                                f"<{tag}>${{JENKINS_PASSWORD}}</{tag}>\n",
                                f"<{tag}>{{AQAAABAAAAAQ}}</{tag}>\n"]),
                    "jenkins/credentials.xml", 0, "neg-jenkins"))
    return out


def measure(scan, seed: int = 27) -> dict[str, list[int]]:
    """family → [cases, hits] for `scan(data, path) -> findings`."""
    by: dict[str, list[int]] = {}
    for text, path, label, fam in cases(seed):
        row = by.setdefault(fam, [0, 0])
        row[0] += 1
        row[1] += bool(scan(text.encode(), path))
    return by


def summary(by: dict[str, list[int]]) -> tuple[float, float]:
    """(recall, false-positive rate) over the positive and the `neg-` families."""
    pos = [v for k, v in by.items() if not k.startswith("neg-")]
    neg = [v for k, v in by.items() if k.startswith("neg-")]
    return (sum(h for _, h in pos) / sum(n for n, _ in pos), sum(h for _, h in neg) / sum(n for n, _ in neg))


if __name__ == "__main__":  # python tests/vendor_cases.py: the table below, for docs/results.md
    from repoguard.credentials.engine import Engine
    from repoguard.credentials.rules import load_rules

    by = measure(Engine.build(load_rules()).scan)
    for fam, (n, h) in sorted(by.items()):
        print(f"{fam:22s} {n:5d} {h / n:6.3f}")
    r, f = summary(by)
    print(f"recall {r:.3f}  fp rate {f:.3f}  ({sum(n for n, _ in by.values())} cases)")
