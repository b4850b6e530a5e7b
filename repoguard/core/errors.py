"""Errors that the CLI turns into one line on stderr and an exit code.

Exit codes (docs/commands/index.md "Exit codes"): 0 ok, 1 findings or policy failure, 2 usage or input error,
74 an output could not be written (disk full), 70 internal error.
Raise `InputError` for anything a user can fix in their input (a file, a flag, a config key) and
`PolicyError` when the input is fine but repoguard must refuse (a budget that would be exceeded,
new credential findings). Messages are one line and name the file and the problem.
"""
from __future__ import annotations

EXIT_OK = 0
EXIT_POLICY = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 70  # sysexits EX_SOFTWARE: a bug in repoguard, reported in one line (-v: traceback)
EXIT_IOERR = 74     # sysexits EX_IOERR: an output could not be written (no space left on device, quota)


class RepoguardError(Exception):
    """Base class: a one-line message for the user, and the exit code it maps to."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str) -> None:
        # Keep messages on one line whatever the caller passed.
        super().__init__(" ".join(str(message).split()))


class InputError(RepoguardError):
    """Bad input: a file, a flag or a config value. Exit code 2."""

    exit_code = EXIT_USAGE


class PolicyError(RepoguardError):
    """Valid input that repoguard refuses to act on (budget exceeded, findings). Exit code 1."""

    exit_code = EXIT_POLICY
