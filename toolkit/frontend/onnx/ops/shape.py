"""shape ops."""


def register(r) -> None:
    pass
