"""Python import extraction and resolution (grimp's rules) on small real repositories."""
from __future__ import annotations

from analyzer_helpers import graph_of, make_repo

from repoguard.analyzers import imports as imports_analyzer
from repoguard.analyzers.imports import carriers, reason
from repoguard.analyzers.imports_lang import RawImport, extract


def test_extraction_covers_every_import_form():
    src = b"""from __future__ import annotations
import a.b as c, d
from ..x.y import (z as w, q)
from . import m
from .k import *
importlib.import_module("p.q")
import_module(".r")
__import__("s")
print("not an import")
"""
    got = extract("python", src).imports
    assert got == sorted([
        RawImport(1, "from", "__future__", 0, ("annotations",)),
        RawImport(2, "import", "a.b"), RawImport(2, "import", "d"),
        RawImport(3, "from", "x.y", 2, ("z", "q")),
        RawImport(4, "from", "", 1, ("m",)),
        RawImport(5, "from", "k", 1, ("*",)),
        RawImport(6, "dynamic", "p.q"), RawImport(7, "dynamic", "r", 1), RawImport(8, "dynamic", "s"),
    ])


def test_resolution_relative_absolute_src_layout_and_namespace_packages(tmp_path):
    repo = make_repo(tmp_path / "r", {
        # namespace package (no __init__.py) at the root
        "trading/alpha/signals.py": "X = 1\n",
        "trading/alpha/model.py": "from . import signals\nfrom .signals import X\n",
        "trading/desk.py": "from .alpha import model\n",
        "trading/book.py": "import trading.alpha.signals as s\n",
        "shared/__init__.py": "",
        "shared/utils.py": "import os\nimport numpy\n",
        "app/main.py": "from shared.utils import helper\nfrom trading.alpha import model\n",
        # src layout with a regular package
        "libs/pricing/pyproject.toml": "[project]\nname='pricing'\n",
        "libs/pricing/src/pricing/__init__.py": "from .curve import fit\n",
        "libs/pricing/src/pricing/curve.py": "from ..pricing import core\nimport importlib\nimportlib.import_module('pricing.core')\n",
        "libs/pricing/src/pricing/core.py": "",
        "app/price.py": "import pricing.curve\nfrom pricing import core\n",
        "scripts/run.py": "import helper_local\n",
        "scripts/helper_local.py": "",
    })
    ig, edges = graph_of(repo)
    assert edges == sorted([
        ("trading/alpha/model.py", "trading/alpha/signals.py"),
        ("trading/desk.py", "trading/alpha/model.py"),
        ("trading/book.py", "trading/alpha/signals.py"),
        ("app/main.py", "shared/utils.py"),
        ("app/main.py", "trading/alpha/model.py"),
        ("libs/pricing/src/pricing/__init__.py", "libs/pricing/src/pricing/curve.py"),
        ("libs/pricing/src/pricing/curve.py", "libs/pricing/src/pricing/core.py"),
        ("app/price.py", "libs/pricing/src/pricing/curve.py"),
        ("app/price.py", "libs/pricing/src/pricing/core.py"),
        ("scripts/run.py", "scripts/helper_local.py"),
    ])
    assert ig.external == 3  # os, numpy, importlib
    assert ig.graph.edges["app/main.py", "trading/alpha/model.py"]["line"] == 2


def test_relative_import_beyond_top_is_unresolved(tmp_path):
    repo = make_repo(tmp_path / "r", {"a.py": "from ... import x\n", "x.py": ""})
    ig, edges = graph_of(repo)
    assert edges == [] and ig.external == 1


