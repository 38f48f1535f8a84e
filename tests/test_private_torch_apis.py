"""The private torch APIs the project relies on: each one is listed, with why, and still in the torch installed.

torch makes no promise about names that start with an underscore: a release may move or drop them. So
every one the project uses is listed here with where torch defines it, and this test

- looks each up in the installed torch, and on a miss names the API, the files that use it and why they
  need it (so an upgrade that moves one says exactly what broke, before a demo does);
- reads the project's source (ast) for private torch names, and fails on one that is not listed, or
  on a listed one that nothing uses any more, so the list cannot go stale.

The scan finds: imports of, and attribute chains on, torch modules with a private part
(`torch._C._distributed_c10d._dump_fr_trace`, `from torch.utils._python_dispatch import ...`); a
private attribute (`x._schema`) or a private-looking string (`"_allgather_base_"`, `"torch._dynamo"`)
that names nothing the project defines itself.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCE_FOLDERS = ("demos", "quiz")

CUDA_BUILD = "a CUDA build"  # a third element: the API exists only in such a torch, and is looked up only there

# As the scan reports it -> (where torch defines it, why the project needs it[, CUDA_BUILD]). A member or
# a string the scan cannot place (`._schema`, `'_allgather_base_'`) is keyed by its name alone.
PRIVATE_TORCH_APIS: dict[str, tuple[str, ...]] = {
    # the simulation (train/simulate.py): fake tensors over a fake process group, measured by torch's trackers
    "torch.testing._internal.distributed.fake_pg.FakeStore": (
        "torch.testing._internal.distributed.fake_pg.FakeStore", "the store of the fake process group"),
    "torch._subclasses.fake_tensor.FakeTensorMode": (
        "torch._subclasses.fake_tensor.FakeTensorMode", "tensors with shapes and no storage"),
    "torch.distributed._tools.mem_tracker.MemTracker": (
        "torch.distributed._tools.mem_tracker.MemTracker", "peak and its breakdown by kind (DDP, ZeRO-1)"),
    "torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker": (
        "torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker", "peak and its breakdown by kind (FSDP2)"),
    "torch.distributed._tools.fsdp2_mem_tracker._FSDPModState": (
        "torch.distributed._tools.fsdp2_mem_tracker._FSDPModState", "which FSDP phase a peak fell in"),
    "torch.distributed._tools.fsdp2_mem_tracker._FSDPRefType": (
        "torch.distributed._tools.fsdp2_mem_tracker._FSDPRefType", "the FSDP buffer kinds of a breakdown"),
    "torch.distributed.fsdp._fully_shard._fsdp_param": (
        "torch.distributed.fsdp._fully_shard._fsdp_param", "where FSDP2 shards a parameter: the module whose "
        "chunk helper the simulation swaps while it shards over a fake world"),
    "torch.distributed.fsdp._fully_shard._fsdp_param._chunk_with_empty": (
        "torch.distributed.fsdp._fully_shard._fsdp_param._chunk_with_empty", "the chunks of each parameter "
        "FSDP2 cuts while it shards, one per rank: swapped for RankChunks, which makes only those read"),
    "torch.distributed.fsdp._fully_shard._fsdp_common._chunk_with_empty": (
        "torch.distributed.fsdp._fully_shard._fsdp_common._chunk_with_empty", "torch's own chunk helper, "
        "which RankChunks falls back to where a dimension is empty"),
    "torch.distributed._tools.mod_tracker": (
        "torch.distributed._tools.mod_tracker", "the module a peak fell in"),
    "._update_peak_stats": (
        "torch.distributed._tools.mem_tracker.MemTracker._update_peak_stats", "the breakdown at the peak (measure/breakdown.py)"),
    "._mod_tracker": ("torch.distributed._tools.mem_tracker.MemTracker._mod_tracker",
                      "the tracker's module hooks, removed after the step so no model stays alive"),
    "._peak_mem": ("torch.distributed._tools.mem_tracker.MemTracker._peak_mem", "the tracker's peak per device"),
    "._in_opt": ("torch.distributed._tools.mem_tracker.MemTracker._in_opt", "whether the peak fell in the optimizer step"),
    "._curr_mem_snap": ("torch.distributed._tools.mem_tracker.MemTracker._curr_mem_snap",
                        "the simulation's tracker reads the running totals by category (train/simulate.py)"),
    "._fake_mode_on_entry": ("torch.distributed._tools.mem_tracker.MemTracker._fake_mode_on_entry",
                             "the fake mode the tracker entered under: a device query is counted only there"),
    "torch._guards.active_fake_mode": ("torch._guards.active_fake_mode",
                                       "the fake mode a device query runs under (train/simulate.py)"),
    "._peak_mem_snap": ("torch.distributed._tools.mem_tracker.MemTracker._peak_mem_snap",
                        "the simulation's tracker keeps the categories at the peak (train/simulate.py)"),
    # counting collectives and following a step in time (measure/comm.py, measure/timeline.py)
    "torch.utils._python_dispatch.TorchDispatchMode": (
        "torch.utils._python_dispatch.TorchDispatchMode", "seeing every collective and allocation as it is dispatched"),
    "torch.utils._pytree.tree_leaves": ("torch.utils._pytree.tree_leaves", "the tensors among an op's arguments"),
    "torch.distributed.distributed_c10d._resolve_process_group": (
        "torch.distributed.distributed_c10d._resolve_process_group", "the group (and its size) a collective ran on"),
    "torch._C._distributed_c10d.Work.unbox": (
        "torch._C._distributed_c10d.Work.unbox", "the Work of a dispatched collective, to time its completion"),
    "torch.autograd.Variable._execution_engine.queue_callback": (
        "torch.autograd.Variable._execution_engine.queue_callback", "a callback when backward ends"),
    "._schema": ("torch._ops.OpOverload._schema", "an op's argument names"),
    "'_allgather_base_'": ("torch.ops.c10d._allgather_base_", "the c10d op an all-gather into one tensor dispatches"),
    "'_reduce_scatter_base_'": ("torch.ops.c10d._reduce_scatter_base_", "the c10d op a tensor reduce-scatter dispatches"),
    "'_c10d_functional'": ("torch.ops._c10d_functional.all_reduce", "functional collectives' op namespace"),
    # expert parallelism (parallel/expert_parallel.py): torchtitan's dispatch and combine
    "torch.distributed._functional_collectives.all_to_all_single": (
        "torch.distributed._functional_collectives.all_to_all_single", "the experts' split sizes exchanged first"),
    "torch.distributed._functional_collectives.all_to_all_single_autograd": (
        "torch.distributed._functional_collectives.all_to_all_single_autograd",
        "the tokens' all-to-all with a backward (the split sizes swapped)"),
    "torch.ops._c10d_functional.wait_tensor": ("torch.ops._c10d_functional.wait_tensor",
                                               "a functional collective's result, waited for"),
    "torch._foreach_copy_": ("torch._foreach_copy_", "an expert replica's gradients written back in one call"),
    "torch._foreach_div_": ("torch._foreach_div_", "the experts' gradients divided by the data-parallel degree"),
    "torch.distributed._functional_collectives.AsyncCollectiveTensor": (
        "torch.distributed._functional_collectives.AsyncCollectiveTensor",
        "a functional collective's pending result, let through so its wait is seen (measure/comm.py)"),
    # memory (measure/memory.py, measure/blas_workspaces.py)
    "torch._C": ("torch._C", "where the release of cuBLAS's workspaces lives"),
    "'_cuda_clearCublasWorkspaces'": ("torch._C._cuda_clearCublasWorkspaces",
                                      "frees cuBLAS's workspaces before each run's baseline", CUDA_BUILD),
    "torch._C._profiler._EventType": ("torch._C._profiler._EventType", "allocation events of the CPU peak"),
    "'_get_ddp_logging_data'": (
        "torch.nn.parallel.DistributedDataParallel._get_ddp_logging_data", "the bytes of DDP's gradient buckets"),
    # FSDP1's units and wrappers (parallel/strategies.py, measure/breakdown.py)
    "._flat_param": ("torch.distributed.fsdp.FullyShardedDataParallel._flat_param", "an FSDP1 unit's flat parameter"),
    "._numels": ("torch.distributed.fsdp._flat_param.FlatParameter._numels", "the parameters an FSDP1 unit holds"),
    "'_fsdp_wrapped_module'": (
        "torch.distributed.fsdp.FullyShardedDataParallel._fsdp_wrapped_module", "FSDP1's wrapped module, and its name"),
    "'_checkpoint_wrapped_module'": (
        "torch.distributed.algorithms._checkpoint.checkpoint_wrapper.ActivationWrapper._checkpoint_wrapped_module",
        "a checkpoint wrapper's name in a module path"),
    "'_orig_mod'": ("torch._dynamo.eval_frame.OptimizedModule._orig_mod", "a compiled module's name in a module path"),
    # counting recomputation (concepts/checkpoint.py): attention's aten ops
    "'_scaled_dot_product_flash_attention_for_cpu'": (
        "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu", "attention on CPU counts as a matmul"),
    "'_scaled_dot_product_flash_attention'": (
        "torch.ops.aten._scaled_dot_product_flash_attention", "attention on GPU counts as a matmul"),
    "'_scaled_dot_product_efficient_attention'": (
        "torch.ops.aten._scaled_dot_product_efficient_attention", "attention on GPU counts as a matmul"),
    "'_scaled_dot_product_cudnn_attention'": (
        "torch.ops.aten._scaled_dot_product_cudnn_attention", "attention on GPU counts as a matmul"),
    # the failure lab (faults/): the flight recorder and what loads before the group starts
    "torch._C._distributed_c10d._dump_fr_trace": (
        "torch._C._distributed_c10d._dump_fr_trace", "each rank's flight-recorder entries"),
    "torch.distributed.distributed_c10d._world": (
        "torch.distributed.distributed_c10d._world", "the groups' configuration the dump leaves out"),
    "torch.utils._traceback.CapturedTraceback": (
        "torch.utils._traceback.CapturedTraceback", "symbolising the recorded stacks ahead of time"),
    "'torch._dynamo'": ("torch._dynamo", "imported before the group starts, as DDP's first construction imports it"),
    # --compile (parallel/compiled.py): what torch records of a compile
    "torch._dynamo": ("torch._dynamo", "torch.compile's front end, imported for reset and lookup_backend"),
    "torch._dynamo.reset": ("torch._dynamo.reset", "each compiled run starts from an empty cache (compare trains four)"),
    "torch._dynamo.lookup_backend": ("torch._dynamo.lookup_backend", "the real backend behind the recording one"),
    "torch._dynamo.utils.counters": ("torch._dynamo.utils.counters", "graph breaks and their reasons, graphs traced"),
    "torch._dynamo.utils.compilation_time_metrics": (
        "torch._dynamo.utils.compilation_time_metrics", "compile time by phase (Dynamo's frames, lazy backward)"),
    "'_dynamo_source'": ("torch._dynamo.backends.distributed.propagate_dynamo_source",
                         "the parameter each compiled graph's input is (DDPOptimizer copies it onto each piece)"),
    "._get_ddp_logging_data": ("torch.nn.parallel.DistributedDataParallel._get_ddp_logging_data",
                               "DDP's rebuilt buckets, set beside DDPOptimizer's pieces"),
    # katas (demos/katas/): the oracles learners are judged against, and the checker's own plumbing
    "torch.distributed._compute_bucket_assignment_by_size": (
        "torch.distributed._compute_bucket_assignment_by_size", "the ddp-buckets kata's oracle: DDP's own assignment"),
    "'_compute_bucket_assignment_by_size'": (
        "torch.distributed._compute_bucket_assignment_by_size", "the name the ddp-buckets kata refuses in a learner's file"),
    "torch.distributed.pipelining.schedules.Schedule1F1B._step_microbatches": (
        "torch.distributed.pipelining.schedules.Schedule1F1B._step_microbatches",
        "the one-f-one-b kata's oracle: 1F1B's runtime loop, run on a stand-in stage that records its actions"),
    "'_step_microbatches'": ("torch.distributed.pipelining.schedules.Schedule1F1B._step_microbatches",
                             "refused (patched to raise) while a learner's 1F1B code runs"),
    "'_get_pipeline_order'": ("torch.distributed.pipelining.schedules.Schedule1F1B._get_pipeline_order",
                              "refused in a learner's 1F1B file; not the oracle, since its IR is off by one"),
    "torch.distributed.distributed_c10d._get_default_store": (
        "torch.distributed.distributed_c10d._get_default_store",
        "the kata board: each rank's wait, readable when every rank is blocked in a receive"),
    "torch.distributed.distributed_c10d._set_pg_timeout": (
        "torch.distributed.distributed_c10d._set_pg_timeout",
        "holds a learner's direct torch.distributed waits to the kata's deadline"),
    # context parallelism (parallel/context_parallel.py, parallel/degrees.py): the ring's block kernel, FSDP's mesh
    "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu": (
        "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
        "one ring block's attention on CPU with its log-sum-exp, which the online softmax merges"),
    "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward": (
        "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward",
        "one ring block's gradients on CPU from the merged output and log-sum-exp"),
    "._flatten": ("torch.distributed.device_mesh.DeviceMesh._flatten",
                  "FSDP's mesh under context parallelism: dp_shard and cp flattened into one (torchtitan's dp_shard_cp)"),
}


# ----------------------------------------------------------------------------- the scan


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def _torch_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> the torch path it is bound to, from the file's imports."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "torch" or alias.name.startswith("torch."):
                    aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else "torch"
        elif isinstance(node, ast.ImportFrom) and node.module and (node.module == "torch" or node.module.startswith("torch.")):
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _module_names(tree: ast.Module) -> set[str]:
    """Names bound anywhere in the file by an import, a def, a class or an assignment."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _chain(node: ast.expr) -> tuple[str, list[str]] | None:
    """(root name, attributes) of `a.b.c`, or None where the chain does not start at a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return (node.id, parts[::-1]) if isinstance(node, ast.Name) else None


def _torch_classes(tree: ast.Module, aliases: dict[str, str]) -> list[ast.ClassDef]:
    """Classes built on a torch class: a base from a torch import, or one passed in (a parameter), which
    here is always a torch tracker. Their `self._x` may be torch's own private state."""
    bound = _module_names(tree) - set(aliases)
    derived = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            roots = [chain[0] for chain in map(_chain, node.bases) if chain]
            if any(root in aliases or root not in bound for root in roots):
                derived.append(node)
    return derived


