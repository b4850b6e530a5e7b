"""Takes every stage's artefacts in OUT; writes `OUT/report/`; hands nothing further (people and
CI read it). The report: `OUT/report/report.json` (machine-readable) and one self-contained `report.html`.

Modules, in the order data flows through them:
    collect   read every stage's artefact in OUT (all optional except none) → one JSON document
    plots     matplotlib (Agg) figures → inline base64 PNG
    html      the page: no network, no JavaScript, `<details>` for the evidence explorer

Size: tables show at most `MAX_ROWS` secrets (the worst by achieved/target first) and the evidence
explorer at most `MAX_EXPLORER` secrets × `MAX_EVIDENCE` rows; the rest is summarised, so the page
stays under `HTML_SIZE_BOUND` bytes whatever the number of secrets (tested with 10^5).
"""
from __future__ import annotations

from pathlib import Path

from repoguard.report.limits import HTML_SIZE_BOUND, MAX_EVIDENCE, MAX_EXPLORER, MAX_FINDINGS, MAX_ROWS  # noqa: F401


def build_report(out: str | Path, *, repo_name: str = "") -> dict:
    """Write `out/report/report.json` and `out/report/report.html` atomically; returns
    {"json": path, "html": path, "html_bytes": n, "sections": [...], "no_privacy": the NO PRIVACY
    line when the published adapter is a --no-dp run's (else None), "insecure": {secret: insecure-
    reproducible runs that trained it}}.

    Raises InputError when `out` holds none of the stages' artefacts."""
    from repoguard.core.artefacts import atomic_dir, atomic_write_json, atomic_write_text
    from repoguard.report.collect import collect
    from repoguard.report.html import render

    out = Path(out)
    doc = collect(out, repo_name=repo_name)
    page = render(doc)
    with atomic_dir(out / "report") as tmp:
        atomic_write_json(tmp / "report.json", doc)
        atomic_write_text(tmp / "report.html", page)
    return {"json": str(out / "report" / "report.json"), "html": str(out / "report" / "report.html"),
            "html_bytes": len(page.encode("utf-8")), "sections": doc["sections"],
            "no_privacy": doc.get("no_privacy"), "insecure": (doc.get("ledger") or {}).get("insecure") or {}}
