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
from ddpfsdp.quiz.bank_cache import load_bank_cached
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
        "ddpfsdp.demos.base.units",
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


def test_editing_code_the_real_bank_calls_lazily_rebuilds_it(tmp_path, loads):
    """DeepSpeed's accounting and the GPT presets are imported inside the functions that the real
    bank's numeric answers call."""
    load_bank_cached(cache_dir=tmp_path)
    for module in ("ddpfsdp.demos.theory.deepspeed_accounting", "ddpfsdp.demos.base.shapes"):
        before = len(loads)
        with touched(Path(importlib.import_module(module).__file__)):
            load_bank_cached(cache_dir=tmp_path)
        assert len(loads) == before + 1, f"an edit of {module} left the cached bank in use"


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


_LOADED_FILES = (
    "print(json.dumps(sorted(m.__file__ for n, m in list(sys.modules.items())"
    " if n.startswith('ddpfsdp.') and getattr(m, '__file__', None))))\n"
)


def _fresh(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_cache_watches_every_module_a_validating_load_imports_and_no_more(tmp_path):
    """The list a fresh start stores, against what another fresh interpreter imports once `load_bank`
    alone has validated the real bank; and neither torch nor textual is loaded to build it."""
    stored = _fresh(
        "import json, pickle, sys\n"
        "from pathlib import Path\n"
        "from ddpfsdp.quiz.bank_cache import CACHE_NAME, load_bank_cached\n"
        f"load_bank_cached(cache_dir=Path({str(tmp_path)!r}))\n"
        "assert 'torch' not in sys.modules and 'textual' not in sys.modules, 'the bank loaded a heavy library'\n"
        f"key, code = pickle.load(open(Path({str(tmp_path)!r}) / CACHE_NAME, 'rb'))\n"
        "print(json.dumps(code))\n"
    )
    imported = {Path(file) for file in json.loads(_fresh("import json, sys\nfrom ddpfsdp.quiz.loader import load_bank\nload_bank()\n" + _LOADED_FILES))}
    watched = {Path(file) for file in json.loads(stored)}
    assert imported - watched == set()
    # Only that code: the app's screens and the torch demos can change without a rebuild.
    assert watched - imported <= {Path(bank_cache.__file__), Path(importlib.import_module("ddpfsdp.quiz.paths").__file__)}
    assert Path(importlib.import_module("ddpfsdp.demos.theory.deepspeed_accounting").__file__) in watched