def _defined_names(trees: list[ast.Module]) -> set[str]:
    """Every name the project defines: functions, classes, parameters, assigned names and its own attributes
    (a method of a class built on a torch class may override torch's: it defines nothing of the project's)."""
    names: set[str] = set()
    for tree in trees:
        overrides = {id(item) for cls in _torch_classes(tree, _torch_aliases(tree)) for item in cls.body}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and id(node) not in overrides:
                names.add(node.name)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                  and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                names.add(node.attr)  # its own attribute (patching another object's is not defining it)
            elif isinstance(node, ast.alias) and not node.name.startswith("torch"):
                names.add((node.asname or node.name).split(".")[0])
    return names


class _Scan:
    """One file's private torch names, into `found` (name -> files)."""

    def __init__(self, path: str, tree: ast.Module, defined: set[str], found: dict[str, set[str]]) -> None:
        self.path, self.defined, self.found = path, defined, found
        self.aliases = _torch_aliases(tree)
        self.in_fstring = {id(value) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
                           for value in node.values}
        # self.<attribute> in a class built on a torch class -> the names that class defines itself
        self.torch_self: dict[int, set[str]] = {}
        for cls in _torch_classes(tree, self.aliases):
            own = {item.name for item in cls.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}
            own |= {n.attr for n in ast.walk(cls) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)}
            for node in ast.walk(cls):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                    self.torch_self[id(node)] = own
        self.chained: set[int] = set()
        for node in ast.walk(tree):
            self.visit(node)

    def add(self, name: str) -> None:
        self.found[name].add(self.path)

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("torch.") and any(map(_private, alias.name.split("."))):
                    self.add(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("torch"):
            for alias in node.names:
                if any(map(_private, f"{node.module}.{alias.name}".split("."))):
                    self.add(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Attribute) and id(node) not in self.chained:
            self.attribute(node)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in self.in_fstring
              and re.fullmatch(r"[A-Za-z_][\w.]*", node.value)):
            text = node.value.strip(".")
            if text.startswith("torch.") and any(map(_private, text.split("."))):
                self.add(f"'{text}'")
            elif _private(text) and "." not in text and text not in self.defined:
                self.add(f"'{text}'")

    def attribute(self, node: ast.Attribute) -> None:
        """A whole chain `a.b._c.d`, judged once from its outermost node."""
        inner: ast.expr = node
        while isinstance(inner, ast.Attribute):
            self.chained.add(id(inner))
            innermost = inner
            inner = inner.value
        chain = _chain(node)
        if chain is None:
            members = [node.attr]
        else:
            root, parts = chain
            if root in self.aliases:
                if any(map(_private, parts)):
                    self.add(".".join([self.aliases[root], *parts]))
                return
            # self's own attributes are the project's, unless its class is built on a torch class and
            # does not define them itself
            inherited = id(innermost) in self.torch_self and parts[0] not in self.torch_self[id(innermost)]
            own = root in ("self", "cls") and not inherited
            members = parts[1:] if own or root in ("os", "sys") else parts
        for member in members:
            if _private(member) and member not in self.defined:
                self.add(f".{member}")


