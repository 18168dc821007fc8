import pytest


@pytest.fixture(autouse=True, scope="session")
def _fresh_plan_cache(tmp_path_factory):
    """Plans are computed afresh in every test session (no stale cache can hide a regression)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("MSS_CACHE_DIR", str(tmp_path_factory.mktemp("plans")))
    yield
    mp.undo()
