"""`repoguard.toml` → typed, validated config.

The file is parsed with `tomllib`; every value is checked against the dataclasses below, so an
unknown key, a wrong type, a probability outside (0, 1), p ≥ r, an unknown protection level, an
empty path list or a duplicate secret id is an `InputError` whose one line names the file, the
line and the key: `repoguard.toml:14: secret[1].r: must be > p (p = 0.001, r = 0.0001)`.

Sections: `[defaults]` (with `undetected`, the undetected-secret floor), `[levels]`, `[corpus]`, `[[secret]]` (with `[secret.propagate]`), and one
section per later stage (`[scan]`, `[analyzers]`, `[plan]`, `[training]`, `[ledger]`). A stage that needs new
settings adds a field to its section's dataclass here; the parser needs no other change.

(p, r) is the pair of Hush Def. 3.1: an adversary whose prior probability of reconstructing the
secret is ≤ p succeeds with probability ≤ r after seeing the trained model.
"""
from __future__ import annotations

import dataclasses
import math
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from repoguard.core.errors import InputError

CONFIG_FILENAME = "repoguard.toml"


# -- sections -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Protection:
    """A (p, r) pair: prior reconstruction probability p and target posterior bound r, 0 < p < r < 1."""

    p: float
    r: float


# The one place the default (p, r) is written: `[defaults]` when the file sets none, the
# undetected-secret floor's target when `[defaults] undetected` gives none, and every caller that
# needs "the default protection" without a config (Hush Def. 3.1's (p, r); docs/privacy.md).
DEFAULT_PROTECTION = Protection(1e-10, 1e-3)


@dataclass(frozen=True)
class Undetected:
    """`[defaults] undetected`: the undetected-secret floor (docs/privacy.md "Undetected-secret floor").
    A secret nobody declared or detected, living in `k` examples tied to nothing, must get a
    posterior bound ≤ `r` at prior `p` over the whole run (both phases, composed across the
    ledger). `enabled = False` is the explicit opt-out `undetected = "off"`, marked in every
    output. Written `undetected = { k = 1, p = 1e-10, r = 1e-3 }` (p and r default to
    `[defaults]`'s) or `undetected = "off"`."""

    k: int = 1
    p: float = DEFAULT_PROTECTION.p
    r: float = DEFAULT_PROTECTION.r
    enabled: bool = True

    @property
    def account(self) -> str:
        """The ledger's account for this floor: a reserved id no declared secret can take
        (`_SECRET_ID` forbids '@', ':' and '=')."""
        return f"@undetected:k={self.k}"

    def record(self) -> dict:
        """The JSON record every output carries: {"k", "p", "r", "enabled"}."""
        return {"k": self.k, "p": self.p, "r": self.r, "enabled": self.enabled}


def parse_undetected(value: Any, defaults: Protection, where: str = "--undetected") -> Undetected:
    """An `Undetected` from a CLI/TOML value: "off", "on" (the defaults' p, r, k = 1), a dict
    {k, p, r} or a string "k=1,p=1e-10,r=1e-3" (missing keys from `defaults`, k = 1).
    Raises InputError naming `where` for anything else, k < 1, or p, r outside 0 < p < r < 1."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("off", "none", "false"):
            return Undetected(1, defaults.p, defaults.r, enabled=False)
        if text in ("on", "default", "true", ""):
            return Undetected(1, defaults.p, defaults.r)
        try:
            value = {k.strip(): v.strip() for k, v in (part.split("=", 1) for part in text.split(","))}
        except ValueError:
            raise InputError(f"{where}: write \"off\" or k=1,p=1e-10,r=1e-3, not {value!r}") from None
    if not isinstance(value, dict):
        raise InputError(f"{where}: write \"off\" or a table {{ k = 1, p = 1e-10, r = 1e-3 }}, not {value!r}")
    unknown = sorted(set(value) - {"k", "p", "r"})
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r} (known: k, p, r)")
    try:
        k = int(value.get("k", 1))
        p = float(value.get("p", defaults.p))
        r = float(value.get("r", defaults.r))
    except (TypeError, ValueError):
        raise InputError(f"{where}: k must be an integer and p, r numbers, not {value!r}") from None
    if isinstance(value.get("k"), float) and value["k"] != k:
        raise InputError(f"{where}: k must be an integer, not {value['k']!r}")
    if k < 1:
        raise InputError(f"{where}: k must be ≥ 1 (examples an undetected secret lives in), not {k}")
    if not (0 < p < r < 1):
        raise InputError(f"{where}: need 0 < p < r < 1, not p = {p!r}, r = {r!r}")
    return Undetected(k, p, r)


@dataclass(frozen=True)
class Propagate:
    """Which analyzers may tie examples outside a secret's own paths to it.

    `imports`: import-graph depth (0 = off; 1 = direct importers). The others switch an analyzer
    on or off for this secret."""

    imports: int = 1
    owners: bool = True
    authors: bool = False
    cochange: bool = False
    codenames: bool = True


@dataclass(frozen=True)
class SecretConfig:
    """One declared secret. `p`/`r` are resolved from `level` or `[defaults]` when not given."""

    id: str
    p: float
    r: float
    description: str = ""
    paths: tuple[str, ...] = ()
    owners: tuple[str, ...] = ()
    codenames: tuple[str, ...] = ()
    level: str | None = None
    propagate: Propagate = Propagate()

    @property
    def protection(self) -> Protection:
        """This secret's resolved (p, r) as a `Protection`."""
        return Protection(self.p, self.r)