def scan(files: dict[str, str]) -> dict[str, set[str]]:
    """Private torch names used in `files` (path -> source), each with the paths that use it."""
    trees = {path: ast.parse(source) for path, source in files.items()}
    defined = _defined_names(list(trees.values()))
    found: dict[str, set[str]] = defaultdict(set)
    for path, tree in trees.items():
        _Scan(path, tree, defined, found)
    return dict(found)


def _project_sources() -> dict[str, str]:
    return {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8")
            for folder in SOURCE_FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))}


# ----------------------------------------------------------------------------- finding an API in torch


def _class_sets(cls: type, member: str) -> bool:
    """Whether `cls` (or a base) assigns `self.<member>` in its source: an attribute made per instance."""
    for klass in inspect.getmro(cls):
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        if re.search(rf"\bself\.{re.escape(member)}\s*(:[^=\n]+)?=[^=]", source):
            return True
    return False


def locate(path: str) -> str | None:
    """None when torch has `path` (a module, then attributes), else what is missing."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
            break
        except ImportError:
            continue
    else:
        return f"no module {parts[0]}"
    for index, part in enumerate(parts[cut:], start=cut):
        try:
            found = getattr(found, part)
        except (AttributeError, RuntimeError):
            if isinstance(found, type) and index == len(parts) - 1 and _class_sets(found, part):
                return None
            return f"{'.'.join(parts[:index])} has no {part}"
    return None


# ----------------------------------------------------------------------------- the tests


@pytest.fixture(scope="module")
def used() -> dict[str, set[str]]:
    return scan(_project_sources())


@pytest.mark.parametrize("name", sorted(PRIVATE_TORCH_APIS))
def test_each_listed_private_api_is_in_this_torch(name, used):
    import torch

    where, why, *needs = PRIVATE_TORCH_APIS[name]
    if CUDA_BUILD in needs and torch.version.cuda is None:
        pytest.skip(f"{where} exists only in {CUDA_BUILD} of torch")
    missing = locate(where)
    users = ", ".join(sorted(used.get(name, ()))) or "no file"
    assert missing is None, (f"torch {torch.__version__} lacks the private API {where} ({missing}), which "
                             f"{users} uses: {why}. Find where this torch moved it, or pin torch below this version.")


def test_every_private_torch_name_in_the_source_is_listed(used):
    unlisted = {name: files for name, files in used.items() if name not in PRIVATE_TORCH_APIS}
    assert not unlisted, "private torch names not in PRIVATE_TORCH_APIS (add each, with where torch defines it " \
        "and why it is needed):\n" + "\n".join(f"  {name} in {', '.join(sorted(files))}" for name, files in
                                                 sorted(unlisted.items()))


def test_every_listed_name_is_still_used(used):
    stale = sorted(set(PRIVATE_TORCH_APIS) - set(used))
    assert not stale, f"listed in PRIVATE_TORCH_APIS but used by no file any more (remove them): {', '.join(stale)}"


SAMPLE = '''
import os
import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode
from torch.distributed._tools import mod_tracker

class Timer:
    def _mark(self):
        self._start = 0

def f(tracker, op, timer):
    dist.distributed_c10d._resolve_process_group(None)
    torch._C._distributed_c10d.Work.unbox(op)
    tracker._update_peak_stats(1)
    timer._mark()
    os._exit(0)
    getattr(op, "_orig_mod", None)
    name = f"{op}_bytes"
    return torch.nn.Linear, "torch._dynamo", "_start"

def locating(base):
    class Locating(base):  # a tracker class passed in: its private state is torch's
        def _update_peak_stats(self):
            self._seen = 1
            return self._peak_mem, self._seen, self._update_peak_stats

    return Locating

class Mode(TorchDispatchMode):
    def _enter(self):
        return self._enter, self._mode_key
'''


def test_the_scan_finds_each_kind_of_use_and_nothing_of_the_project_own():
    found = scan({"sample.py": SAMPLE})
    assert set(found) == {
        "torch.utils._python_dispatch.TorchDispatchMode",
        "torch.distributed._tools.mod_tracker",
        "torch.distributed.distributed_c10d._resolve_process_group",
        "torch._C._distributed_c10d.Work.unbox",
        "._update_peak_stats",
        "'_orig_mod'",
        "'torch._dynamo'",
        "._peak_mem",  # inherited state of a class built on a passed-in tracker class
        "._mode_key",  # inherited state of a TorchDispatchMode
    }, found
    assert found["._update_peak_stats"] == {"sample.py"}


def test_a_missing_api_is_named():
    assert locate("torch.utils._python_dispatch.TorchDispatchMode") is None
    assert locate("torch.distributed._tools.mem_tracker.MemTracker._peak_mem") is None  # set per instance
    assert locate("torch.utils._python_dispatch.NoSuchMode") == "torch.utils._python_dispatch has no NoSuchMode"
    assert locate("torch.distributed._tools.mem_tracker.MemTracker._no_such_member") == (
        "torch.distributed._tools.mem_tracker.MemTracker has no _no_such_member")
    assert locate("torch.ops.c10d._no_such_op_") == "torch.ops.c10d has no _no_such_op_"
