"""Convolution and pooling ops."""


def register(r) -> None:
    pass
