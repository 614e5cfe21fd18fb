"""Re-run a cell from its MLflow run: the launch command that trains it again, printed or executed.

    python -m orchestrator.rerun RUN_ID [--tracking-uri URI]     # print the command (and the code it needs)
    python -m orchestrator.rerun RUN_ID --execute                # run it

The overrides are the run's defining config (model, multiplier, data set, seed, the whole training recipe, and the
engine where not the default), read from its record/config.yaml artifact: every key the cell's identity hashes is
given on the command line, so the re-run is the same cell (the same identity; this command checks it against the
run's amdnn.cell tag before printing) whatever defaults conf/ has today. A cell trains deterministically, so the
re-run ends with the same weights, bit for bit, given the same code (the run's amdnn.git_commit, and its
record/git.diff where the tree was dirty) and the same kind of machine (CPU target, or GPU and engine).

The re-run gets its own checkpoint folder and experiment (`--checkpoint-root`, default checkpoints/reruns/<run id>/;
experiment
<original>-rerun): under the original ones it would find the cell finished and skip it, or log into the same run.
"""
from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from typing import Any, Mapping

from orchestrator import weights
from orchestrator.common import paths
from orchestrator.config.identity import DEFAULT_ENGINE, cell_identity

GROUPS = ("model", "mult", "dataset")     # chosen by name (model=lenet5), then their keys one by one
PLAIN = re.compile(r"^[A-Za-z0-9_./:+-]*$")  # a value Hydra's override parser takes as it is


def value(item: Any) -> str:
    """A value in Hydra's override syntax."""
    if item is None:
        return "null"
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, (int, float)):
        return repr(item)
    if isinstance(item, (list, tuple)):
        return "[" + ",".join(value(x) for x in item) + "]"
    if isinstance(item, Mapping):
        return "{" + ",".join(f"{k}:{value(v)}" for k, v in item.items()) + "}"
    text = str(item)
    return text if text and PLAIN.match(text) else "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def leaves(tree: Mapping[str, Any], prefix: str) -> list[str]:
    out = []
    for key, item in tree.items():
        if isinstance(item, Mapping):
            out += leaves(item, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}={value(item)}")
    return out


def overrides(composed: Mapping[str, Any]) -> list[str]:
    """launch.py's overrides that give the cell of the resolved config `composed` (defining keys only)."""
    out = [f"{group}={value(composed[group]['name'])}" for group in GROUPS]
    for group in GROUPS:
        out += leaves({k: v for k, v in composed[group].items() if k != "name"}, f"{group}.")
    out.append(f"seed={value(composed['seed'])}")
    out += leaves(composed["train"], "train.")
    if composed.get("engine", DEFAULT_ENGINE) != DEFAULT_ENGINE:
        out.append(f"engine={value(composed['engine'])}")
    return out


def composes_to(args: list[str]) -> str:
    """The identity of the cell `args` compose to (conf/ as launch.py composes it)."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(paths.repo_root() / "conf"), version_base="1.3"):
        return cell_identity(compose(config_name="config", overrides=args))


def command(run_id: str, tracking_uri: str | None = None, checkpoint_root: str | None = None) -> dict[str, Any]:
    """{"argv", "identity", "commit", "dirty", "same_cell"}: the launch that re-runs run `run_id`, and what it needs."""
    run = weights.client(tracking_uri).get_run(run_id)
    composed = weights.run_config(run_id, tracking_uri)
    args = overrides(composed)
    identity = run.data.tags.get("amdnn.cell")
    root = checkpoint_root or str(paths.checkpoint_root(None) / "reruns" / run_id)
    argv = [sys.executable, str(paths.repo_root() / "launch.py"), *args, f"checkpoint_root={root}",
            f"experiment={value(composed.get('experiment', 'amdnn') + '-rerun')}"]
    if tracking_uri:
        argv.append(f"tracking_uri={tracking_uri}")
    return {"argv": argv, "identity": identity, "same_cell": composes_to(args) == identity,
            "commit": run.data.tags.get("amdnn.git_commit", "unknown"),
            "dirty": run.data.tags.get("amdnn.git_dirty", "unknown")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.rerun", description=__doc__.split("\n")[0])
    parser.add_argument("run_id", help="the cell's MLflow run id")
    parser.add_argument("--tracking-uri", default=None, help="the MLflow store (default: as launch.py's)")
    parser.add_argument("--checkpoint-root", default=None,
                        help="the re-run's checkpoints (default checkpoints/reruns/RUN_ID)")
    parser.add_argument("--execute", action="store_true", help="run the command instead of printing it")
    args = parser.parse_args(argv)
    found = command(args.run_id, args.tracking_uri, args.checkpoint_root)
    print(f"# code: git checkout {found['commit']}" + ("  (the tree was dirty: apply the run's record/git.diff)"
                                                       if found["dirty"] == "true" else ""))
    if not found["same_cell"]:
        print(f"# warning: these overrides compose to another cell than the run's ({found['identity']}): conf/ "
              "has keys the run did not know; check out the run's commit first", file=sys.stderr)
    print(shlex.join(found["argv"]))
    if not args.execute:
        return 0
    return subprocess.call(found["argv"], cwd=paths.repo_root())


if __name__ == "__main__":
    sys.exit(main())
