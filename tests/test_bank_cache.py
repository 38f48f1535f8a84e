"""The bank cache: reused while nothing it was built from changes, rebuilt when a bank file, an
answer file, or the code that validates the bank and computes its answers changes."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from ddpfsdp.quiz import bank_cache
from ddpfsdp.quiz.bank_cache import code_files, code_modules, imported_names, load_bank_cached
from ddpfsdp.quiz.loader import BankError


@pytest.fixture
def loads(monkeypatch):
    """Every call of the validating `load_bank` that the cache makes: one per rebuild."""
    calls = []
    real = bank_cache.load_bank

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(bank_cache, "load_bank", counting)
    return calls


@contextmanager
def touched(path: Path):
    """`path` one second newer, as an edit leaves it, and back to its own mtime afterwards."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    try:
        yield
    finally:
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_an_unchanged_tree_reuses_the_cache(quiz_bank, tmp_path, loads):
    bank_dir, answers_dir = quiz_bank
    first = load_bank_cached(bank_dir, answers_dir, cache_dir=tmp_path)
    assert (tmp_path / bank_cache.CACHE_NAME).exists() and len(loads) == 1
    again = load_bank_cached(bank_dir, answers_dir, cache_dir=tmp_path)
    assert len(loads) == 1  # read back, not validated again
    assert again.questions == first.questions and again is not first


@pytest.mark.parametrize(
    "module",
    [
        "ddpfsdp.demos.theory.quiz_answers",  # computes every numeric answer
        "ddpfsdp.demos.theory.state",  # what those answers are built on
        "ddpfsdp.demos.theory.deepspeed_accounting",  # imported lazily, inside a function
        "ddpfsdp.demos.units",
        "ddpfsdp.demos.train.presets",
        "ddpfsdp.demos.registry",  # the demos a question may link
        "ddpfsdp.quiz.loader",  # the validation itself
    ],
)
def test_editing_the_code_rebuilds_the_cache(module, quiz_bank, tmp_path, loads):
    bank_dir, answers_dir = quiz_bank
    load_bank_cached(bank_dir, answers_dir, cache_dir=tmp_path)
    with touched(Path(importlib.import_module(module).__file__)):
        load_bank_cached(bank_dir, answers_dir, cache_dir=tmp_path)
        assert len(loads) == 2, f"an edit of {module} left the cached bank in use"
        load_bank_cached(bank_dir, answers_dir, cache_dir=tmp_path)
        assert len(loads) == 2  # the rebuilt cache is the one reused


def test_editing_a_bank_file_revalidates_and_a_broken_cache_is_rebuilt(quiz_bank, tmp_path, loads):
    bank_dir, answers_dir = quiz_bank
    first = load_bank_cached(bank_dir, answers_dir, cache_dir=tmp_path)
    path = bank_dir / "ddp.toml"
    path.write_text(path.read_text().replace('kind = "explain"', 'kind = "essay"'))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000_000))
    with pytest.raises(BankError, match="unknown kind"):
        load_bank_cached(bank_dir, answers_dir, cache_dir=tmp_path)
    path.write_text(path.read_text().replace('kind = "essay"', 'kind = "explain"'))
    (tmp_path / bank_cache.CACHE_NAME).write_bytes(b"garbage")
    assert load_bank_cached(bank_dir, answers_dir, cache_dir=tmp_path).questions.keys() == first.questions.keys()
    assert len(loads) == 3


def test_the_cache_watches_every_module_a_validating_load_imports():
    """Independently of the import graph the cache reads: what a fresh interpreter has imported
    once `load_bank` has validated the real bank."""
    code = (
        "import json, sys\n"
        "from ddpfsdp.quiz.loader import load_bank\n"
        "load_bank()\n"
        "print(json.dumps(sorted(m.__file__ for n, m in list(sys.modules.items())"
        " if n.startswith('ddpfsdp.') and getattr(m, '__file__', None))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    imported = {Path(file) for file in json.loads(proc.stdout)}
    watched = set(code_files())
    assert imported - watched == set()
    # Only that code: the app's screens and the torch demos can change without a rebuild.
    assert watched - imported <= {Path(bank_cache.__file__), Path(importlib.import_module("ddpfsdp.quiz.paths").__file__)}


def test_the_watched_code_imports_neither_torch_nor_textual():
    """So validating the bank never waits for either: the start-up stays fast."""
    for name, path in code_modules().items():
        assert not {imported.split(".")[0] for imported in imported_names(name, path)} & {"torch", "textual"}, path
