"""data_dependent ops."""


def register(r) -> None:
    pass
