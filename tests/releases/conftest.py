from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


@pytest.fixture
def shared_data_dir() -> Path:
    if not SHARED.exists():
        pytest.skip(f"../shared/data not found: {SHARED}")
    return SHARED
