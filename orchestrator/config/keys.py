"""The keys a cell config may have, and the options of each group: what the files of conf/ define, read from them.

A key nobody reads is a trap: `+train.epoch=3` would compose, train 15 epochs and say nothing. So `validate` refuses
a composed config holding any other key, and launch.py refuses an override of an unknown key or group option before
Hydra composes (Hydra's own message would advise `+key=value`, which composes the typo). Each names the closest
valid one (difflib).

A mapping whose default is empty (`cluster.env: {}`) is the user's to fill: any key under it is valid.
"""
from __future__ import annotations

import difflib
import functools
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import yaml

from orchestrator.common import paths

LEAF, NODE, OPEN = "leaf", "node", "open"   # a value; a mapping of known keys; a mapping of the user's keys
NOT_CONFIG = ("hydra", "defaults")          # Hydra's own keys, and the defaults list of a config file


@functools.lru_cache(maxsize=None)
def known_keys(conf_dir: str | None = None) -> dict[str, str]:
    """dotted key -> LEAF, NODE or OPEN, over conf/config.yaml (at the root) and every option of every group
    (conf/<group>/*.yaml, under <group>): the union, so a key is known if any option of its group has it."""
    root = Path(conf_dir) if conf_dir else paths.repo_root() / "conf"
    def read(path: Path) -> dict:
        return {k: v for k, v in (yaml.safe_load(path.read_text()) or {}).items() if k not in NOT_CONFIG}

    keys: dict[str, str] = {}
    _collect(read(root / "config.yaml"), "", keys)
    for group in sorted(p for p in root.iterdir() if p.is_dir() and p.name not in NOT_CONFIG):
        keys[group.name] = NODE
        for option in sorted(group.glob("*.yaml")):
            _collect(read(option), group.name + ".", keys)
    return keys


def _collect(node: Mapping[str, Any], prefix: str, keys: dict[str, str]) -> None:
    for key, value in node.items():
        path = prefix + str(key)
        if isinstance(value, Mapping) and not value:
            keys[path] = OPEN                      # the widest kind wins where two options disagree
        elif isinstance(value, Mapping):
            if keys.get(path) != OPEN:
                keys[path] = NODE
            _collect(value, path + ".", keys)
        else:
            keys.setdefault(path, LEAF)


def is_known(path: str, keys: Mapping[str, str] | None = None) -> bool:
    """Whether `path` is a key of the config or lies under a mapping the user fills (cluster.env.NAME)."""
    keys = known_keys() if keys is None else keys
    parts = path.split(".")
    return path in keys or any(keys.get(".".join(parts[:i])) == OPEN for i in range(1, len(parts)))


def unknown_keys(config: Mapping[str, Any]) -> list[str]:
    """The dotted keys of a composed config (Hydra's own left out) that no file of conf/ defines."""
    keys = known_keys()

    def walk(node: Mapping[str, Any], prefix: str) -> Iterator[str]:
        for key, value in node.items():
            path = prefix + str(key)
            kind = keys.get(path)
            if kind is None and not is_known(path, keys):
                yield path
            elif kind == NODE and isinstance(value, Mapping):
                yield from walk(value, path + ".")

    return list(walk({k: v for k, v in config.items() if k not in NOT_CONFIG}, ""))


def group_options(conf_dir: str | None = None) -> dict[str, list[str]]:
    """group -> its options (conf/<group>/<option>.yaml; files starting with _ are shared parts, not options)."""
    root = Path(conf_dir) if conf_dir else paths.repo_root() / "conf"
    return {group.name: sorted(p.stem for p in group.glob("*.yaml") if not p.stem.startswith("_"))
            for group in sorted(root.iterdir()) if group.is_dir() and group.name not in NOT_CONFIG}


def override_errors(overrides: list[str]) -> list[str]:
    """What is wrong with the command line's overrides, before composing: a plain `key=value` of a key conf/ does
    not define, or a group choice (model=NAME, also in a sweep) that is not an option; each with the closest valid
    one. Additions (+key=..) are checked once composed (unknown_keys); deletions, packages, hydra.* and malformed
    overrides are left to Hydra, which explains those well."""
    # Hydra's parser (ANTLR) only in launch.py's process: the training process imports this module too.
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType

    parser, keys, groups, errors = OverridesParser.create(), known_keys(), group_options(), []
    for text in overrides:
        try:
            override = parser.parse_overrides([text])[0]
            if override.type != OverrideType.CHANGE or override.package is not None:
                continue
            key = override.key_or_group
            values = list(override.sweep_string_iterator()) if override.is_sweep_override() \
                else [override.get_value_element_as_str()]
        except Exception:  # noqa: BLE001 - a syntax error, or a sweep Hydra expands itself: Hydra reports those
            continue
        if key.split(".")[0].split("/")[0] in NOT_CONFIG:
            continue
        if key in groups:
            for value in values:
                if value not in groups[key] and value != "null":
                    close = difflib.get_close_matches(value, groups[key], n=1, cutoff=0.6)
                    errors.append(f"{key}={value} is not an option of {key}: {', '.join(groups[key])} (conf/{key}/)"
                                  + (f"; did you mean {key}={close[0]}?" if close else ""))
        elif not is_known(key, keys):
            errors.append(unknown_key_message(key))
    return errors


def closest_key(path: str) -> str | None:
    """The known key `path` most likely meant: a close name beside it, else a key of a close name anywhere."""
    keys = known_keys()
    parts = path.split(".")
    parent = _deepest_node(parts, keys)
    prefix = parent + "." if parent else ""
    values = [k for k, kind in keys.items() if kind != NODE or "." not in k]   # values, and groups (model=..)
    beside = difflib.get_close_matches(path[len(prefix):], [k[len(prefix):] for k in values if k.startswith(prefix)],
                                       n=1, cutoff=0.6)
    if beside:
        return prefix + beside[0]
    by_name: dict[str, str] = {}
    for key in values:
        by_name.setdefault(key.rsplit(".", 1)[-1], key)
    named = difflib.get_close_matches(parts[-1], list(by_name), n=1, cutoff=0.75)
    return by_name[named[0]] if named else None


def unknown_key_message(path: str) -> str:
    """`path` is unknown: say so, with the closest known key, or else the keys where it would be."""
    close = closest_key(path)
    if close:
        return f"{path} is not a config key; did you mean {close}?"
    keys = known_keys()
    parent = _deepest_node(path.split("."), keys)
    where = f"the keys of {parent} are" if parent else "the top-level keys are"
    return f"{path} is not a config key; {where}: {', '.join(_children(parent, keys))}"


def _deepest_node(parts: list[str], keys: Mapping[str, str]) -> str:
    return next((".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1) if keys.get(".".join(parts[:i])) == NODE), "")


def _children(parent: str, keys: Iterable[str]) -> list[str]:
    prefix = parent + "." if parent else ""
    return sorted({k[len(prefix):].split(".")[0] for k in keys if k.startswith(prefix) and k != parent})
