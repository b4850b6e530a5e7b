"""Java imports resolve through package declarations (class, wildcard, static, nested)."""
from __future__ import annotations

from analyzer_helpers import graph_of, make_repo


def test_resolution(tmp_path):
    repo = make_repo(tmp_path / "r", {
        "alpha/src/main/java/com/acme/alpha/Signal.java": "package com.acme.alpha;\npublic class Signal { public static class Inner {} }\n",
        "alpha/src/main/java/com/acme/alpha/Model.java": "package com.acme.alpha;\nclass Model {}\n",
        "app/src/main/java/com/acme/app/Main.java": (
            "package com.acme.app;\n\nimport com.acme.alpha.Signal;\nimport java.util.List;\n"
            "import static com.acme.alpha.Model.run;\n"),
        "app/src/main/java/com/acme/app/All.java": "package com.acme.app;\nimport com.acme.alpha.*;\n",
        "app/src/main/java/com/acme/app/Nested.java": "package com.acme.app;\nimport com.acme.alpha.Signal.Inner;\n",
    })
    ig, edges = graph_of(repo)
    a = "alpha/src/main/java/com/acme/alpha/"
    p = "app/src/main/java/com/acme/app/"
    assert edges == sorted([
        (p + "Main.java", a + "Signal.java"), (p + "Main.java", a + "Model.java"),
        (p + "All.java", a + "Model.java"), (p + "All.java", a + "Signal.java"),
        (p + "Nested.java", a + "Signal.java"),
    ])
    assert ig.graph.edges[p + "Main.java", a + "Signal.java"]["line"] == 3
    assert ig.external == 1
