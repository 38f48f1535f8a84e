"""Short functions and files: no function in quiz/ or demos/ over 100 lines, no file over 800.

A function's length counts from its first decorator to its last line (`end_lineno - lineno + 1`, with
the decorators' lines), so a click command's options count with it. A function already over the limit
when the rule came is listed in OVER_THE_LIMIT with its length then: it may not grow, and once it is
within the limit its entry must go, so the list only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("quiz", "demos")
MAX_FUNCTION_LINES = 100
MAX_FILE_LINES = 800
# "path:qualified name" -> its length when the rule came in (to be broken into named steps)
OVER_THE_LIMIT: dict[str, int] = {}


def function_lengths(source: str) -> dict[str, int]:
    """Qualified name (Class.method, outer.inner) -> lines from its first decorator to its end."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    lengths[name] = child.end_lineno - first + 1
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return lengths


def _sources() -> dict[str, str]:
    return {path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
            for folder in FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))}


def test_no_function_is_longer_than_100_lines():
    found = {f"{path}:{name}": length for path, source in _sources().items()
             for name, length in function_lengths(source).items() if length > MAX_FUNCTION_LINES}
    new = {name: length for name, length in found.items()
           if name not in OVER_THE_LIMIT or length > OVER_THE_LIMIT[name]}
    assert not new, "functions over 100 lines (break each into named steps): " + ", ".join(
        f"{name} ({length} lines)" for name, length in sorted(new.items()))
    fixed = sorted(set(OVER_THE_LIMIT) - set(found))
    assert not fixed, f"within the limit now, so remove them from OVER_THE_LIMIT: {', '.join(fixed)}"


def test_no_file_is_longer_than_800_lines():
    long = {path: len(source.splitlines()) for path, source in _sources().items()
            if len(source.splitlines()) > MAX_FILE_LINES}
    assert not long, "files over 800 lines (split them by concern): " + ", ".join(
        f"{path} ({lines} lines)" for path, lines in sorted(long.items()))


def test_lengths_count_decorators_and_nested_functions():
    source = (
        "import click\n"            # 1
        "@click.command()\n"        # 2
        "@click.option('--n')\n"    # 3
        "def command(n):\n"         # 4
        "    def step():\n"         # 5
        "        return 1\n"        # 6
        "    return step()\n"       # 7
        "class Screen:\n"           # 8
        "    async def on_key(self):\n"  # 9
        "        pass\n"            # 10
    )
    assert function_lengths(source) == {"command": 6, "command.step": 2, "Screen.on_key": 2}
