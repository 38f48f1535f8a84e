from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def ddpfsdp_home(tmp_path, monkeypatch):
    """Every test gets its own data directory; none touches the real one."""
    home = tmp_path / "ddpfsdp-home"
    monkeypatch.setenv("DDPFSDP_HOME", str(home))
    return home