def test_carriers_depth_cycles_and_direction(tmp_path):
    repo = make_repo(tmp_path / "r", {
        "secret/core.py": "from shared import utils\n",
        "shared/utils.py": "",
        "a.py": "import secret.core\n",
        "b.py": "import a\n",
        "c.py": "import b\n",
        "cyc1.py": "import cyc2\nimport secret.core\n",
        "cyc2.py": "import cyc1\n",
    })
    ig, _ = graph_of(repo)
    one = carriers(ig, ["secret/core.py"], 1)
    assert sorted(one) == ["a.py", "cyc1.py", "cyc2.py"]  # the cycle collapses: cyc2 is 1 hop too
    assert one["cyc2.py"] == (1, ["cyc2.py", "cyc1.py", "secret/core.py"])
    two = carriers(ig, ["secret/core.py"], 2)
    assert sorted(two) == ["a.py", "b.py", "cyc1.py", "cyc2.py"]
    assert "shared/utils.py" not in carriers(ig, ["secret/core.py"], 5)
    assert reason(ig, 2, two["b.py"][1]) == "imports a.py at line 1 (import a), which imports secret/core.py (2 hops)"
    assert reason(ig, 1, one["a.py"][1]) == "imports secret/core.py at line 1 (import secret.core)"
    assert reason(ig, 1, one["cyc2.py"][1]) == ("imports cyc1.py at line 1 (import cyc1), which imports "
                                               "secret/core.py (2 hops) — an import cycle shortens this to 1 hop")


def test_no_implicit_relative_imports_inside_packages(tmp_path):
    repo = make_repo(tmp_path / "r", {
        "pkg/__init__.py": "", "pkg/logging.py": "", "pkg/jwt_manager.py": "import logging\n",
        "scripts/tool.py": "import helper\n", "scripts/helper.py": "",
    })
    _, edges = graph_of(repo)
    assert edges == [("scripts/tool.py", "scripts/helper.py")]  # stdlib logging stays external


def test_grammar_gap_falls_back_to_python_ast():
    # a trailing comma in a multi-line subscript derails the bundled grammar's error recovery
    src = (b"from typing import Annotated\n\nclass A:\n    x: Annotated[\n        int,\n        1,\n    ]\n\n"
           b"def f():\n    from ..transport.utils import g\n    importlib.import_module('p.q')\n")
    got = extract("python", src).imports
    assert RawImport(10, "from", "transport.utils", 2, ("g",)) in got
    assert RawImport(11, "dynamic", "p.q") in got


def test_stdlib_names_are_not_captured_by_other_projects_folders(tmp_path):
    """Regression (astral-sh/ruff): a test-fixture package named like a stdlib module made its
    parent a source root, and every `import logging` in the repository resolved to it."""
    repo = make_repo(tmp_path / "r", {
        "tools/fixtures/mods/logging/__init__.py": "",
        "tools/fixtures/mods/helpers/__init__.py": "",
        "app/main.py": "import logging\nimport string\nimport helpers\n",
        "svc/pkg/__init__.py": "",
        "svc/pkg/string.py": "",
        "svc/run.py": "import string\n",
    })
    _, edges = graph_of(repo)
    assert ("app/main.py", "tools/fixtures/mods/logging/__init__.py") not in edges
    # A non-stdlib name still resolves across the monorepo's source roots.
    assert ("app/main.py", "tools/fixtures/mods/helpers/__init__.py") in edges
    # Inside its own root a script still shadows nothing it does not own: svc/run.py's folder has
    # no string.py, so `import string` is the standard library.
    assert not [e for e in edges if e[0] == "svc/run.py"]


def test_large_strongly_connected_components_do_not_collapse(tmp_path, monkeypatch):
    """A component over MAX_CYCLE files keeps per-file hops: a ring of one-way imports is not a
    cycle whose members all import the secret's importer."""
    monkeypatch.setattr(imports_analyzer, "MAX_CYCLE", 3)
    ring = {f"r{i}.py": f"import r{(i + 1) % 5}\n" for i in range(5)}
    ring["r0.py"] += "import secret.core\n"
    repo = make_repo(tmp_path / "r", {"secret/core.py": "", **ring})
    ig, _ = graph_of(repo)
    assert sorted(carriers(ig, ["secret/core.py"], 1)) == ["r0.py"]
    assert carriers(ig, ["secret/core.py"], 2)["r4.py"] == (2, ["r4.py", "r0.py", "secret/core.py"])
    monkeypatch.setattr(imports_analyzer, "MAX_CYCLE", 5)
    ig, _ = graph_of(repo)  # the collapse is computed once per graph
    assert sorted(carriers(ig, ["secret/core.py"], 1)) == [f"r{i}.py" for i in range(5)]
