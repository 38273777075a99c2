"""How a backend reports a trap (shared by both hosts; no wasmtime needed to import it)."""


class Trapped(Exception):
    """The module trapped: never the user's fault, always a symwasm bug or a hostile module."""
