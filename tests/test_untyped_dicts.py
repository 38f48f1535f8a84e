"""Data with a fixed shape has a type: `dict[str, Any]` in demos/ and quiz/ does not creep back.

A result, a recorded step, a fault's records, a concept demo's measurements, the launch protocol's
events, every section of the calc/1 document, the drill and interview JSON and a rank's measured records
each have a type (dataclasses or TypedDicts); what is left as `dict[str, Any]` is data whose keys are open
(keyword arguments handed on, a demo's own options, a fault's own measurements, a check's own values,
torch's raw dumps). The count is of
lines, as `git grep -c 'dict\\[str, Any\\]' -- demos quiz` counts them.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UNTYPED = "dict[str, Any]"
LIMIT = 40  # the count once the structures above had their types; lower it as more get theirs


def untyped_lines(*folders: Path) -> dict[str, int]:
    """Lines naming `dict[str, Any]`, per Python file below the folders."""
    found = {}
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            count = sum(UNTYPED in line for line in path.read_text(encoding="utf-8").splitlines())
            if count:
                found[str(path.relative_to(folder.parent))] = count
    return found


def test_dict_str_any_stays_at_or_below_its_count():
    found = untyped_lines(ROOT / "demos", ROOT / "quiz")
    worst = sorted(found.items(), key=lambda item: -item[1])[:5]
    assert sum(found.values()) <= LIMIT, (
        f"{sum(found.values())} lines name {UNTYPED} in demos/ and quiz/ (at most {LIMIT}); give the data a type "
        f"(a dataclass or a TypedDict). Most: {worst}")


def test_a_planted_untyped_dict_is_counted(tmp_path):
    package = tmp_path / "demos"
    (package / "inner").mkdir(parents=True)
    (package / "a.py").write_text("from typing import Any\n\n\ndef f(x: dict[str, Any]) -> dict[str, Any]:\n    return x\n")
    (package / "inner" / "b.py").write_text("X: dict[str, Any] = {}\nY: dict[str, int] = {}\n")
    (package / "notes.txt").write_text("dict[str, Any]\n")
    assert untyped_lines(package) == {"demos/a.py": 1, "demos/inner/b.py": 1}