@dataclass(frozen=True)
class CorpusConfig:
    """How files become examples (see corpus.py)."""

    exclude: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    max_file_bytes: int = 1_000_000
    example_max_chars: int = 4000


@dataclass(frozen=True)
class ScanConfig:
    """Credential scanning (credentials/)."""

    rules: tuple[str, ...] = ()          # extra rule files (gitleaks TOML)
    use_default_rules: bool = True
    max_file_bytes: int = 50_000_000
    exclude: tuple[str, ...] = ()
    baseline: str = ""

    def rule_files(self, repo_root: str | Path) -> list[str]:
        """`rules` as paths to load: a relative entry is relative to the repository root
        `repo_root` (wherever the config file or the working directory is), so `scan`, `analyze`,
        the redactor and the hook load the same files; an absolute entry is kept."""
        return [str(Path(repo_root) / r) for r in self.rules]


@dataclass(frozen=True)
class AnalyzersConfig:
    """Evidence sources (analyzers/). Co-change thresholds follow code-maat's defaults."""

    enabled: tuple[str, ...] = ("declared", "imports", "ownership", "cochange", "codenames", "credentials")
    cochange_max_changeset: int = 30
    cochange_min_revs: int = 5
    cochange_min_shared_revs: int = 5
    cochange_min_coupling: float = 0.30
    codename_stoplist: tuple[str, ...] = ()
    # A commit message ties only the files of a commit of at most this many files (codenames.py).
    codename_max_changeset: int = 10
    main_developer_min_share: float = 0.5


@dataclass(frozen=True)
class PlanConfig:
    """Defaults for `repoguard plan` (CLI flags override)."""

    batch_size: int = 64
    steps: int = 200
    clip_norm: float = 1.0
    c: float = 0.0                       # 0 = sweep and pick by the stated rule
    cap: str = "kl"                      # kl (Hush eq. 1) or gdp (SecPE eq. 6)
    accountant: str = "best"             # best | kl | renyi
    adjacency: str = "zero-out"          # zero-out | replace
    holdout_fraction: float = 0.05       # share of files held out for evaluation (0 = none)
    holdout_min_files: int = 8           # at least this many (≤ a quarter of the files)
    holdout_salt: str = "repoguard-holdout-v1"
    # LP objective (planning.value): "examples" maximises Σw (Hush eq. 1), "code-tokens" Σ v·w with
    # v an example's code tokens (prose and data files count a quarter)
    objective: str = "examples"


@dataclass(frozen=True)
class TrainingConfig:
    """Defaults for `repoguard train` (CLI flags override)."""

    model: str = ""                      # local HF checkpoint dir; empty = embedded tiny model
    max_length: int = 256
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    lora_targets: tuple[str, ...] = ()   # empty = detected per architecture
    learning_rate: float = 1e-3
    micro_batch_size: int = 8            # 0 or "auto": probed from free GPU memory (CPU: 8)
    checkpoint_every: int = 50
    seed: int = 0
    precision: str = "auto"              # auto | fp32 | bf16 (training.precision)
    gradient_checkpointing: bool = False # recompute each layer in backward (training.memory)
    per_example_grads: str = "auto"      # auto | opacus | hooks (training.dp_step, training.lora_grads)
    eval_every: int = 50                 # held-out evaluation every N steps (and at 0 and the end)
    eval_max_examples: int = 48          # per evaluation slice
    eval_max_lines: int = 16             # completed lines per slice (public, secret-tied)
    # Two-phase fine-tuning [JFT §3] (`training/phases.py`): 2 = a public phase, then the plan.
    phases: int = 1
    phase1: str = "clear"                # "clear" (no noise) or "noised" (σ₁ for the undetected floor)
    phase1_steps: int = 0                # 0 = the plan's T
    phase1_lr: float = 0.0               # 0 = learning_rate
    phase1_batch_size: float = 0.0       # expected batch size of phase 1; 0 = the plan's B
    phase1_k: int = 1                    # noised: an undetected secret confined to k public examples


