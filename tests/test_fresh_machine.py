"""What a fresh machine relies on (issue 25): a lock that pins every distribution the README's
commands install, an intended top level, and library warnings kept out of a user's stderr."""
from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import warnings
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP_LEVEL = {".ci", ".gitignore", ".pre-commit-hooks.yaml", "CHANGELOG.md", "README.md", "bench", "constraints.txt",
             "docs", "fixtures", "mkdocs.yml", "pyproject.toml", "repoguard", "rules", "tests"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _lock() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").split("\n"):
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)", line)
        if m:
            pins[_norm(m.group(1))] = m.group(2)
    return pins


def test_repository_root_holds_only_the_intended_top_level():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    top = {p.split("/", 1)[0] for p in files.decode().split("\0") if p}
    assert top - TOP_LEVEL == set(), f"stray files at the repository root: {sorted(top - TOP_LEVEL)}"


def test_the_lock_pins_every_installed_distribution():
    """Every distribution that `repoguard[dev]` needs, transitively, is pinned in constraints.txt,
    and (unless this is the RG_UNPINNED CI mode) installed at exactly the pinned version."""
    lock = _lock()
    seen, todo, missing, wrong = set(), ["repoguard"], [], []
    while todo:
        name = todo.pop()
        if _norm(name) in seen:
            continue
        seen.add(_norm(name))
        dist = metadata.distribution(name)
        for req in dist.requires or []:
            m = re.match(r"^([A-Za-z0-9_.\-]+)", req)
            marker = req.split(";", 1)[1] if ";" in req else ""
            extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
            if extra and not (name == "repoguard" and extra.group(1) == "dev"):
                continue
            try:
                metadata.distribution(m.group(1))
            except metadata.PackageNotFoundError:
                continue           # an environment marker left it out on this platform
            todo.append(m.group(1))
    for name in sorted(seen - {"repoguard"}):
        if name not in lock:
            missing.append(name)
        elif os.environ.get("RG_UNPINNED") != "1":
            have = metadata.version(name).split("+")[0]
            if have != lock[name]:
                wrong.append(f"{name} {have} (lock {lock[name]})")
    assert not missing, f"not pinned in constraints.txt (run `bash .ci/lock`): {missing}"
    assert not wrong, f"installed versions differ from the lock: {wrong}"
    assert lock["torch"] == "2.13.0" and lock["tree-sitter"] == "0.21.3"


def test_library_warnings_are_silenced_by_default_and_shown_with_vv(monkeypatch):
    from repoguard import cli

    monkeypatch.setattr(sys, "warnoptions", [])
    for verbose, shown in ((0, False), (1, False), (2, True)):
        with warnings.catch_warnings(record=True) as got:
            warnings.resetwarnings()
            cli._configure_logging(verbose, False)
            warnings.warn_explicit("`past_key_values` is deprecated", FutureWarning, "module.py", 1,
                                   module="torch.nn.modules.module")
            warnings.warn_explicit("hooks on inputs without grad", UserWarning, "grad_sample_module.py", 1,
                                   module="opacus.grad_sample.grad_sample_module")
        assert (len(got) == 2) is shown, (verbose, [str(w.message) for w in got])
        assert (logging.getLogger("transformers").getEffectiveLevel() <= logging.WARNING) is shown


@pytest.mark.slow
def test_a_run_prints_no_library_warning(fixture_repo_copy, tmp_path):
    """`repoguard run` (train + held-out evaluation with line completion) at default verbosity:
    stderr holds our progress lines and no FutureWarning/DeprecationWarning/UserWarning."""
    env = {**os.environ, "PYTHONWARNINGS": ""}
    proc = subprocess.run([sys.executable, "-m", "repoguard.cli", "run", "--steps", "3", "--batch-size", "8",
                           "--out", str(tmp_path / "out"), str(fixture_repo_copy)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "[4/5] train: done" in proc.stderr
    bad = [ln for ln in proc.stderr.split("\n") if re.search(r"Warning|deprecated", ln)]
    assert not bad, bad
