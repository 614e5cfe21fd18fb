"""The project's import graph: no circle anywhere, and no arrow from a lower layer to a higher one.

Every `import` counts, at module level or inside a function (a function-local import is still an arrow: it only
hides a loop from the reader). Importing `a.b.c` also runs `a/__init__.py` and `a/b/__init__.py`, so a module
depends on the packages above it too.

LAYERS is the one written statement of the layering (docs/architecture.md explains it): the top level runs
launch.py -> orchestrator -> models -> ops, and inside each package its parts are listed from the bottom up. A part
may import its own layer and any layer below it, never one above. A module or package not listed under its parent
fails the test, so a new room has to be placed in the order when it is made.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Each package's parts from the bottom layer up; parts of one inner list share a layer (they must still not form
# a circle). A part is a direct submodule or subpackage, named without its parent.
LAYERS: dict[str, list[list[str]]] = {
    "": [["ops"], ["models"], ["orchestrator"], ["launch"]],
    # ops: (its parts, bottom up)
    "ops": [["atomic", "lean_keras"], ["modes"], ["build"],
            ["tf_binding", "torch_binding", "describe", "tables", "torch_build", "torch_ops"],
            ["keras_ops", "selftest_frameworks"], ["keras_integer"], ["selftest"]],
    "ops.modes": [["table_files", "operands", "costs", "c_models", "circuit_errors", "integer_names"],
                  ["multipliers", "integer_tables", "significand_tables", "evoapprox"],
                  ["reference", "arguments", "integer_reference"],
                  ["table_make", "error_stats"], ["describe", "table_command"]],
    "ops.build": [["common"], ["cuda"], ["tf_library", "torch_library"], ["__main__"]],
    "ops.tf_binding": [["library"], ["gradients", "kernel_paths"], ["api"]],
    "ops.torch_binding": [["ops"]],

    # models: (its parts, bottom up)
    "models": [["datasets", "resnet_depths", "engines", "batchnorm", "cuda_probe", "layer_names"],
               ["layers", "integer_layers", "layer_rules"], ["integer_calibration"], ["layer_maker", "convert", "optim"],
               ["lenet", "resnet"], ["registry"], ["layer_list"], ["download", "profile"]],

    # orchestrator: (its parts, bottom up)
    "orchestrator": [["environment", "common"], ["tracking", "schedulers"], ["config"], ["report"], ["cell"],
                     ["sweep", "cluster", "weights", "rerun", "explore"],
                     # older module names, kept for jobs and scripts from before the packages (each imports its new one)
                     ["callbacks", "launching", "worker", "tracking_import"]],
    "orchestrator.common": [["paths", "filesystems", "cellfiles", "permissions", "interrupts"]],
    "orchestrator.tracking": [["dashboard", "launches"], ["mode", "queue", "writer", "system_metrics", "server_access"],
                              ["tracker", "importer", "reads"]],
    "orchestrator.schedulers": [["resources", "scripts"], ["slurm", "pbs", "limits"],
                                ["params", "job_status", "submit"]],
    "orchestrator.schedulers.pbs": [["pbspro_json", "script", "params"], ["qstat"], ["query"], ["executor"],
                                    ["job_environment"], ["__main__"]],
    "orchestrator.config": [["keys"], ["validate"], ["identity"], ["cell"]],
    "orchestrator.report": [["figures", "table", "paired"], ["scope", "comparisons", "histories", "summary_run"],
                            ["front", "sensitivity"], ["page", "exploration_figures"], ["files"], ["__main__"]],
    "orchestrator.explore": [["grid"], ["sensitivity", "search"], ["__main__"]],
    "orchestrator.cell": [["progress", "devices", "energy", "checkpoints", "collapse", "run_facts", "record",
                           "engines"], ["artifacts"],
                          ["trainer"], ["worker"], ["stopping"], ["run"]],
    "orchestrator.cell.engines": [["torch_update"], ["tf_engine", "torch_engine"]],
    "orchestrator.sweep": [["progress", "gpu_pool"], ["launching", "callbacks", "parallel", "cell_process"],
                           ["local_launcher"]],
    "orchestrator.cluster": [["grid", "pbs"], ["status", "preempt"], ["archive", "grid_report"],
                             ["launcher", "resume", "job"]],

}

PACKAGES = ("ops", "models", "orchestrator")


def _modules() -> dict[str, Path]:
    """Every project module by dotted name: packages by their __init__.py, and launch.py."""
    found = {"launch": ROOT / "launch.py"}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "plugin_root" in path.parts:  # Hydra's plugin namespace, loaded by Hydra, not by the project
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The longest project module that `name` (an imported dotted name) lies in, or None for outside code."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imported(module: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """The project modules that `module` imports, by any import statement in the file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # `from a import b` imports the module a.b where there is one, else a name defined in a
            names = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                     for alias in node.names]
        else:
            continue
        for name in names:
            owner = _owner(name, modules)
            if owner:
                yield owner


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it needs loaded: what it imports, and the packages above each of those."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = set(_imported(module, path, modules))
        for target in list(targets):
            parts = target.split(".")
            targets.update(".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in modules)
        targets.discard(module)
        # a package's own __init__ is loaded before its modules run: not an arrow of theirs
        graph[module] = {t for t in targets if not module.startswith(t + ".")}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return found


def _layer_of(parent: str, part: str) -> int | None:
    for level, names in enumerate(LAYERS.get(parent, [])):
        if part in names:
            return level
    return None


def upward_arrows(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a lower layer to a higher one, judged where the two modules part: under their deepest common
    package, by the layers of the parts each lies in."""
    found = []
    for source, targets in graph.items():
        for target in targets:
            a, b = source.split("."), target.split(".")
            common = 0
            while common < min(len(a), len(b)) and a[common] == b[common]:
                common += 1
            if common == len(a) or common == len(b):  # a package and a module inside it
                continue
            parent = ".".join(a[:common])
            if parent not in LAYERS:
                continue
            low, high = _layer_of(parent, a[common]), _layer_of(parent, b[common])
            if low is not None and high is not None and high > low:
                found.append(f"{source} -> {target} ({a[common]} lies below {b[common]} in "
                             f"{parent or 'the top level'})")
    return sorted(found)


def unplaced() -> list[str]:
    """Parts of a layered package that LAYERS does not name."""
    found = []
    modules = _modules()
    for parent in LAYERS:
        depth = len(parent.split(".")) if parent else 0
        parts = {m.split(".")[depth] for m in modules if (m.startswith(parent + ".") if parent else True)
                 and len(m.split(".")) > depth and m != parent}
        named = {name for layer in LAYERS[parent] for name in layer}
        found += [f"{parent + '.' if parent else ''}{part}" for part in sorted(parts - named)]
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_graph_sees_the_project(graph):
    """The walk finds the packages and their arrows (a broken walk would pass every check below)."""
    assert {"ops", "models", "orchestrator", "launch"} <= graph.keys()
    assert len(graph) > 60
    assert any(t.startswith("ops") for t in graph["models"] | set().union(*(
        graph[m] for m in graph if m.startswith("models."))))


def test_no_import_circle(graph):
    found = circles(graph)
    assert not found, "import circles (each a set of modules that import one another):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_no_upward_arrow(graph):
    found = upward_arrows(graph)
    assert not found, "imports against the layering of LAYERS:\n" + "\n".join(found)


def test_every_part_has_a_layer():
    found = unplaced()
    assert not found, "parts of a layered package missing from LAYERS (place each in its layer):\n" + "\n".join(found)


def test_checks_can_fail():
    """The checks themselves: a made-up circle and a made-up upward arrow are found."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert upward_arrows({"ops.x": {"models.y"}, "models.y": {"ops.x"}}) == [
        "ops.x -> models.y (ops lies below models in the top level)"]
