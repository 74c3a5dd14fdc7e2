"""The one base class of errors a user can act on.

Every error that comes from bad input (a recipe value, a file, a head made for another target, an
export that would replace what the user owns) derives from `HeadstartError`. The CLI prints such an
error as a single `headstart VERB: error: ...` line and exits 2; anything else is a bug and keeps
its traceback. It derives from ValueError so that `except ValueError` in callers keeps working.
"""

from __future__ import annotations


class HeadstartError(ValueError):
    """Bad input the user can fix: say what was expected, what was found, and what to do."""
