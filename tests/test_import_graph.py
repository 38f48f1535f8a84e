"""The package's import graph has no cycle, its stages import downwards only, and no module imports
both textual and torch.

The graph is read from the source with `ast`, every import counted wherever it stands (a deferred
import inside a function is still a dependency), so a cycle hidden behind a local import is caught
too; for the stages, so is every "package.module:attribute" string a module names for `load` (the
registry's demo code, options and hooks). The walk covers every module of the installed `ddpfsdp`
package.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import pkgutil
import re
import shutil
from pathlib import Path

ROOTS = ("ddpfsdp.quiz", "ddpfsdp.demos", "ddpfsdp.answers")


def package_modules(roots: tuple[str, ...] = ROOTS) -> dict[str, Path]:
    """Every module below the named packages, by dotted name, with its source file."""
    return dict(_package_modules(roots))


@functools.cache
def _package_modules(roots: tuple[str, ...]) -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for root in roots:
        package = importlib.import_module(root)
        modules[root] = Path(package.__file__)
        for info in pkgutil.walk_packages(package.__path__, prefix=root + "."):
            spec = importlib.util.find_spec(info.name)
            if spec is not None and spec.origin and spec.origin.endswith(".py"):
                modules[info.name] = Path(spec.origin)
    return modules


def _parsed(path: Path) -> ast.Module:
    return _parse(path.read_text(encoding="utf-8"), str(path))


@functools.cache
def _parse(source: str, filename: str) -> ast.Module:
    """A source's tree, parsed once for the module's tests however many of them read it."""
    return ast.parse(source, filename=filename)


def imported_names(name: str, path: Path) -> set[str]:
    """Dotted names a module imports, relative imports resolved; `from a import b` gives a.b and a.

    Every import statement counts, wherever it stands (a deferred import inside a function too).
    """
    tree = _parsed(path)
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


_LOAD_TARGET = re.compile(r"^(ddpfsdp(?:\.\w+)+):\w+$")


def load_targets(path: Path) -> set[str]:
    """Modules a module names in "package.module:attribute" strings, which `registry.load` imports."""
    tree = _parsed(path)
    return {match.group(1) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and (match := _LOAD_TARGET.match(node.value))}


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Edges between the given modules only (an imported name that is not a module is dropped)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {target for target in imported_names(name, path) if target in modules and target != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_package_has_no_import_cycle():
    modules = package_modules()
    assert "ddpfsdp.demos.worker" in modules and "ddpfsdp.quiz.screens.home" in modules
    assert cycles(import_graph(modules)) == []


def test_no_module_imports_both_textual_and_torch():
    both = []
    for name, path in package_modules().items():
        tops = {imported.split(".")[0] for imported in imported_names(name, path)}
        if {"textual", "torch"} <= tops:
            both.append(name)
    assert both == []


def test_a_cycle_in_a_package_is_found(tmp_path, monkeypatch):
    package = tmp_path / "cyclic"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "inner" / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyclic.inner import b\n")
    # The way back is deferred and relative: still a cycle.
    (package / "inner" / "b.py").write_text("def f():\n    from .. import c\n")
    (package / "c.py").write_text("import cyclic.a\n")
    (package / "d.py").write_text("from cyclic import c\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    modules = package_modules(("cyclic",))
    assert cycles(import_graph(modules)) == [["cyclic.a", "cyclic.c", "cyclic.inner.b"]]
    (package / "c.py").write_text("")
    assert cycles(import_graph(package_modules(("cyclic",)))) == []


# The failure lab's room (demos/faults/__init__.py says the same): what it may import, and who may
# import it. Its ranks are meant to fail, so it keeps to the launcher's process bookkeeping and never
# reaches into training, theory or the concept demos.
FAULTS_ROOM = "ddpfsdp.demos.faults"
FAULTS_MAY_IMPORT = ("ddpfsdp.demos.faults", "ddpfsdp.demos.result.checks", "ddpfsdp.demos.result.schema", "ddpfsdp.demos.worker",
                     "ddpfsdp.demos.launch", "ddpfsdp.demos.measure.memory")
FAULTS_IMPORTED_BY = ("ddpfsdp.demos.registry", "ddpfsdp.quiz")


def room_violations(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for name, targets in sorted(graph.items()):
        inside = name == FAULTS_ROOM or name.startswith(FAULTS_ROOM + ".")
        for target in sorted(targets):
            leaves = inside and not target.startswith(FAULTS_MAY_IMPORT)
            enters = not inside and target.startswith(FAULTS_ROOM) and not name.startswith(FAULTS_IMPORTED_BY)
            if leaves or enters:
                found.append(f"{name} imports {target}")
    return found


def test_the_failure_lab_keeps_to_its_room():
    modules = package_modules()
    assert "ddpfsdp.demos.faults.runner" in modules
    assert room_violations(import_graph(modules)) == []


# The katas' room (demos/katas/__init__.py says the same): it judges a learner's code with its own checker
# and torch, so it needs nothing of the training stages; the registry starts its ranks, the quiz shows it.
KATAS_ROOM = "ddpfsdp.demos.katas"
KATAS_MAY_IMPORT = ("ddpfsdp.demos.katas", "ddpfsdp.demos.result", "ddpfsdp.demos.base", "ddpfsdp.demos.theory")
KATAS_IMPORTED_BY = ("ddpfsdp.demos.registry", "ddpfsdp.quiz")


def katas_room_violations(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for name, targets in sorted(graph.items()):
        inside = name == KATAS_ROOM or name.startswith(KATAS_ROOM + ".")
        for target in sorted(targets):
            if (inside and not target.startswith(KATAS_MAY_IMPORT)) or (
                    not inside and target.startswith(KATAS_ROOM) and not name.startswith(KATAS_IMPORTED_BY)):
                found.append(f"{name} imports {target}")
    return found


def test_the_katas_keep_to_their_room():
    modules = package_modules()
    assert "ddpfsdp.demos.katas.rank" in modules
    assert katas_room_violations(import_graph(modules)) == []
    planted = {"ddpfsdp.demos.katas.rank": {"ddpfsdp.demos.launch.context"},
               "ddpfsdp.demos.train.loop": {"ddpfsdp.demos.katas.comm"}}
    assert katas_room_violations(planted) == ["ddpfsdp.demos.katas.rank imports ddpfsdp.demos.launch.context",
                                              "ddpfsdp.demos.train.loop imports ddpfsdp.demos.katas.comm"]


def test_a_failure_lab_module_reaching_into_training_is_found():
    graph = {"ddpfsdp.demos.faults.data": {"ddpfsdp.demos.train.models", "ddpfsdp.demos.result.checks"},
             "ddpfsdp.demos.concepts.sampler": {"ddpfsdp.demos.faults.catalog"}}
    assert room_violations(graph) == ["ddpfsdp.demos.concepts.sampler imports ddpfsdp.demos.faults.catalog",
                                      "ddpfsdp.demos.faults.data imports ddpfsdp.demos.train.models"]


# The stages, bottom to top: a module may import its own stage and those below it, never one above.
# The first prefix that a module's name starts with gives its stage; anything else of ddpfsdp.demos
# (shapes, units, collectives, checks, host, the package itself) is the bottom one.
STAGES = (
    ("commands", ("ddpfsdp.quiz", "ddpfsdp.answers")),
    ("launch", ("ddpfsdp.demos.launch", "ddpfsdp.demos.worker", "ddpfsdp.demos.registry", "ddpfsdp.demos.faults")),
    ("train and measure", ("ddpfsdp.demos.train", "ddpfsdp.demos.measure", "ddpfsdp.demos.concepts",
                           "ddpfsdp.demos.parallel", "ddpfsdp.demos.claims", "ddpfsdp.demos.katas")),
    ("theory", ("ddpfsdp.demos.theory",)),
)
BOTTOM = "shapes and units"
ORDER = [BOTTOM, *reversed([name for name, _ in STAGES])]


RANKS_SIDE = ("ddpfsdp.demos.worker", "ddpfsdp.demos.launch.agent")  # started as processes by the launcher, never imported


def stage_of(module: str) -> str:
    for name, prefixes in STAGES:
        if any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes):
            return name
    return BOTTOM


def stage_violations(modules: dict[str, Path]) -> list[str]:
    """Every import, and every "module:attribute" string, that points into a higher stage; and the
    launcher's side of the launch reaching into the ranks' side (the worker)."""
    graph = import_graph(modules)
    found = []
    for name, path in sorted(modules.items()):
        strings = {target for target in load_targets(path) if target in modules}
        for target in sorted(graph[name] | strings):
            how = "names" if target in strings - graph[name] else "imports"
            if ORDER.index(stage_of(target)) > ORDER.index(stage_of(name)):
                found.append(f"{name} {how} {target} ({stage_of(target)} is above {stage_of(name)})")
            elif name.startswith("ddpfsdp.demos.launch.") and name not in RANKS_SIDE and target in RANKS_SIDE:
                found.append(f"{name} {how} {target} (the launcher's side of the launch never imports the ranks')")
    return found


def test_every_stage_imports_only_itself_and_the_stages_below():
    modules = package_modules()
    assert {stage_of(name) for name in modules} == set(ORDER)
    assert stage_of("ddpfsdp.demos.base.shapes") == BOTTOM and stage_of("ddpfsdp.demos.theory.run") == "theory"
    assert stage_violations(modules) == []


def _planted(tmp_path: Path, module: str, line: str) -> dict[str, Path]:
    """The package's modules, with `module` read from a copy that has `line` added at its end."""
    modules = package_modules()
    copy = tmp_path / modules[module].name
    shutil.copy(modules[module], copy)
    copy.write_text(copy.read_text(encoding="utf-8") + "\n" + line + "\n", encoding="utf-8")
    return {**modules, module: copy}


