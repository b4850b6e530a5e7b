"""Import ties at the granularity of the evidence (issue 44 item 2): imports that never execute tie
nothing, and an importer is tied only in the chunks holding the import or using its names."""
from __future__ import annotations

from repoguard.analyzers.imports_lang import RawImport, extract
from repoguard.source.gitrepo import GitRepo


# -- imports that never execute -------------------------------------------------------------------
def test_type_checking_imports_are_not_reported():
    src = b"""from typing import TYPE_CHECKING
import typing

if TYPE_CHECKING:
    from sfn.models import StepFunctionBackend
    import sfn.engine
if typing.TYPE_CHECKING:
    from sfn import parser
else:
    from runtime import parser
if TYPE_CHECKING:
    pass
elif True:
    import kept_elif
import kept
"""
    got = extract("python", src).imports
    assert got == [RawImport(1, "from", "typing", 0, ("TYPE_CHECKING",)), RawImport(2, "import", "typing"),
                   RawImport(10, "from", "runtime", 0, ("parser",)), RawImport(14, "import", "kept_elif"),
                   RawImport(15, "import", "kept")]


def test_type_checking_rule_holds_in_the_ast_fallback():
    """A file the bundled grammar cannot parse goes through `ast`: the same rule applies."""
    # a trailing comma in a multi-line annotation subscript derails the grammar (test_imports_python)
    src = (b"from typing import TYPE_CHECKING, Annotated\n\nclass A:\n    x: Annotated[\n        int,\n"
           b"        1,\n    ]\n\nif TYPE_CHECKING:\n    from sfn.models import Backend\nimport kept\n")
    from repoguard.analyzers.imports_lang import _parser_and_query
    assert _parser_and_query("python")[0].parse(src).root_node.has_error
    got = [r.target for r in extract("python", src).imports]
    assert "sfn.models" not in got and "kept" in got


def test_typescript_type_only_imports_are_not_reported():
    src = b"""import type { A } from "./a";
import { type B, type C } from "./b";
import { type D, E } from "./mixed";
export type { F } from "./f";
import G from "./g";
"""
    got = [r.target for r in extract("typescript", src).imports]
    assert got == ["./mixed", "./g"]


# -- per chunk --------------------------------------------------------------------------------------
CONFIG = """
[[secret]]
id = "sfn"
paths = ["sfn/**"]
[secret.propagate]
imports = {depth}
"""


def _funcs(tag: str, n: int = 300) -> list[str]:
    """A long Python file cut into many chunks (distinct per `tag`: no deduplication)."""
    return [f"def {tag}_{i}(x):\n    \"\"\"Handler {i}.\"\"\"\n    y = x * {i} + {i * 7}\n"
            f"    return [y + k for k in range({i % 9 + 3})]\n\n\n" for i in range(n)]


def _analyze(make_repo, tmp_path, files: dict[str, str], depth: int = 1):
    from repoguard.analyzers.analyze import run_analyze
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.core.config import load_config
    from repoguard.source.corpus import load_corpus

    repo_dir = make_repo({**files, "README.md": "# demo\n"})
    (repo_dir / "repoguard.toml").write_text(CONFIG.format(depth=depth))
    out = tmp_path / "out"
    run_analyze(GitRepo(repo_dir), load_config(repo_dir / "repoguard.toml"), out, only=["declared", "imports"])
    inc = load_incidence(out)
    corpus = load_corpus(out, repo_dir)
    tied = set(inc.matrix.tocsc()[:, inc.secret_index()["sfn"]].nonzero()[0].tolist())

    def rows(path):
        return [i for i, e in enumerate(corpus.examples) if e.path == path]

    def holding(path, *needles):
        return [i for i in rows(path) if any(n in corpus.text(corpus.examples[i]) for n in needles)]

    return inc, tied, rows, holding


SECRET = {"sfn/__init__.py": "", "sfn/engine.py": "def run_machine(x):\n    return x\n\n\nLIMIT = 3\n"}


