"""reduce ops."""


def register(r) -> None:
    pass