@dataclass(frozen=True)
class LedgerConfig:
    """`[ledger]`. `acknowledged_exposures`: secrets whose exposure by an earlier run's public
    (clear) phase the user accepts (`accounting/clear_exposures.py`): "SECRET" for every run, or
    "SECRET@RUN" for one run. Until then `plan` and `run` refuse to plan for them."""

    acknowledged_exposures: tuple[str, ...] = ()


@dataclass(frozen=True)
class Config:
    """The whole resolved config. `path` is None when defaults are used (no file).

    `file_keys` holds the dotted keys the file itself set ("plan.steps", "defaults.undetected",
    …; a value equal to the built-in default is still "set in the file"), so the resolved
    settings (`core.settings`) can say where each value came from without parsing the file again.
    It takes no part in equality or `to_dict`."""

    path: Path | None
    defaults: Protection = DEFAULT_PROTECTION
    undetected: Undetected = Undetected()
    levels: Mapping[str, Protection] = field(default_factory=dict)
    corpus: CorpusConfig = CorpusConfig()
    secrets: tuple[SecretConfig, ...] = ()
    scan: ScanConfig = ScanConfig()
    analyzers: AnalyzersConfig = AnalyzersConfig()
    plan: PlanConfig = PlanConfig()
    training: TrainingConfig = TrainingConfig()
    ledger: LedgerConfig = LedgerConfig()
    file_keys: frozenset[str] = field(default=frozenset(), compare=False)

    def set_in_file(self, key: str) -> bool:
        """Whether the config file set the dotted `key` ("plan.batch_size", "defaults.p")."""
        return key in self.file_keys

    def secret(self, secret_id: str) -> SecretConfig:
        """The declared secret with id `secret_id`. Raises KeyError when none has it."""
        for s in self.secrets:
            if s.id == secret_id:
                return s
        raise KeyError(secret_id)

    def scan_rule_files(self, repo_root: str | Path) -> list[str]:
        """`[scan] rules` resolved against `repo_root` (`ScanConfig.rule_files`)."""
        return self.scan.rule_files(repo_root)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the resolved config (what `config validate --json` prints)."""
        d = dataclasses.asdict(self)
        d.pop("file_keys", None)
        d["path"] = str(self.path) if self.path else None
        d["levels"] = {k: dataclasses.asdict(v) for k, v in self.levels.items()}
        return d


_SECTIONS: dict[str, type] = {
    "corpus": CorpusConfig,
    "scan": ScanConfig,
    "analyzers": AnalyzersConfig,
    "plan": PlanConfig,
    "training": TrainingConfig,
    "ledger": LedgerConfig,
}
_TOP_KEYS = {"defaults", "levels", "secret", *_SECTIONS}
_SECRET_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# "SECRET" or "SECRET@RUN": declared ids, credential ids ("credential:rule:hash"), run ids
_ACK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*(@[A-Za-z0-9][A-Za-z0-9._:-]*)?$")


# -- loading --------------------------------------------------------------------------------------
def default_config_path(repo_root: str | Path) -> Path:
    """Where a repository's config lives when `--config` is not given: `repoguard.toml` at its root."""
    return Path(repo_root) / CONFIG_FILENAME


def load_config(path: str | Path | None, *, required: bool = True) -> Config:
    """Read and validate `path`. With `required=False` a missing file gives the defaults.

    Raises InputError (one line: `FILE:LINE: key: problem`) for any invalid content.
    """
    if path is None:
        return Config(path=None)
    p = Path(path)
    if not p.exists():
        if required:
            raise InputError(f"{p}: config file not found")
        return Config(path=None)
    if p.is_dir():
        p = p / CONFIG_FILENAME
        if not p.exists():
            raise InputError(f"{p}: config file not found")
    try:
        raw_bytes = p.read_bytes()
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{p}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read ({exc.strerror})") from None
    return parse_config(text, path=p)