def test_importer_is_tied_only_where_it_imports_and_uses_the_names(make_repo, tmp_path):
    """`app/big.py` imports the secret at its top and calls `run_machine` in one function far down:
    the import's chunk and that chunk are tied, not the file's other chunks (every chunk was)."""
    body = _funcs("big")
    body[250] = body[250].replace("    y = x", "    y = run_machine(x)")
    inc, tied, rows, holding = _analyze(make_repo, tmp_path, {
        **SECRET, "app/big.py": "from sfn.engine import run_machine\n\n\n" + "".join(body)})
    assert len(rows("app/big.py")) >= 5, "the file must be cut into several chunks"
    mine = [i for i in rows("app/big.py") if i in tied]
    assert mine == holding("app/big.py", "from sfn.engine", "run_machine(x)") and len(mine) == 2
    assert set(rows("sfn/engine.py")) <= tied               # the secret's own files stay wholly tied
    reasons = sorted(e.reason for e in inc.evidence if e.analyzer == "imports")
    assert reasons == ["imports sfn/engine.py at line 1 (from sfn.engine import run_machine)",
                       "imports sfn/engine.py at line 1 (from sfn.engine import run_machine); "
                       "uses run_machine at line 1506"]


def test_unlistable_names_still_tie_the_whole_file(make_repo, tmp_path):
    """`from sfn.engine import *` binds names nobody can list: the whole importer stays tied."""
    inc, tied, rows, _ = _analyze(make_repo, tmp_path, {
        **SECRET, "app/star.py": "from sfn.engine import *\n\n\n" + "".join(_funcs("star"))})
    assert len(rows("app/star.py")) >= 5 and set(rows("app/star.py")) <= tied


def test_type_checking_import_ties_nothing_end_to_end(make_repo, tmp_path):
    """moto's `moto/backends.py` shape: a registry importing every backend for the type checker
    only, and a service importing the registry. Neither is tied to the secret."""
    inc, tied, rows, _ = _analyze(make_repo, tmp_path, {
        **SECRET,
        "app/backends.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                           "    from sfn.engine import run_machine\n\n\ndef get(name):\n    return name\n",
        "app/rds.py": "from app.backends import get\n\n\nX = get('rds')\n"}, depth=2)
    assert not {e.path for e in inc.evidence if e.analyzer == "imports"}
    assert not tied & set(rows("app/backends.py") + rows("app/rds.py"))


def test_transitive_ties_follow_the_same_rule(make_repo, tmp_path):
    """imports = 2: `app/client.py` imports `app/helper.py` (which imports the secret) and uses
    `helper_call` in one chunk; only that chunk and the import's are tied, and the reason names
    the chain and the name."""
    body = _funcs("client")
    body[200] = body[200].replace("    y = x", "    y = helper_call(x)")
    inc, tied, rows, holding = _analyze(make_repo, tmp_path, {
        **SECRET,
        "app/helper.py": "from sfn.engine import LIMIT\n\n\ndef helper_call(x):\n    return x + LIMIT\n",
        "app/client.py": "from app.helper import helper_call\n\n\n" + "".join(body)}, depth=2)
    mine = [i for i in rows("app/client.py") if i in tied]
    assert len(rows("app/client.py")) >= 5
    assert mine == holding("app/client.py", "from app.helper", "helper_call(x)") and len(mine) == 2
    reasons = sorted(e.reason for e in inc.evidence if e.path == "app/client.py")
    assert reasons[-1] == ("imports app/helper.py at line 1 (from app.helper import helper_call), which "
                           "imports sfn/engine.py (2 hops); uses helper_call at line 1206")


def test_typescript_importer_tied_where_it_uses_the_names(make_repo, tmp_path):
    """The same rule in TypeScript, with a type-only import of the secret tying nothing."""
    fns = "".join(f"export function f{i}(x: number): number {{\n  const y = x * {i} + {i * 3};\n"
                  f"  return y + {i % 7};\n}}\n\n" for i in range(400))
    fns = fns.replace("const y = x * 350 ", "const y = runMachine(x) * 350 ")
    inc, tied, rows, holding = _analyze(make_repo, tmp_path, {
        "sfn/engine.ts": "export function runMachine(x: number): number { return x; }\n"
                         "export interface Machine { id: string }\n",
        "app/big.ts": 'import { runMachine } from "../sfn/engine";\n\n' + fns,
        "app/types.ts": 'import type { Machine } from "../sfn/engine";\n\nexport const m: Machine | null = null;\n'})
    mine = [i for i in rows("app/big.ts") if i in tied]
    assert len(rows("app/big.ts")) >= 5
    assert mine == holding("app/big.ts", "import { runMachine }", "runMachine(x)") and len(mine) == 2
    assert not tied & set(rows("app/types.ts"))


