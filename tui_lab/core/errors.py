"""The one base class for mistakes a user can fix (bad preset, bad run folder, bad input).

Its message is a single line; the command line prints it without a traceback and
the lab shows it inline. Kept free of torch so the CLI can catch it cheaply.
"""


class LabError(ValueError):
    """A user-facing error whose ``str()`` is one actionable line."""
