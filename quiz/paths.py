"""Where ddpfsdp keeps what a user saves."""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "DDPFSDP_HOME"


def data_dir(create: bool = True) -> Path:
    """The user data directory: `$DDPFSDP_HOME` if set, else the platform's user data dir."""
    override = os.environ.get(HOME_ENV)
    if override:
        path = Path(override).expanduser()
    else:
        import platformdirs

        path = Path(platformdirs.user_data_dir("ddpfsdp", appauthor=False))
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path
