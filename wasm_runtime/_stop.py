"""How a backend reports a call it did not finish (shared by both hosts, no wasmtime needed)."""


class Interrupted(Exception):
    """The call was stopped by ``interrupt`` (a cancel or a time limit)."""


class Trapped(Exception):
    """The module trapped: never the user's fault, always a symwasm bug or a hostile module."""
