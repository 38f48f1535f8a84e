"""The validated bank, kept between runs and rebuilt whenever anything it was built from changes.

A bank is built from its topic files, its answer files, and code: the loader that validates them
and the analytic model that computes every numeric answer. Which code is found, not listed: the
files of every ddpfsdp module loaded once a validating load has run (the model, units, presets and
demo registry it imports, a lazily imported one too, as the bank's numeric answers call it). The
cache stores that list with the bank, so a start-up only reads the size and mtime of each file on
it; a new import lands in a file already on the list, whose mtime then changes. No torch or textual
here: plain mode and the CLI import it.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import time
from pathlib import Path

import ddpfsdp.answers
import ddpfsdp.demos
import ddpfsdp.quiz
from ddpfsdp.quiz.loader import Bank, default_answers_dir, default_bank_dir, load_bank

CACHE_NAME = "bank-cache.pickle"

_ROOTS: tuple[Path, ...] = tuple(
    Path(package.__file__).parent for package in (ddpfsdp.quiz, ddpfsdp.demos, ddpfsdp.answers)
)


def loaded_code_files() -> list[Path]:
    """The source files of the ddpfsdp modules this process has loaded: after a validating load,
    every piece of code the bank was built with (and whatever the process had loaded before)."""
    files = set()
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if name.startswith("ddpfsdp.") and path and any(Path(path).is_relative_to(root) for root in _ROOTS):
            files.add(Path(path))
    return sorted(files)


def _fingerprint(bank_dir: Path, answers_dir: Path, code: list[str]) -> str:
    """Changes whenever a bank file, an answer file or one of the `code` files changes, appears or goes."""
    parts = [sys.version, str(bank_dir), str(answers_dir)]
    watched = [*sorted(bank_dir.glob("*.toml")), *sorted(answers_dir.glob("*.md")), *map(Path, code)]
    for path in watched:
        try:
            stat = path.stat()
        except OSError:  # a code file that went away: the key no longer matches, and the bank is rebuilt
            parts.append(f"{path}:gone")
            continue
        parts.append(f"{path}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _changed_since(started_ns: int, bank_dir: Path, answers_dir: Path, code: list[str]) -> bool:
    files = [*bank_dir.glob("*.toml"), *answers_dir.glob("*.md"), *map(Path, code)]
    return any(path.stat().st_mtime_ns >= started_ns for path in files if path.exists())


def _cached(cache: Path, bank_dir: Path, answers_dir: Path) -> Bank | None:
    """The stored bank, if its fingerprint still matches the files it was built from."""
    try:
        with cache.open("rb") as handle:
            stored_key, code = pickle.load(handle)
            if stored_key != _fingerprint(bank_dir, answers_dir, code):
                return None
            bank = pickle.load(handle)
    except Exception:  # noqa: BLE001 - any unreadable cache is simply rebuilt
        return None
    return bank if isinstance(bank, Bank) else None


def load_bank_cached(bank_dir: Path | str | None = None, answers_dir: Path | str | None = None, *,
                     cache_dir: Path | None = None) -> Bank:
    """`load_bank`, reusing the last validated bank when no file it was built from has changed.

    Parsing and validating the whole bank takes a good part of the app's start-up budget, so it is
    done once per change of a bank file, an answer file or the code (see the module's docstring).
    A cache that cannot be read is ignored and rewritten.
    """
    from ddpfsdp.quiz.paths import data_dir

    bank_dir = Path(bank_dir) if bank_dir is not None else default_bank_dir()
    answers_dir = Path(answers_dir) if answers_dir is not None else default_answers_dir()
    cache = (cache_dir or data_dir()) / CACHE_NAME
    bank = _cached(cache, bank_dir, answers_dir)
    if bank is not None:
        return bank
    started_ns = time.time_ns()
    bank = load_bank(bank_dir, answers_dir)
    code = [str(path) for path in loaded_code_files()]
    if _changed_since(started_ns, bank_dir, answers_dir, code):
        return bank  # edited while it was validated: keep nothing, the next start validates again
    key = _fingerprint(bank_dir, answers_dir, code)
    try:
        partial = cache.with_name(cache.name + f".{os.getpid()}")
        with partial.open("wb") as handle:
            pickle.dump((key, code), handle, protocol=pickle.HIGHEST_PROTOCOL)
            pickle.dump(bank, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(partial, cache)
    except OSError:
        pass
    return bank
