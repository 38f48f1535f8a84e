"""The guides in docs/ hold together: every page is reachable from the README or docs/README.md, every
relative link and #anchor lands, and the result schema page names exactly the fields of the typed result.

Links are read as GitHub reads them: relative to the page that holds them, an anchor being a heading's
slug (lower case, punctuation dropped, spaces to hyphens, a repeated heading numbered -1, -2, ...).
The schema page lists each block's fields in a table whose first column is headed `field`, under a
heading that names the block's type in backticks; keys a block keeps in `extra` go in a table headed
`extra key`. The test reads the types themselves (dataclass fields, `Block.named()`, a TypedDict's keys).

The script that takes the README's picture writes elsewhere unless told to replace it.
"""

from __future__ import annotations

import dataclasses
import re
import runpy
import tempfile
from pathlib import Path
from urllib.parse import unquote

import pytest
from ddpfsdp.demos.result import checks, expert_record, schema, step_record

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
INDEX = DOCS / "README.md"
SCHEMA_PAGE = DOCS / "result-schema.md"
PICTURE_SCRIPT = ROOT / "tests" / "screenshots" / "readme_picture.py"

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code: where a Markdown link is a link."""
    kept, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            kept.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(kept)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (hyphens and underscores kept),
    spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def headings(text: str) -> list[str]:
    found, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6} (.+)", line)):
            found.append(match.group(1))
    return found


def anchors(text: str) -> set[str]:
    """Every heading's anchor, outside code blocks; a repeated one gets GitHub's -1, -2, ..."""
    seen: dict[str, int] = {}
    found = set()
    for heading in headings(text):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def link_targets(text: str) -> list[str]:
    return LINK.findall(prose(text))


def resolve(page: Path, target: str) -> Path | None:
    """The file a relative link of `page` points to; None for a web link or one within the page."""
    if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
        return None
    return (page.parent / unquote(target.split("#")[0])).resolve()


def broken_links(page: Path, text: str | None = None) -> list[str]:
    """Links of `page` to a file that is not there, or to a heading its target does not have."""
    text = page.read_text(encoding="utf-8") if text is None else text
    broken = []
    for target in link_targets(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue
        path, _, fragment = target.partition("#")
        if not path:
            if fragment not in anchors(text):
                broken.append(target)
            continue
        file = resolve(page, target)
        if file is None or not file.exists():
            broken.append(target)
        elif fragment and (file.suffix != ".md" or unquote(fragment) not in anchors(file.read_text(encoding="utf-8"))):
            broken.append(target)
    return broken


def unbalanced_folds(text: str) -> list[str]:
    """Each <details> must open with a <summary> and close before the next one opens."""
    problems, lines, open_at = [], text.splitlines(), None
    for number, line in enumerate(lines, 1):
        if line.strip() == "<details>":
            if open_at is not None:
                problems.append(f"line {number}: <details> inside the one opened at line {open_at}")
            open_at = number
            if number >= len(lines) or not lines[number].startswith("<summary>"):
                problems.append(f"line {number}: <details> without a <summary> on the next line")
        elif line.strip() == "</details>":
            if open_at is None:
                problems.append(f"line {number}: </details> with nothing open")
            open_at = None
    if open_at is not None:
        problems.append(f"line {open_at}: <details> never closed")
    return problems


def unlinked_pages() -> list[str]:
    """docs/ pages that neither the README nor docs/README.md links to."""
    linked = {resolve(page, target) for page in (README, INDEX) if page.exists()
              for target in link_targets(page.read_text(encoding="utf-8"))}
    return [page.name for page in sorted(DOCS.glob("*.md")) if page != INDEX and page.resolve() not in linked]


# --- the schema page against the typed result -----------------------------------------------------


def result_types() -> dict[str, type]:
    """Every type a result is made of: schema.py's blocks, the check, a rank's recorded step."""
    blocks = {name: value for name, value in vars(schema).items()
              if isinstance(value, type) and issubclass(value, schema.Block) and value is not schema.Block}
    steps = {name: getattr(step_record, name) for name in ("RankStep", "Span", "CollectiveSpan", "MemorySamples",
                                                            "Exposed")}
    experts = {name: getattr(expert_record, name) for name in ("ExpertRank", "LayerRouting", "ExpertReference",
                                                                "GradientDiff")}
    return {**blocks, "Check": checks.Check, **steps, **experts}


def type_fields(kind: type) -> set[str]:
    if issubclass(kind, schema.Block):
        return set(kind.named())
    if dataclasses.is_dataclass(kind):
        return {item.name for item in dataclasses.fields(kind)}
    return set(kind.__required_keys__) | set(kind.__optional_keys__)  # a TypedDict


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def documented_fields(text: str, types: dict[str, type]) -> tuple[dict[str, dict[str, set[str]]], list[str]]:
    """Per type named in a heading: the names in the first column of its `field` and `extra key` tables;
    and the problems of the page's form (a heading naming two types, a field table under no type)."""
    found: dict[str, dict[str, set[str]]] = {}
    problems: list[str] = []
    lines = text.splitlines()
    current, fenced, number = None, False, 0
    while number < len(lines):
        line = lines[number]
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6} (.+)", line)):
            named = [name for name in re.findall(r"`([^`]+)`", match.group(1)) if name in types]
            if len(named) > 1:
                problems.append(f"heading {match.group(1)!r} names {len(named)} types")
            current = named[0] if len(named) == 1 else None
        elif not fenced and line.startswith("|") and number + 1 < len(lines) and re.match(r"\|[\s:|-]+\|?$",
                                                                                           lines[number + 1]):
            header, header_line = _cells(line)[0], number + 1
            rows = []
            number += 2
            while number < len(lines) and lines[number].startswith("|"):
                rows.append(_cells(lines[number])[0])
                number += 1
            if header in ("field", "extra key"):
                if current is None:
                    problems.append(f"line {header_line}: a table of `{header}` under no type's heading")
                else:
                    names = found.setdefault(current, {"field": set(), "extra key": set()})[header]
                    names.update(name for row in rows for name in re.findall(r"`([^`]+)`", row))
            continue
        number += 1
    return found, problems


