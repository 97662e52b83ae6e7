"""The one base class for mistakes a user can fix (bad preset, bad run folder, bad input).

Its message is a single line; the command line prints it without a traceback and
the lab shows it inline. Kept free of torch so the CLI can catch it cheaply.
"""


class LabError(ValueError):
    """A user-facing error whose ``str()`` is one actionable line."""


def one_line(exc: BaseException) -> str:
    """An exception as one line for the user: its message's first line, else its type's name."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