def parse_config(text: str, *, path: Path | None = None) -> Config:
    """Validate TOML `text`; `path` is used in messages only."""
    where = str(path) if path else "<config>"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib says "... (at line 3, column 7)"; put the line up front like every other error.
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column \d+\)", msg)
        line = f":{m.group(1)}" if m else ""
        raise InputError(f"{where}{line}: invalid TOML: {re.sub(r' [(]at line.*[)]', '', msg)}") from None
    return _Validator(text, where, path).config(data)


class _Validator:
    def __init__(self, text: str, where: str, path: Path | None) -> None:
        self.lines = text.split("\n")
        self.where = where
        self.path = path

    # Locate "key =" inside table `table` (the `index`-th element of an array of tables, or a
    # sub-table of it such as secret.propagate) for error messages.
    def _line(self, table: str | None, key: str | None, index: int | None = None) -> int | None:
        header = re.compile(r"^\s*\[(\[)?\s*([A-Za-z0-9_.\-\"' ]+?)\s*\]\]?\s*(#.*)?$")
        counts: dict[str, int] = {}
        current: tuple[str, int | None] | None = None
        first_header = None
        for n, line in enumerate(self.lines, 1):
            m = header.match(line)
            if m:
                name = m.group(2).replace('"', "").replace("'", "")
                if m.group(1):
                    counts[name] = counts.get(name, -1) + 1
                    current = (name, counts[name])
                else:
                    current = (name, counts.get(name.split(".")[0]))
                if first_header is None and current[0] == table and (index is None or current[1] == index):
                    first_header = n
                continue
            if key is None:
                continue
            here = current is None if table is None else (
                current is not None and current[0] == table and (index is None or current[1] == index))
            if here and re.match(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=", line):
                return n
        return first_header

    def fail(self, name: str, problem: str, *, table: str | None = None, key: str | None = None,
             index: int | None = None) -> typing.NoReturn:
        line = self._line(table, key, index)
        loc = f"{self.where}:{line}" if line else self.where
        raise InputError(f"{loc}: {name}: {problem}")

    # -- typed coercion ---------------------------------------------------------------------------
    def coerce(self, value: Any, tp: Any, name: str, table: str | None, key: str, index: int | None) -> Any:
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin in (typing.Union, types.UnionType):
            non_none = [a for a in args if a is not type(None)]
            return self.coerce(value, non_none[0], name, table, key, index)
        if tp is bool:
            if not isinstance(value, bool):
                self.fail(name, f"must be true or false, not {value!r}", table=table, key=key, index=index)
            return value
        if tp is int:
            if isinstance(value, bool) or not isinstance(value, int):
                self.fail(name, f"must be an integer, not {value!r}", table=table, key=key, index=index)
            return value
        if tp is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                self.fail(name, f"must be a number, not {value!r}", table=table, key=key, index=index)
            if not math.isfinite(value):
                self.fail(name, f"must be finite, not {value!r}", table=table, key=key, index=index)
            return float(value)
        if tp is str:
            if not isinstance(value, str):
                self.fail(name, f"must be a string, not {value!r}", table=table, key=key, index=index)
            return value
        if origin is tuple:
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                self.fail(name, "must be a list of strings", table=table, key=key, index=index)
            return tuple(value)
        raise TypeError(f"unsupported config type {tp}")  # programming error, not user input

    def section(self, cls: type, raw: Any, table: str, *, index: int | None = None,
                prefix: str | None = None, skip: tuple[str, ...] = ()) -> dict[str, Any]:
        prefix = prefix or table
        if not isinstance(raw, dict):
            self.fail(prefix, "must be a table", table=table, index=index)
        hints = typing.get_type_hints(cls)
        names = {f.name for f in dataclasses.fields(cls)} - set(skip)
        out: dict[str, Any] = {}
        for key, value in raw.items():
            if key in skip:
                continue
            if key not in names:
                known = ", ".join(sorted(names))
                self.fail(f"{prefix}.{key}", f"unknown key (known: {known})", table=table, key=key, index=index)
            if table == "training" and key == "micro_batch_size" and value == "auto":
                value = 0
            out[key] = self.coerce(value, hints[key], f"{prefix}.{key}", table, key, index)
        return out

    def protection(self, raw: Mapping[str, Any], name: str, table: str, index: int | None = None) -> Protection:
        vals = self.section(Protection, raw, table, index=index, prefix=name)
        for k in ("p", "r"):
            if k not in vals:
                self.fail(f"{name}.{k}", "missing", table=table, index=index)
        self.check_pr(vals["p"], vals["r"], name, table, index)
        return Protection(vals["p"], vals["r"])

    def check_pr(self, p: float, r: float, name: str, table: str | None, index: int | None) -> None:
        for k, v in (("p", p), ("r", r)):
            if not 0.0 < v < 1.0:
                self.fail(f"{name}.{k}", f"must be strictly between 0 and 1, not {v!r}", table=table, key=k, index=index)
        if p >= r:
            self.fail(f"{name}.r", f"must be greater than p (p = {p!r}, r = {r!r}): the bound is on the "
                      "posterior, which cannot be below the prior", table=table, key="r", index=index)

    # -- whole file -----------------------------------------------------------------------------
    def config(self, data: dict[str, Any]) -> Config:
        for key in data:
            if key not in _TOP_KEYS:
                self.fail(key, f"unknown section (known: {', '.join(sorted(_TOP_KEYS))})", table=key, key=key)
        defaults = Config(path=None).defaults
        raw_undetected = None
        if "defaults" in data:
            raw = data["defaults"]
            if isinstance(raw, dict) and "undetected" in raw:
                raw = dict(raw)
                raw_undetected = raw.pop("undetected")
            if raw or raw_undetected is None:      # `[defaults] undetected = "off"` alone keeps p, r
                defaults = self.protection(raw, "defaults", "defaults")
        undetected = Undetected(1, defaults.p, defaults.r)
        if raw_undetected is not None:
            try:
                undetected = parse_undetected(raw_undetected, defaults, where="defaults.undetected")
            except InputError as exc:
                self.fail("defaults.undetected", str(exc).split(": ", 1)[-1], table="defaults", key="undetected")
        levels: dict[str, Protection] = {}
        raw_levels = data.get("levels", {})
        if not isinstance(raw_levels, dict):
            self.fail("levels", "must be a table", table="levels")
        for name, raw in raw_levels.items():
            if not isinstance(raw, dict):
                self.fail(f"levels.{name}", "must be a table like { p = 1e-10, r = 2e-4 }", table="levels", key=name)
            levels[name] = self.protection(raw, f"levels.{name}", "levels")
        sections = {k: cls(**self.section(cls, data[k], k)) for k, cls in _SECTIONS.items() if k in data}
        for k, s in sections.items():
            self._check_section(k, s)
        secrets = self.secrets(data.get("secret", []), defaults, levels)
        file_keys = frozenset(f"{k}.{key}" for k in ("defaults", *_SECTIONS) if isinstance(data.get(k), dict)
                              for key in data[k])
        return Config(path=self.path, defaults=defaults, undetected=undetected, levels=levels, secrets=secrets,
                      file_keys=file_keys, **sections)

    def _check_section(self, name: str, s: Any) -> None:
        positive = {
            "corpus": ("max_file_bytes", "example_max_chars"),
            "scan": ("max_file_bytes",),
            "plan": ("batch_size", "steps", "clip_norm"),
            "training": ("max_length", "lora_r", "checkpoint_every", "eval_max_examples"),
            "analyzers": ("codename_max_changeset",),
        }.get(name, ())
        for k in positive:
            if getattr(s, k) <= 0:
                self.fail(f"{name}.{k}", f"must be > 0, not {getattr(s, k)!r}", table=name, key=k)
        choices = {
            ("plan", "cap"): ("kl", "gdp"),
            ("plan", "objective"): ("examples", "code-tokens"),
            ("plan", "accountant"): ("best", "kl", "renyi"),
            ("plan", "adjacency"): ("zero-out", "replace"),
            ("training", "precision"): ("auto", "fp32", "bf16"),
            ("training", "per_example_grads"): ("auto", "opacus", "hooks"),
            ("training", "phases"): (1, 2),
            ("training", "phase1"): ("clear", "noised"),
        }
        for (sec, k), allowed in choices.items():
            if sec == name and getattr(s, k) not in allowed:
                self.fail(f"{name}.{k}", f"must be one of {', '.join(map(str, allowed))}, not {getattr(s, k)!r}", table=name, key=k)
        if name == "analyzers":
            if not 0.0 <= s.cochange_min_coupling <= 1.0:
                self.fail("analyzers.cochange_min_coupling", "must be between 0 and 1", table=name,
                          key="cochange_min_coupling")
        if name == "plan" and s.c < 0:
            self.fail("plan.c", "must be ≥ 0 (0 = sweep)", table=name, key="c")
        if name == "plan" and not 0 <= s.holdout_fraction <= 0.5:
            self.fail("plan.holdout_fraction", "must be between 0 and 0.5", table=name, key="holdout_fraction")
        for k in ("eval_every", "eval_max_lines", "micro_batch_size", "phase1_steps", "phase1_lr",
                  "phase1_batch_size") if name == "training" else ():
            if getattr(s, k) < 0:
                self.fail(f"training.{k}", "must be ≥ 0", table=name, key=k)
        if name == "training" and s.phase1_k < 1:
            self.fail("training.phase1_k", "must be ≥ 1", table=name, key="phase1_k")
        for i, v in enumerate(s.acknowledged_exposures if name == "ledger" else ()):
            if not _ACK.match(v):
                self.fail(f"ledger.acknowledged_exposures[{i}]", f'{v!r} is not "SECRET" or "SECRET@RUN" '
                          "(a secret id, optionally @ the run id that exposed it)", table=name,
                          key="acknowledged_exposures")
        if name == "training" and s.gradient_checkpointing and s.per_example_grads == "opacus":
            self.fail("training.per_example_grads", "\"opacus\" gives no per-example gradients with "
                      "gradient_checkpointing = true; use \"hooks\" or \"auto\"", table=name, key="per_example_grads")
        if name == "plan" and s.holdout_min_files < 0:
            self.fail("plan.holdout_min_files", "must be ≥ 0", table=name, key="holdout_min_files")

    def secrets(self, raw: Any, defaults: Protection, levels: Mapping[str, Protection]) -> tuple[SecretConfig, ...]:
        if not isinstance(raw, list):
            self.fail("secret", "must be an array of tables: write [[secret]]", table="secret")
        out: list[SecretConfig] = []
        seen: set[str] = set()
        for i, item in enumerate(raw):
            name = f"secret[{i}]"
            if not isinstance(item, dict):
                self.fail(name, "must be a table", table="secret", index=i)
            vals = self.section(SecretConfig, item, "secret", index=i, prefix=name, skip=("propagate",))
            sid = vals.get("id")
            if not sid:
                self.fail(f"{name}.id", "missing", table="secret", index=i)
            name = f"secret[{i}] ({sid})"
            if not _SECRET_ID.match(sid):
                self.fail(f"{name}.id", "use letters, digits, '.', '_' and '-' only", table="secret", key="id", index=i)
            if sid in seen:
                self.fail(f"{name}.id", "duplicate secret id", table="secret", key="id", index=i)
            seen.add(sid)
            for k in ("paths", "owners", "codenames"):
                if k in vals and (not vals[k] or any(not v.strip() for v in vals[k])):
                    self.fail(f"{name}.{k}", "must not be empty (omit the key instead)", table="secret", key=k, index=i)
            if not any(vals.get(k) for k in ("paths", "owners", "codenames")):
                self.fail(name, "declares nothing to find it by: give paths, owners or codenames",
                          table="secret", index=i)
            level = vals.get("level")
            if level is not None:
                if level not in levels:
                    known = ", ".join(sorted(levels)) or "none defined in [levels]"
                    self.fail(f"{name}.level", f"unknown level {level!r} (known: {known})", table="secret", key="level", index=i)
                if "p" in vals or "r" in vals:
                    self.fail(f"{name}.level", "give either level or p/r, not both", table="secret", key="level", index=i)
                prot = levels[level]
            else:
                prot = Protection(vals.get("p", defaults.p), vals.get("r", defaults.r))
                self.check_pr(prot.p, prot.r, name, "secret", i)
            vals["p"], vals["r"] = prot.p, prot.r
            prop = Propagate()
            if "propagate" in item:
                pv = self.section(Propagate, item["propagate"], "secret.propagate", index=i, prefix=f"{name}.propagate")
                if pv.get("imports", 0) < 0:
                    self.fail(f"{name}.propagate.imports", "must be ≥ 0", table="secret.propagate", key="imports", index=i)
                prop = Propagate(**pv)
            vals["propagate"] = prop
            out.append(SecretConfig(**vals))
        return tuple(out)
