"""The command line, the Textual quiz app, the question bank and the progress store."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("ddpfsdp")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"
