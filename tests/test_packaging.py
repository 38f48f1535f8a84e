"""pyproject.toml asks for the build backend that can read it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
# setuptools 77.0.0 added PEP 639 license expressions (`license = "MIT"`): its changelog, "Added initial
# support for license expression"; 65 to 76 stop the build with "`project.license` must be valid exactly
# by one definition".
FIRST_WITH_LICENSE_EXPRESSIONS = (77,)


def _setuptools_floor(requires: list[str]) -> tuple[int, ...]:
    for requirement in requires:
        found = re.fullmatch(r"setuptools\s*>=\s*([\d.]+)", requirement.strip())
        if found:
            return tuple(int(part) for part in found.group(1).split("."))
    raise AssertionError(f"no `setuptools>=X` in build-system.requires: {requires}")


def test_the_setuptools_floor_reads_the_license_as_written():
    document = tomllib.loads(PYPROJECT.read_text())
    license_ = document["project"]["license"]
    floor = _setuptools_floor(document["build-system"]["requires"])
    if isinstance(license_, str):  # a PEP 639 expression, not the older {text = ...} table
        assert floor >= FIRST_WITH_LICENSE_EXPRESSIONS, floor
    assert not [c for c in document["project"].get("classifiers", []) if c.startswith("License ::")]


def test_the_floor_is_read_as_a_version():
    assert _setuptools_floor(["setuptools>=69"]) == (69,)
    assert _setuptools_floor(["wheel", "setuptools >= 77.0.3"]) == (77, 0, 3)
    with pytest.raises(AssertionError):
        _setuptools_floor(["flit_core"])
