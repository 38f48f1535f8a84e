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
    path, source = location()
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


def location() -> tuple[Path, str]:
    """Where the data directory is, and what chose it (`$DDPFSDP_HOME` or the platform), unchecked."""
    override = os.environ.get(HOME_ENV)
    if override:
        return Path(override).expanduser(), f"{HOME_ENV}={override}"
    import platformdirs

    return Path(platformdirs.user_data_dir("ddpfsdp", appauthor=False)), "the platform's user data directory"
