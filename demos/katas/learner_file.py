"""What is checked of a learner's file before any rank starts: it can be read, it parses, it defines what
the kata calls, and it names nothing the kata forbids.

Each finding is a sentence for the learner with the line it is about. Reading the file is all this
does: nothing in it runs here, and no torch is imported, so `ddpfsdp kata check` refuses a broken file
at once, without launching anything.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from ddpfsdp.demos.katas.catalog import Kata

# Calls of torch.distributed's own that a kata restricting its operations refuses by name; what the
# kata allows (its `allowed`) is left out of the list for it.
DIST_OPERATIONS = {
    "all_reduce": "all_reduce", "all_gather": "all_gather", "all_gather_into_tensor": "all_gather_into_tensor",
    "all_gather_single": "all_gather_single", "reduce_scatter": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter_tensor", "reduce_scatter_single": "reduce_scatter_single",
    "all_to_all": "all_to_all", "all_to_all_single": "all_to_all_single", "broadcast": "broadcast",
    "reduce": "reduce", "gather": "gather", "scatter": "scatter", "send": "send", "recv": "recv", "isend": "isend",
    "irecv": "irecv", "batch_isend_irecv": "batch_isend_irecv", "all_reduce_coalesced": "all_reduce_coalesced",
}


class FileProblem(Exception):
    """The learner's file cannot be checked as it is: the message says why and what to do."""


@dataclass(frozen=True)
class ForbiddenUse:
    """A name the file uses that the kata forbids."""

    name: str
    line: int
    why: str

    def message(self, path: Path) -> str:
        return f"{path.name}, line {self.line}: {self.why}"


def read(path: Path) -> str:
    """The file's text; FileProblem when it is missing, a folder or unreadable."""
    if not path.exists():
        raise FileProblem(f"{path} does not exist")
    if path.is_dir():
        raise FileProblem(f"{path} is a folder, not a Python file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise FileProblem(f"{path} is not UTF-8 text ({error.reason} at byte {error.start})") from None
    except OSError as error:
        raise FileProblem(f"{path} cannot be read ({error.strerror})") from None


def parse(path: Path, text: str) -> ast.Module:
    """The file's syntax tree; FileProblem with the line and the caret for a syntax error."""
    try:
        return ast.parse(text, filename=str(path))
    except SyntaxError as error:
        where = f"line {error.lineno}" + (f", column {error.offset}" if error.offset else "")
        shown = ""
        if error.text:
            line = error.text.rstrip("\n")
            caret = " " * (max(1, error.offset or 1) - 1 - (len(line) - len(line.lstrip()))) + "^"
            shown = f"\n    {line.strip()}\n    {caret}"
        raise FileProblem(f"{path.name} has a syntax error at {where}: {error.msg}{shown}") from None


def check_defines(path: Path, tree: ast.Module, kata: Kata) -> None:
    """FileProblem unless the file defines `kata.defines` at its top level (a def, a class, or an assignment)."""
    defined: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined[node.name] = node.lineno
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    defined[target.id] = node.lineno
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                defined[(alias.asname or alias.name).split(".")[0]] = node.lineno
    if kata.defines in defined:
        return
    near = [name for name in defined if name.lower().replace("_", "") == kata.defines.lower().replace("_", "")]
    also = f" (it defines {near[0]!r}: the name must be exactly {kata.defines!r})" if near else ""
    raise FileProblem(f"{path.name} does not define {kata.defines}{also}; the checker calls {kata.signature}")


def forbidden_uses(tree: ast.Module, kata: Kata) -> list[ForbiddenUse]:
    """Every use of a name the kata forbids: its answer itself (`forbidden_names`), or a torch.distributed
    operation it does not allow, called as dist.NAME or torch.distributed.NAME or imported by name."""
    found: list[ForbiddenUse] = []
    refused_ops = {name for name in DIST_OPERATIONS if kata.uses_comm and not kata.allows(name)}
    dist_aliases = _dist_aliases(tree)
    for node in ast.walk(tree):
        names: list[tuple[str, str]] = []  # (name, how it is reached)
        if isinstance(node, ast.Name):
            names.append((node.id, "name"))
        elif isinstance(node, ast.Attribute):
            names.append((node.attr, "dist" if _is_dist(node.value, dist_aliases) else "attribute"))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names += [(alias.name, "dist" if module == "torch.distributed" else "import") for alias in node.names]
            names.append((module.split(".")[0], "module"))
        elif isinstance(node, ast.Import):
            names += [(alias.name.split(".")[0], "module") for alias in node.names]
        for name, how in names:
            if name in kata.forbidden_names:
                found.append(ForbiddenUse(name, node.lineno, f"{name} is the answer this kata asks you to write; "
                                                             "write it yourself"))
            elif how == "dist" and name in refused_ops:
                found.append(ForbiddenUse(name, node.lineno, f"torch.distributed.{name} is not allowed in {kata.name}: "
                                                             f"{kata.instead}"))
    unique = {(use.name, use.line): use for use in found}
    return sorted(unique.values(), key=lambda use: use.line)


def _dist_aliases(tree: ast.Module) -> set[str]:
    """The names torch.distributed goes by in the file (`import torch.distributed as dist` gives 'dist')."""
    aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {alias.asname for alias in node.names if alias.name == "torch.distributed" and alias.asname}
        elif isinstance(node, ast.ImportFrom) and node.module == "torch":
            aliases |= {alias.asname or alias.name for alias in node.names if alias.name == "distributed"}
    return aliases


def _is_dist(node: ast.AST, aliases: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in aliases
    return (isinstance(node, ast.Attribute) and node.attr == "distributed" and isinstance(node.value, ast.Name)
            and node.value.id == "torch")


@dataclass(frozen=True)
class Reading:
    """A learner's file as read before the run: what it forbids, if anything (an empty list: none)."""

    path: Path
    forbidden: list[ForbiddenUse]


def read_learner_file(path: Path, kata: Kata) -> Reading:
    """Read, parse and check a learner's file for `kata`; FileProblem when it cannot be run at all."""
    text = read(path)
    tree = parse(path, text)
    check_defines(path, tree, kata)
    return Reading(path, forbidden_uses(tree, kata))
