"""Per-layer multipliers: ordered rules from layer selectors to a multiplier, resolved against a network's layers.

A cell has one multiplier (`mult.name`) unless rules say otherwise for some layers. A rule is a mapping

    {"match": SELECTOR or [SELECTOR, ...], "mult": NAME, "table": FILE, "exact_gradients": BOOL}

where `mult` is a mode of ops.names() (`native` for Keras' own layer) or `lut` with `table` (or "lut:FILE"), and
`exact_gradients` defaults to the cell's. A selector is one of

    first, last, all      the first multiplying layer (the stem or first convolution), the last (the classifier), all
    a layer name          conv1, stage2_block1_conv2, predictions
    a group               a name's leading parts up to an underscore: stem, stage2 (a ResNet stage), stage2_block1
    a glob                fnmatch over the names: fc*, *shortcut_conv, stage[34]_*

Rules apply in order: the first rule that matches a layer decides it, so an exception goes before the general rule.
Layers no rule matches take the cell's multiplier. A preset (`keep`, KEEP) keeps some layers exact (native) before
any rule; a rule giving one of those layers something else is a conflict. Every mistake is reported at once, with what
would be right: a selector matching no layer (with the model's layers and groups), an unknown multiplier or preset, a
rule every layer of which an earlier rule already decided otherwise, a rule contradicting the preset.

No Keras here: a launch resolves every cell's rules before anything is submitted (models.layer_names gives the names).
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ops.modes.multipliers import (LUT_NAME, NATIVE, TABLE_NAMES, compose, decompose, integer_names,
                                  label, names, parse)

from models.layer_names import am_layer_names

ROLES = ("first", "last", "all")
KEEP = {  # preset -> the selectors whose layers stay exact (native); mult.keep=NAME
    "first": ("first",),
    "last": ("last",),
    "first_last": ("first", "last"),
}
RULE_KEYS = ("match", "mult", "table", "exact_gradients")
GLOB_CHARACTERS = "*?["


@dataclass(frozen=True)
class Setting:
    """What one layer multiplies with: a mode (or lut and its table file) and the gradient mode."""

    name: str                      # a mode of ops.names(), "lut", or an integer mode (integer_names)
    table: str | None = None       # lut and the integer modes only: the table file as configured
    exact_gradients: bool = False  # true: the backward pass multiplies exactly (always false for native)

    @property
    def spec(self) -> str:
        """As ops and models take it: the mode, or name:<absolute table path> (lut, an integer mode's table)."""
        return compose(self.name, self.table)

    @property
    def label(self) -> str:
        """As the results table names it: the mode, or name:<table file name>."""
        return label(self.name, self.table)


EXACT = Setting(NATIVE)


def setting(name: str, table: str | None = None, exact_gradients: bool = False) -> Setting:
    """A Setting as configured (mult.name, mult.table, mult.exact_gradients): native is always EXACT (no gradient
    mode, no table)."""
    if name == NATIVE:
        return EXACT
    return Setting(name, (table or None) if name in TABLE_NAMES else None, bool(exact_gradients))


def from_spec(spec: str, exact_gradients: bool = False) -> Setting:
    """The Setting of a multiplier as ops take it (a mode, or name:<path>)."""
    return setting(*decompose(spec), exact_gradients)


class RuleError(ValueError):
    """Rules that cannot be resolved; `problems` lists each, and the message has one per line."""

    def __init__(self, problems: Sequence[str]):
        super().__init__("\n".join(problems))
        self.problems = list(problems)


def selector_matches(selector: str, names: Sequence[str]) -> list[str]:
    """The names of `names` (a model's layers in order) that `selector` picks."""
    if selector == "first":
        return list(names[:1])
    if selector == "last":
        return list(names[-1:])
    if selector == "all":
        return list(names)
    if any(c in selector for c in GLOB_CHARACTERS):
        return [n for n in names if fnmatch.fnmatchcase(n, selector)]
    return [n for n in names if n == selector or n.startswith(selector + "_")]


def groups(names: Sequence[str]) -> list[str]:
    """The groups of `names` (leading parts up to an underscore shared by at least two layers), in layer order."""
    counts: dict[str, int] = {}
    for name in names:
        parts = name.split("_")
        for i in range(1, len(parts)):
            prefix = "_".join(parts[:i])
            counts[prefix] = counts.get(prefix, 0) + 1
    return [prefix for prefix, count in counts.items() if count >= 2]


def _where(model: str, names: Sequence[str]) -> str:
    shown = list(names) if len(names) <= 12 else [*names[:6], "...", *names[-2:]]
    grouped = [g for g in groups(names) if g.count("_") == 0] or groups(names)[:6]
    return (f"{model}'s layers are {', '.join(shown)}"
            + (f"; its groups {', '.join(grouped)} (and their blocks, e.g. {groups(names)[1]})"
               if len(groups(names)) > 1 else "")
            + f"; or {', '.join(ROLES)}, or a glob such as *conv*"
            + f" (`python -m models.layer_list {model}` lists them)")


def _setting(rule: Mapping[str, Any], default: Setting, where: str, problems: list[str]) -> Setting | None:
    """The rule's Setting, or None with its problems appended."""
    mult, table = rule.get("mult"), rule.get("table")
    exact = rule.get("exact_gradients", default.exact_gradients)
    if not isinstance(exact, bool):
        problems.append(f"{where}: exact_gradients={exact!r} must be true or false")
        return None
    if isinstance(mult, str) and decompose(mult)[1] is not None:
        if table is not None:
            problems.append(f"{where}: mult={mult!r} names its table already; drop table={table!r}")
            return None
        mult, table = decompose(mult)
    if not isinstance(mult, str) or not mult:
        problems.append(f"{where} has no multiplier: add mult=NAME, one of {', '.join(names())}, or lut with "
                        "table=FILE")
        return None
    if mult == LUT_NAME and not table:
        problems.append(f"{where}: mult=lut needs table=FILE (an ApproxTrain-format table), or mult=lut:FILE")
        return None
    if mult in TABLE_NAMES:  # lut, or an integer mode (the exact multiplier of its kind without a table)
        chosen = Setting(mult, str(table) if table else None, exact)
        try:
            parse(chosen.spec)
        except (ValueError, OSError) as e:
            problems.append(f"{where}: table {table!r}: {e}")
            return None
        return chosen
    if table is not None:
        problems.append(f"{where}: table={table!r} is for mult=lut or an integer mode ({', '.join(integer_names())}) "
                        "only; drop it or pick one of those")
        return None
    if mult not in names():
        problems.append(f"{where}: unknown multiplier {mult!r}; valid choices: {', '.join(names())}, "
                        f"lut with table=FILE, or an integer mode ({', '.join(integer_names())})")
        return None
    return setting(mult, None, exact)


def _selectors(rule: Mapping[str, Any], where: str, problems: list[str]) -> list[str]:
    match = rule.get("match")
    selectors = [match] if isinstance(match, str) else match
    if not isinstance(selectors, (list, tuple)) or not selectors or \
            not all(isinstance(s, str) and s for s in selectors):
        problems.append(f"{where}: match={match!r} must be a selector or a list of them (first, last, all, a layer "
                        "name, a group such as stage2, or a glob such as fc*)")
        return []
    return list(selectors)


def rule_text(rule: Any) -> str:
    """A rule as a reader of an error message recognises it: match -> mult."""
    if not isinstance(rule, Mapping):
        return repr(rule)
    match = rule.get("match")
    match = ",".join(match) if isinstance(match, (list, tuple)) else match
    mult = rule.get("mult")
    if mult in TABLE_NAMES and rule.get("table"):
        mult = f"{mult}:{rule['table']}"
    extra = f" exact_gradients={str(rule['exact_gradients']).lower()}" if "exact_gradients" in rule else ""
    return f"{match} -> {mult}{extra}"


def resolve(model: str, default: Setting, rules: Sequence[Any] = (), keep: str | None = None) -> dict[str, Setting]:
    """Every multiplying layer of `model`, in order, with the Setting it multiplies with: `keep`'s layers exact, then
    the first rule matching each layer, the rest `default`. Raises RuleError listing every problem."""
    layer_names = am_layer_names(model)
    problems: list[str] = []
    kept: dict[str, str] = {}
    if keep is not None:
        if keep not in KEEP:
            problems.append(f"mult.keep={keep!r} is not a preset; valid presets: {', '.join(KEEP)} (or null: no "
                            "layer kept exact)")
        else:
            for selector in KEEP[keep]:
                kept.update((n, selector) for n in selector_matches(selector, layer_names))
    if not isinstance(rules, (list, tuple)):
        problems.append(f"mult.layers={rules!r} must be a list of rules such as "
                        "{match: first, mult: native} (docs/exploration.md)")
        rules = ()
    decided: dict[str, tuple[int, Setting]] = {}
    for number, rule in enumerate(rules, start=1):
        where = f"mult.layers rule {number} ({rule_text(rule)})"
        if not isinstance(rule, Mapping):
            problems.append(f"{where} must be a mapping such as {{match: stage4, mult: mit16}}")
            continue
        unknown = sorted(set(rule) - set(RULE_KEYS))
        if unknown:
            problems.append(f"{where}: unknown key {', '.join(map(str, unknown))}; a rule has {', '.join(RULE_KEYS)}")
        selectors = _selectors(rule, where, problems)
        setting = _setting(rule, default, where, problems)
        matched: list[str] = []
        for selector in selectors:
            found = selector_matches(selector, layer_names)
            if not found:
                problems.append(f"{where}: {selector!r} matches no layer of {model}; {_where(model, layer_names)}")
            matched += [n for n in found if n not in matched]
        if setting is None or not matched:
            continue
        against_keep = [n for n in matched if n in kept and setting != EXACT]
        if against_keep:
            problems.append(f"{where} gives {', '.join(against_keep)} {setting.label}, but mult.keep={keep} keeps "
                            f"{'it' if len(against_keep) == 1 else 'them'} exact: narrow the rule's match or drop "
                            "mult.keep")
        fresh = [n for n in matched if n not in decided and n not in kept]
        overruled = [n for n in matched if n in decided and decided[n][1] != setting]
        if not fresh and overruled:
            earlier = sorted({decided[n][0] for n in overruled})
            problems.append(f"{where} decides no layer: {', '.join(overruled)} already "
                            f"{'takes' if len(overruled) == 1 else 'take'} {'rule' if len(earlier) == 1 else 'rules'} "
                            f"{', '.join(map(str, earlier))}'s multiplier (the first rule matching a layer decides "
                            f"it): put it before rule {earlier[0]}, or drop it")
        for name in fresh:
            decided[name] = (number, setting)
    if problems:
        raise RuleError(problems)
    return {name: EXACT if name in kept else decided[name][1] if name in decided else default
            for name in layer_names}


def changed(settings: Mapping[str, Setting], default: Setting) -> dict[str, Setting]:
    """The layers of a resolved map whose Setting is not the cell's: what sets the cell apart (its identity, label)."""
    return {name: setting for name, setting in settings.items() if setting != default}


def describe_layers(chosen: Sequence[str], names: Sequence[str]) -> str:
    """A short, exact name for a set of a model's layers: all, first, last, whole groups (stage4, stage2_block1) and
    single names, in layer order, comma-separated."""
    left = [n for n in names if n in set(chosen)]
    if len(left) == len(names):
        return "all"
    parts: list[tuple[int, str]] = []
    for role, name in (("first", names[0]), ("last", names[-1])):
        if name in left:
            parts.append((names.index(name), role))
            left.remove(name)
    for group in sorted(groups(names), key=lambda g: -len(selector_matches(g, names))):
        members = selector_matches(group, names)
        if all(m in left for m in members):
            parts.append((names.index(members[0]), group))
            left = [n for n in left if n not in members]
    parts += [(names.index(n), n) for n in left]
    return ",".join(text for _, text in sorted(parts))


def describe(model: str, settings: Mapping[str, Setting], default: Setting) -> str:
    """The layers that differ from `default`, grouped by Setting: "first,last: native; stage4: mit16", or ""."""
    differ = changed(settings, default)
    names = am_layer_names(model)
    by_setting: dict[Setting, list[str]] = {}
    for name in names:
        if name in differ:
            by_setting.setdefault(differ[name], []).append(name)

    def label(setting: Setting) -> str:
        grads = setting.exact_gradients != default.exact_gradients and setting != EXACT
        return setting.label + (f" exact_gradients={str(setting.exact_gradients).lower()}" if grads else "")

    return "; ".join(f"{describe_layers(chosen, names)}: {label(setting)}" for setting, chosen in by_setting.items())
