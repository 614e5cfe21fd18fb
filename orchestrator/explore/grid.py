"""A study's grid as launch.py overrides: the user's overrides, checked, and the `mult.layers` choice that makes one
cell per layer assignment; the launch.py command that runs it.

    Study = parse(["model=lenet5", "dataset=mnist", "mult=am16,mit16", "train.epochs=3"])
    layers_choice([[rule, ...], ...]) -> "mult.layers=choice([...],[...])"   (Hydra's sweep of lists)
    run(overrides, dry_run)                                                   (prints the command, then runs it)

A multiplier is a mode (am16) or a table, `lut:FILE` (or mult=lut mult.table=FILE); the rules name it as
models.layer_rules takes it. The study owns mult.layers and mult.keep: an override of either is refused.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any, Sequence

from models.layer_names import am_layer_names
from models.layer_rules import selector_matches
from ops.modes.multipliers import LUT_NAME, LUT_PREFIX, NATIVE, names

from orchestrator.common import paths

OWNED = ("mult.layers", "mult.keep", "+mult.layers", "+mult.keep")


class StudyError(ValueError):
    """A study that cannot be made; the message says what was wrong and what would be right."""


@dataclass
class Study:
    model: str
    mults: list[str]                 # the multipliers as rules take them: am16, lut:/abs/path.bin
    exact_gradients: bool = False    # mult.exact_gradients: only the forward pass approximate
    overrides: list[str] = field(default_factory=list)   # the user's others, passed on as written
    values: dict[str, str] = field(default_factory=dict)  # every key=value given (the last of a key)

    def layers(self, selectors: Sequence[str] = ()) -> list[str]:
        """The model's multiplying layers (those `selectors` pick, all without), in order."""
        every = list(am_layer_names(self.model))
        if not selectors:
            return every
        picked: set[str] = set()
        for selector in selectors:
            found = selector_matches(selector, every)
            if not found:
                raise StudyError(f"--layers {selector!r} matches no layer of {self.model}; its layers are "
                                 f"{', '.join(every)} (python -m models.layer_list {self.model})")
            picked |= set(found)
        return [name for name in every if name in picked]


def _split(override: str) -> tuple[str, str]:
    key, sep, value = override.partition("=")
    if not sep or not key:
        raise StudyError(f"{override!r} is not an override: write key=value, e.g. model=lenet5 or train.epochs=3")
    return key.lstrip("+~"), value


def parse(overrides: Sequence[str]) -> Study:
    """The study's model and multipliers from launch.py-style overrides; StudyError naming every problem."""
    values: dict[str, str] = {}
    problems, rest = [], []
    for override in overrides:
        key, value = _split(override)
        values[key] = value
        if override.split("=", 1)[0] in OWNED:
            problems.append(f"{override!r}: the study sets mult.layers and mult.keep itself (one cell per layer); "
                            "drop it")
        elif key not in ("model", "mult", "mult.table", "mult.exact_gradients"):
            rest.append(override)
    model = values.get("model")
    if not model or "," in model or model.startswith(("choice(", "range(", "glob(")):
        problems.append(f"model={model!r}: a study is of one model (its layers' names are the cells), e.g. "
                        "model=lenet5; run one study per model")
    else:
        try:
            am_layer_names(model)
        except ValueError as e:
            problems.append(str(e))
    mults = [m.strip() for m in values.get("mult", "").split(",") if m.strip()]
    table = values.get("mult.table")
    specs = []
    for mult in mults:
        if mult == LUT_NAME:
            if not table or table == "null":
                problems.append("mult=lut needs mult.table=FILE (an ApproxTrain-format table)")
                continue
            mult = LUT_PREFIX + table
        if mult.startswith(LUT_PREFIX):
            path = os.path.abspath(os.path.expanduser(mult[len(LUT_PREFIX):]))
            if not os.path.isfile(path):
                problems.append(f"mult={mult!r}: no table file at {path}")
                continue
            specs.append(LUT_PREFIX + path)
        elif mult == NATIVE:
            problems.append("mult=native: a study needs an approximate multiplier to place in the layers (native is "
                            "its other end, run by the study itself)")
        elif mult not in names():
            problems.append(f"mult={mult!r} is not a multiplier; valid choices: {', '.join(names())}, or lut:FILE")
        else:
            specs.append(mult)
    if not mults:
        problems.append("mult= is missing: the multiplier to place one layer at a time, e.g. mult=am16 "
                        "(or mult=am16,mit16 for a study of each)")
    gradients = values.get("mult.exact_gradients", "false").lower()
    if gradients not in ("true", "false"):
        problems.append(f"mult.exact_gradients={gradients!r} must be true or false (one study per gradient mode)")
    if problems:
        raise StudyError("\n".join(problems))
    return Study(str(model), specs, gradients == "true", rest, values)


def _text(value: Any) -> str:
    """A value in Hydra's override grammar: plain words bare, anything else single-quoted."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_text(v) for v in value) + "]"
    text = str(value)
    if text and all(c.isalnum() or c in "_-" for c in text) and not text[0].isdigit():
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def rule(match: str | Sequence[str], mult: str, exact_gradients: bool = False) -> dict:
    """One rule of mult.layers (models.layer_rules)."""
    out: dict = {"match": match if isinstance(match, str) else list(match), "mult": mult}
    if exact_gradients and mult != NATIVE:
        out["exact_gradients"] = True
    return out


def rules_text(rules: Sequence[dict]) -> str:
    return "[" + ",".join("{" + ",".join(f"{k}:{_text(v)}" for k, v in r.items()) + "}" for r in rules) + "]"


def layers_choice(assignments: Sequence[Sequence[dict]]) -> str:
    """The override sweeping mult.layers over the given rule lists (one cell each)."""
    return "mult.layers=choice(" + ",".join(rules_text(rules) for rules in assignments) + ")"


def command(overrides: Sequence[str]) -> list[str]:
    """launch.py's multirun of `overrides`."""
    return [sys.executable, str(paths.repo_root() / "launch.py"), "-m", *overrides]


def run(overrides: Sequence[str], dry_run: bool = False) -> int:
    """Print the launch command (so it can be run again, e.g. to resume), then run it unless dry_run."""
    argv = command(overrides)
    print("[amdnn] " + shlex.join(["python", *argv[1:]]), flush=True)
    if dry_run:
        return 0
    return subprocess.call(argv)  # in the user's folder: relative paths mean what they say
