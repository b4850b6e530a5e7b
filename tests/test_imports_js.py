"""JavaScript / TypeScript / TSX imports: relative, tsconfig aliases, workspaces, require, import()."""
from __future__ import annotations

from analyzer_helpers import graph_of, make_repo

from repoguard.analyzers.imports_lang import extract


def test_extraction_forms():
    js = extract("javascript", b'import x, {y} from "./a";\nexport * from "../b";\n'
                               b'const z = require("c");\nimport("./d");\nfoo("e");\n').imports
    assert [(i.line, i.kind, i.target) for i in js] == [
        (1, "static", "./a"), (2, "static", "../b"), (3, "require", "c"), (4, "dynamic", "./d")]
    ts = extract("typescript", b'import type {X} from "@app/x";\nimport y = require("./y");\n').imports
    # `import type` is erased at compile time: it never runs and ties nothing (issue 44)
    assert [(i.line, i.target) for i in ts] == [(2, "./y")]
    tsx = extract("tsx", b'import React from "react";\nconst A = () => <div/>;\n').imports
    assert [i.target for i in tsx] == ["react"]


def test_resolution(tmp_path):
    repo = make_repo(tmp_path / "r", {
        "web/tsconfig.json": '{\n // comment\n "compilerOptions": {"baseUrl": "src", '
                             '"paths": {"@alpha/*": ["../../trading/alpha/*"],},}}\n',
        "web/src/app.tsx": 'import {score} from "@alpha/score";\nimport {h} from "lib/h";\n'
                           'import React from "react";\n',
        "web/src/lib/h.ts": 'export * from "./inner";\nconst m = require("./m.js");\n',
        "web/src/lib/inner/index.ts": "export const i = 1;\n",
        "web/src/lib/m.ts": "",
        "trading/alpha/score.ts": "export const score = 1;\n",
        "packages/ui/package.json": '{"name": "@acme/ui", "main": "lib/main.js"}\n',
        "packages/ui/lib/main.js": "module.exports = {};\n",
        "packages/ui/lib/button.js": 'import("../../../web/src/lib/m")\n',
        "svc/index.js": 'const ui = require("@acme/ui");\nimport b from "@acme/ui/lib/button";\n',
    })
    ig, edges = graph_of(repo)
    assert edges == sorted([
        ("web/src/app.tsx", "trading/alpha/score.ts"),
        ("web/src/app.tsx", "web/src/lib/h.ts"),
        ("web/src/lib/h.ts", "web/src/lib/inner/index.ts"),
        ("web/src/lib/h.ts", "web/src/lib/m.ts"),
        ("packages/ui/lib/button.js", "web/src/lib/m.ts"),
        ("svc/index.js", "packages/ui/lib/main.js"),
        ("svc/index.js", "packages/ui/lib/button.js"),
    ])
    assert ig.external == 1  # react
