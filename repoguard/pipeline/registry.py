"""The stages `repoguard run` runs, as objects in one registry, in pipeline order (as Opacus
registers its grad samplers: the runner looks stages up here and knows none by name).

A stage is any object with

    name: str                        the stage's name (`run --from NAME`, run_state.json)
    inputs(ctx) -> JSON-able dict    what its result depends on (hashed by the runner)
    execute(ctx) -> info dict        run it and write its artefacts
    outputs(ctx) -> str              SHA-256 (hex) of the artefacts it wrote (what downstream reads)
    describe(info) -> str            the tail of its "done" line

and optionally

    enabled(settings) -> bool        whether this run runs it (the audit: `run --audit` only)
    before(ctx, rerun) -> bool       called before it runs; may call `rerun(name)` to run an
                                     earlier stage again (→ (info, seconds)) and returns True
                                     when it did, so its own inputs are hashed again (train
                                     re-plans when the ledger moved)
    after(ctx, info)                 called after it ran; may stop the run (scan: PolicyError
                                     under --fail-on-findings)

The runner knows no stage by name.
Adding a stage is a module defining such an object and one line in `_order` below.
"""
from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Stage(Protocol):
    """One pipeline stage (see the module docstring for what each method returns)."""

    name: str

    def inputs(self, ctx) -> dict:
        """What the stage's result depends on, JSON-able (the runner hashes it to skip a stage
        whose inputs did not change)."""

    def execute(self, ctx) -> dict:
        """Run the stage and write its artefacts under ctx.out; returns its info dict (the run
        summary and run_state.json hold it)."""

    def outputs(self, ctx) -> str:
        """SHA-256 (hex) of the artefacts the stage wrote: what downstream stages read."""

    def describe(self, info: dict) -> str:
        """The tail of the stage's "done" line, from its info dict."""


_REGISTRY: dict[str, Any] = {}


def register(stage) -> Any:
    """Add `stage` after those registered so far; returns it. Raises ValueError for a second
    stage of the same name or an object that is not a `Stage`."""
    if not isinstance(stage, Stage):
        raise ValueError(f"{stage!r} is not a pipeline stage (name, inputs, execute, outputs, describe)")
    if stage.name in _REGISTRY:
        raise ValueError(f"pipeline stage {stage.name!r} registered twice")
    _REGISTRY[stage.name] = stage
    return stage


def _load() -> dict[str, Any]:
    if not _REGISTRY:
        from repoguard.pipeline import stages as s

        for stage in _order(s):
            register(stage)
    return _REGISTRY


def _order(s) -> tuple:
    """The stages in pipeline order, one line each (`s`: the `stages` module)."""
    return (
        s.scan,
        s.analyze,
        s.plan,
        s.train,
        s.audit,
        s.report,
    )


def names() -> tuple[str, ...]:
    """Every registered stage's name, in pipeline order."""
    return tuple(_load())


def get(name: str):
    """The stage called `name`; KeyError when none is."""
    return _load()[name]


def enabled(stage, settings) -> bool:
    """Whether this run runs `stage` (its `enabled(settings)`, True when it has none)."""
    check = getattr(stage, "enabled", None)
    return True if check is None else bool(check(settings))
