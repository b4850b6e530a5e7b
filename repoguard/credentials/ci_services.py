"""Passwords a CI workflow gives its own service containers: a GitHub Actions job's
`services.<name>.env` (`SA_PASSWORD: Forge123` for an MSSQL container, `POSTGRES_PASSWORD: …`)
configures a container that exists only while the job runs and is reachable only from it, so the
value gates nothing outside the job. The same value in the job's steps (`DB_PASSWORD: Forge123`,
the tests connecting to that container) is that password too. The engine drops the findings of
password and generic rules on these values in the workflow file that declares them (GitHub, "About
service containers"); a vendor's key (`sk_live_…`) in a service's env is still reported: the
container may well call the vendor.
"""
from __future__ import annotations

import re

_WORKFLOW = re.compile(r"(?:^|/)\.github/workflows/[^/]+\.ya?ml$")


def is_workflow(path: str) -> bool:
    """Is `path` a GitHub Actions workflow file (`.github/workflows/*.yml`)?"""
    return _WORKFLOW.search(path) is not None


MAX_BYTES = 1 << 20  # a workflow is a few KB; a larger file is not parsed (PyYAML reads ~0.4 MB/s)


def service_values(data: bytes) -> frozenset[bytes]:
    """The values of every `jobs.<id>.services.<name>.env` entry of the workflow `data` (bytes of
    YAML), as bytes; empty when the text is no workflow YAML, is larger than MAX_BYTES, or does not
    parse (a parse error, or nesting too deep for the parser, is not ours to report: the scan goes
    on without this filter)."""
    if len(data) > MAX_BYTES:
        return frozenset()
    import yaml  # only for workflow files: most scans never pay for the import
    try:
        doc = yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except Exception:  # YAMLError, RecursionError on deep nesting, a decode error
        return frozenset()
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    out: set[bytes] = set()
    for job in jobs.values() if isinstance(jobs, dict) else ():
        services = job.get("services") if isinstance(job, dict) else None
        for svc in services.values() if isinstance(services, dict) else ():
            env = svc.get("env") if isinstance(svc, dict) else None
            for v in env.values() if isinstance(env, dict) else ():
                if isinstance(v, (str, int, float)) and not isinstance(v, bool) and str(v):
                    out.add(str(v).encode())
    return frozenset(out)
