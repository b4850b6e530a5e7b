"""Go imports resolve through the module path of go.mod to package folders."""
from __future__ import annotations

from analyzer_helpers import graph_of, make_repo


def test_resolution(tmp_path):
    repo = make_repo(tmp_path / "r", {
        "svc/go.mod": "module example.com/acme/svc\n\ngo 1.21\n",
        "svc/alpha/signal.go": "package alpha\n",
        "svc/alpha/signal_test.go": "package alpha\n",
        "svc/alpha/deep/x.go": "package deep\n",
        "svc/cmd/main.go": 'package main\n\nimport (\n\t"fmt"\n\ta "example.com/acme/svc/alpha"\n)\n',
        "svc/cmd/other.go": 'package main\nimport "example.com/acme/svc/alpha/deep"\n',
    })
    ig, edges = graph_of(repo)
    assert edges == [("svc/cmd/main.go", "svc/alpha/signal.go"), ("svc/cmd/other.go", "svc/alpha/deep/x.go")]
    assert ig.graph.edges["svc/cmd/main.go", "svc/alpha/signal.go"]["line"] == 5
    assert ig.external == 1