def test_explain_names_the_names_that_tied_each_chunk(make_repo, tmp_path):
    """`explain FILE` shows, per evidence row, the names used and the chunks that row ties."""
    import json
    import subprocess
    import sys

    body = _funcs("big")
    body[250] = body[250].replace("    y = x", "    y = run_machine(x)")
    _, tied, rows, holding = _analyze(make_repo, tmp_path, {
        **SECRET, "app/big.py": "from sfn.engine import run_machine\n\n\n" + "".join(body)})
    root = tmp_path / "repo"
    cmd = [sys.executable, "-m", "repoguard.cli", "explain", "app/big.py", "--repo", str(root),
           "--out", str(tmp_path / "out")]
    text = subprocess.run(cmd, capture_output=True, text=True, cwd=root, check=True).stdout
    assert "uses run_machine at line 1506" in text and "ties only: app/big.py#" in text
    doc = json.loads(subprocess.run(cmd + ["--json"], capture_output=True, text=True, cwd=root, check=True).stdout)
    [sec] = doc["secrets"]
    use = next(e for e in sec["evidence"] if "uses run_machine" in e["reason"])
    [chunk] = use["chunks"]
    assert chunk["lines"][0] <= 1506 <= chunk["lines"][1]


def test_java_and_go_importers_tied_where_they_use_the_names(make_repo, tmp_path):
    """Java binds the imported class's simple name, Go the package's last path element (or its
    alias); an importer is tied where it imports and uses them. A Go import the file never uses
    under the guessed name (a package named unlike its folder) keeps the whole file tied."""
    java = "".join(f"    int m{i}(int x) {{\n        int y = x * {i} + {i * 3};\n        return y + {i % 7};\n    }}\n\n"
                   for i in range(300)).replace("int y = x * 250 ", "int y = Engine.run(x) * 250 ")
    go = "".join(f"func F{i}(x int) int {{\n\ty := x*{i} + {i * 3}\n\treturn y + {i % 7}\n}}\n\n"
                 for i in range(400)).replace("y := x*350 ", "y := engine.Run(x)*350 ")
    inc, tied, rows, holding = _analyze(make_repo, tmp_path, {
        "sfn/src/main/java/com/acme/sfn/Engine.java":
            "package com.acme.sfn;\n\npublic class Engine {\n    public static int run(int x) { return x; }\n}\n",
        "app/src/main/java/com/acme/app/Big.java":
            "package com.acme.app;\n\nimport com.acme.sfn.Engine;\n\npublic class Big {\n" + java + "}\n",
        "go.mod": "module example.com/mono\n\ngo 1.21\n",
        "sfn/engine/engine.go": "package engine\n\nfunc Run(x int) int { return x }\n",
        "sfn/odd/odd.go": "package strange\n\nfunc Run(x int) int { return x }\n",
        "app/big.go": 'package app\n\nimport "example.com/mono/sfn/engine"\n\n' + go,
        "app/odd.go": 'package app\n\nimport "example.com/mono/sfn/odd"\n\n' + go.replace("engine.Run", "strange.Run").replace("func F", "func G")})
    for path, needles in (("app/src/main/java/com/acme/app/Big.java", ("import com.acme.sfn", "Engine.run(x)")),
                          ("app/big.go", ('import "example.com', "engine.Run(x)"))):
        mine = [i for i in rows(path) if i in tied]
        assert len(rows(path)) >= 5, path
        assert mine == holding(path, *needles) and len(mine) == 2, path
    assert len(rows("app/odd.go")) >= 5 and set(rows("app/odd.go")) <= tied
