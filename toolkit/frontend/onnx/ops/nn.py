"""nn ops."""


def register(r) -> None:
    pass