def schema_mismatches(text: str, types: dict[str, type]) -> list[str]:
    """What the page gets wrong about the types: a type with no table, a field it leaves out or one the
    type lacks, a key listed as extra that the type names."""
    found, problems = documented_fields(text, types)
    for name, kind in types.items():
        fields = type_fields(kind)
        tables = found.get(name)
        if tables is None or not tables["field"]:
            problems.append(f"{name}: no `field` table under a heading naming it")
            continue
        problems += [f"{name}.{field}: not on the page" for field in sorted(fields - tables["field"])]
        problems += [f"{name}.{field}: on the page, not in the type" for field in sorted(tables["field"] - fields)]
        problems += [f"{name}.{key}: listed as an extra key but the type names it"
                     for key in sorted(tables["extra key"] & fields)]
    return problems


# --- the tests -------------------------------------------------------------------------------------


def test_every_page_is_linked_from_the_readme_or_the_docs_index():
    assert INDEX.exists()
    assert unlinked_pages() == []


@pytest.mark.parametrize("page", pages(), ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_link_and_anchor_resolves(page):
    assert broken_links(page) == []


@pytest.mark.parametrize("page", pages(), ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_fold_is_closed_and_named(page):
    assert unbalanced_folds(page.read_text(encoding="utf-8")) == []


def test_the_schema_page_names_exactly_the_fields_of_the_typed_result():
    assert schema_mismatches(SCHEMA_PAGE.read_text(encoding="utf-8"), result_types()) == []


def test_the_picture_script_leaves_the_tracked_picture_alone_unless_told(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    script = runpy.run_path(str(PICTURE_SCRIPT))
    default = script["arguments"]([]).out
    assert default.is_relative_to(tmp_path) and not default.resolve().is_relative_to(ROOT)
    chosen = script["arguments"](["--out", str(script["README_PICTURE"])]).out
    assert chosen == script["README_PICTURE"] and script["README_PICTURE"].is_file()


# The checks above, fed pages and types that break them.


@dataclasses.dataclass
class _Block(schema.Block):
    alpha: int | None = None
    beta: int | None = None


SCHEMA_TEXT = """# Result
## `_Block`
| field | what |
| --- | --- |
| `alpha` | a |
| `beta` | b \\| c |

| extra key | what |
| --- | --- |
| `gamma` | kept in extra |
"""


def test_a_schema_page_with_every_field_passes():
    assert schema_mismatches(SCHEMA_TEXT, {"_Block": _Block}) == []


def test_a_field_left_out_or_made_up_is_reported():
    missing = SCHEMA_TEXT.replace("| `beta` | b \\| c |\n", "")
    assert schema_mismatches(missing, {"_Block": _Block}) == ["_Block.beta: not on the page"]
    made_up = SCHEMA_TEXT.replace("| `alpha` | a |", "| `alpha`, `delta` | a |")
    assert schema_mismatches(made_up, {"_Block": _Block}) == ["_Block.delta: on the page, not in the type"]


def test_a_typed_field_listed_as_extra_and_a_type_with_no_table_are_reported():
    assert schema_mismatches(SCHEMA_TEXT.replace("`gamma`", "`alpha`"), {"_Block": _Block}) == [
        "_Block.alpha: listed as an extra key but the type names it"]
    assert schema_mismatches(SCHEMA_TEXT.replace("## `_Block`", "## Block"), {"_Block": _Block}) == [
        "line 3: a table of `field` under no type's heading",
        "line 8: a table of `extra key` under no type's heading",
        "_Block: no `field` table under a heading naming it"]


def test_the_schema_test_reads_every_block_of_the_result():
    types = result_types()
    assert {"DemoResult", "Config", "Memory", "RankMemory", "Throughput", "Comm", "CommOp", "Timeline", "FaultLab",
            "FaultPhase", "Check", "RankStep", "Span"} <= set(types)
    assert "ranks" in type_fields(types["Memory"]) and "not_judged" in type_fields(types["Check"])
    assert "waits" in type_fields(types["RankStep"])


def test_a_link_to_no_file_or_no_heading_is_broken(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n## The result (`--json`)\n", encoding="utf-8")
    page = tmp_path / "page.md"
    text = ("## Set up\n\n[a](#set-up) [b](#try-first) [c](other.md) [d](other.md#the-result---json) "
            "[e](other.md#gone) [f](missing.md) [g](https://pytorch.org) `[h](not-a-link.md)`\n"
            "```\n[i](in-a-code-block.md)\n```\n")
    assert broken_links(page, text) == ["#try-first", "other.md#gone", "missing.md"]


def test_anchors_follow_github():
    text = "### The result (`--json`, schema `ddpfsdp.demo/1`)\n## Notes\n## Notes\n```\n# not a heading\n```\n"
    assert anchors(text) == {"the-result---json-schema-ddpfsdpdemo1", "notes", "notes-1"}
    assert slug("`memory.ranks[r]`: `RankMemory`") == "memoryranksr-rankmemory"


def test_folds_left_open_or_nested_are_reported():
    assert unbalanced_folds("<details>\n<summary>a</summary>\n\ntext\n") == ["line 1: <details> never closed"]
    assert unbalanced_folds("<details>\ntext\n</details>\n") == [
        "line 1: <details> without a <summary> on the next line"]
    assert unbalanced_folds("<details>\n<summary>a</summary>\n<details>\n<summary>b</summary>\n</details>\n") == [
        "line 3: <details> inside the one opened at line 1"]