def test_a_planted_upward_import_is_found(tmp_path):
    modules = _planted(tmp_path, "ddpfsdp.demos.theory.state", "def f():\n    from ddpfsdp.demos.train.spec import RunSpec")
    assert stage_violations(modules) == [
        "ddpfsdp.demos.theory.state imports ddpfsdp.demos.train.spec (train and measure is above theory)"]


def test_a_planted_registry_string_into_the_quiz_is_found(tmp_path):
    modules = _planted(tmp_path, "ddpfsdp.demos.registry", 'COMMAND = "ddpfsdp.quiz.commands.fault:fault"')
    assert stage_violations(modules) == [
        "ddpfsdp.demos.registry names ddpfsdp.quiz.commands.fault (commands is above launch)"]


def test_the_launcher_importing_the_worker_is_found(tmp_path):
    modules = _planted(tmp_path, "ddpfsdp.demos.launch.launcher", "from ddpfsdp.demos.worker import main")
    assert stage_violations(modules) == ["ddpfsdp.demos.launch.launcher imports ddpfsdp.demos.worker (the launcher's "
                                         "side of the launch never imports the ranks')"]


def test_the_launcher_importing_the_agent_is_found(tmp_path):
    modules = _planted(tmp_path, "ddpfsdp.demos.launch.launcher", "from ddpfsdp.demos.launch.agent import supervise")
    assert stage_violations(modules) == ["ddpfsdp.demos.launch.launcher imports ddpfsdp.demos.launch.agent (the launcher's "
                                         "side of the launch never imports the ranks')"]
