"""The command line, the Textual quiz app, the question bank and the progress store."""


def __getattr__(name: str) -> str:
    # The version is looked up only when asked for: reading the installed metadata costs start-up time.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("ddpfsdp")
        except PackageNotFoundError:  # running from a source tree that was never installed
            return "0.0.0"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
