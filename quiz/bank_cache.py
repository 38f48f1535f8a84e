"""The validated bank, kept between runs and rebuilt whenever anything it was built from changes.

A bank is built from its topic files, its answer files, and code: the loader that validates them
and the analytic model that computes every numeric answer. Which code is found, not listed: the
ddpfsdp modules reachable from this module's imports, read from their sources (an import inside a
function counts, so the lazily imported model, units, presets and demo registry are found) with
the packages that run on the way. The cache stores that list with the bank, so a start-up only
reads the size and mtime of each file on it; any new import lands in a file already on the list,
whose mtime then changes. No torch or textual here: plain mode and the CLI import it.
"""

from __future__ import annotations

import ast
import hashlib
import os
import pickle
import sys
from pathlib import Path

import ddpfsdp.answers
import ddpfsdp.demos
import ddpfsdp.quiz
from ddpfsdp.quiz.loader import Bank, default_answers_dir, default_bank_dir, load_bank

CACHE_NAME = "bank-cache.pickle"

_ROOTS: dict[str, Path] = {
    package.__name__: Path(package.__file__).parent for package in (ddpfsdp.quiz, ddpfsdp.demos, ddpfsdp.answers)
}


def imported_names(name: str, path: Path) -> set[str]:
    """Dotted names a module imports, relative imports resolved; `from a import b` gives a.b and a.

    Every import statement counts, wherever it stands (a deferred import inside a function too).
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def _source_of(name: str) -> Path | None:
    """The source file of ddpfsdp module `name`, found without importing it; None for a name that
    is not a module of the package (a function, a class, another library)."""
    for root, folder in _ROOTS.items():
        if name == root or name.startswith(root + "."):
            base = folder.joinpath(*name[len(root) + 1 :].split(".")) if name != root else folder
            for candidate in (base / "__init__.py", base.with_suffix(".py")):
                if candidate.is_file():
                    return candidate
    return None


def code_modules(start: str = __name__) -> dict[str, Path]:
    """`start` and every ddpfsdp module reachable from its imports, by name, with its source file."""
    found: dict[str, Path] = {}
    waiting = [start]
    while waiting:
        name = waiting.pop()
        if name in found:
            continue
        path = _source_of(name)
        if path is None:
            continue
        found[name] = path
        parts = name.split(".")
        waiting.extend(".".join(parts[:end]) for end in range(2, len(parts)))  # its packages run first
        waiting.extend(imported for imported in imported_names(name, path) if imported.startswith("ddpfsdp."))
    return found


def code_files() -> list[Path]:
    """The source files of the code a cached bank depends on: this module's reach."""
    return sorted(set(code_modules().values()))


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
    code = [str(path) for path in code_files()]
    key = _fingerprint(bank_dir, answers_dir, code)  # before loading: an edit made meanwhile rebuilds next time
    bank = load_bank(bank_dir, answers_dir)
    try:
        partial = cache.with_name(cache.name + f".{os.getpid()}")
        with partial.open("wb") as handle:
            pickle.dump((key, code), handle, protocol=pickle.HIGHEST_PROTOCOL)
            pickle.dump(bank, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(partial, cache)
    except OSError:
        pass
    return bank
