"""stub"""


def register(r) -> None:
    pass
