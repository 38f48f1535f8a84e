"""Where ddpfsdp keeps what a user saves."""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "DDPFSDP_HOME"


class DataDirError(Exception):
    """The data directory cannot be used; the message says what is wrong and what to set."""


def data_dir(create: bool = True) -> Path:
    """The user data directory: `$DDPFSDP_HOME` if set, else the platform's user data dir.

    Raises DataDirError when the place is a file, cannot be created, or cannot be written.
    """
    override = os.environ.get(HOME_ENV)
    if override:
        path = Path(override).expanduser()
        source = f"{HOME_ENV}={override}"
    else:
        import platformdirs

        path = Path(platformdirs.user_data_dir("ddpfsdp", appauthor=False))
        source = "the platform's user data directory"
    fix = f"set {HOME_ENV} to a folder you can write to (for example {HOME_ENV}=~/.ddpfsdp)"
    if path.exists() and not path.is_dir():
        raise DataDirError(f"the data directory {path} ({source}) is a file, not a folder; {fix}")
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise DataDirError(f"the data directory {path} ({source}) cannot be created ({error.strerror}); {fix}") from None
        if not os.access(path, os.W_OK | os.X_OK):
            raise DataDirError(f"the data directory {path} ({source}) is not writable; {fix}")
    return path
