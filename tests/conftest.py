import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGETS = ("wasm32", "native")


@pytest.fixture(params=TARGETS)
def target(request) -> str:
    """Every op test runs on both targets."""
    return request.param
