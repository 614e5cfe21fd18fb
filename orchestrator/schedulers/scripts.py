"""Config values that reach a job script are validated or quoted here, so that no config or sweep override can inject
shell into a Slurm or PBS script (or into the directives the scheduler parses).

Three kinds of value:
- directive words (job names, partitions, queues, accounts, projects, storage lists): a strict character set, because
  `#SBATCH`/`#PBS` lines are parsed by the scheduler, not by a shell, and quoting means nothing there;
- paths and environment values: any printable text without newlines, always emitted through `shlex.quote`;
- setup lines: shell the user writes on purpose (e.g. `source ~/venv/bin/activate`); each must be one line, and may not
  start a scheduler directive, so it cannot add or change resources, or smuggle a second command line in.
Modules are words too (`module load 'tensorflow/2.15.0'`).
"""
from __future__ import annotations

import re
import shlex
from typing import Any, Iterable, Mapping

_WORD = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}$")
_LIST = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./+:,=-]{0,511}$")  # storage=scratch/ab12+gdata/ab12, nodelists
_MODULE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./+-]{0,127}$")
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_JOB_ID = re.compile(r"^[0-9]+(?:_[0-9]+)?(?:\[[0-9]*\])?(?:\.[A-Za-z0-9_.-]+)?$")
# Printable, and no characters a line-oriented scheduler or shell would treat as a line break.
_BAD_TEXT = re.compile(r"[\x00-\x1f\x7f]")
_DIRECTIVE = re.compile(r"^\s*#\s*(SBATCH|PBS)\b", re.IGNORECASE)


class UnsafeValue(ValueError):
    """A config value that could change a job script beyond its purpose."""


def _describe(key: str, value: Any, why: str, want: str) -> UnsafeValue:
    return UnsafeValue(f"{key}={value!r} cannot go into a job script: {why}; expected {want}")


def word(key: str, value: Any) -> str:
    """A directive word: job name, partition, queue, account, project, qos."""
    text = str(value)
    if not _WORD.match(text):
        raise _describe(key, value, "it has characters outside letters, digits and _ . + -",
                        "a single word such as 'gpuvolta' or 'amdnn_lenet300' (at most 128 characters)")
    return text


def word_list(key: str, value: Any) -> str:
    """A directive list such as PBS's storage=scratch/ab12+gdata/ab12."""
    text = str(value)
    if not _LIST.match(text):
        raise _describe(key, value, "it has spaces, quotes or shell characters",
                        "letters, digits and _ . / + : , = - only, e.g. 'scratch/ab12+gdata/ab12'")
    return text


def text(key: str, value: Any) -> str:
    """Free text that will be shell-quoted (paths, environment values): only line breaks and control bytes refused."""
    s = str(value)
    if _BAD_TEXT.search(s):
        raise _describe(key, value, "it contains a newline or control character", "one line of printable text")
    return s


def path(key: str, value: Any) -> str:
    """A path, validated, returned shell-quoted."""
    return shlex.quote(text(key, value))


def bare_path(key: str, value: Any) -> str:
    """A path that some tool pastes into a shell command unquoted (Slurm's qsub wrapper does this with the script
    path): only characters that need no quoting at all."""
    s = str(value)
    if not re.match(r"^[A-Za-z0-9_./%+=@,-]+$", s):
        raise _describe(key, value, "a scheduler command pastes it unquoted into a shell",
                        "a path of letters, digits and _ . / % + = @ , - (no spaces)")
    return s


def module(key: str, value: Any) -> str:
    name = str(value)
    if not _MODULE.match(name):
        raise _describe(key, value, "it is not a module name", "e.g. 'tensorflow/2.15.0' or 'cuda/12.2.0'")
    return name


def job_id(value: Any) -> str:
    """A scheduler job id (12345, 12345_3, 12345678.gadi-pbs, 12345678[3].gadi-pbs)."""
    s = str(value).strip()
    if not _JOB_ID.match(s):
        raise UnsafeValue(f"{value!r} is not a job id; expected e.g. 12345, 12345_3 or 12345678.gadi-pbs")
    return s


def setup_line(key: str, value: Any) -> str:
    line = text(key, value)
    if _DIRECTIVE.match(line):
        raise _describe(key, value, "it would be read as a scheduler directive",
                        "a shell command; set resources through the cluster config keys instead")
    return line


def environment_lines(modules: Iterable[Any] = (), env: Mapping[str, Any] | None = None,
                      setup: Iterable[Any] = ()) -> list[str]:
    """The shell lines that prepare a job: `module load` per module, `export KEY=value` per variable, then setup."""
    lines = [f"module load {module('cluster.modules', m)}" for m in modules or ()]
    for k, v in (env or {}).items():
        if not _ENV_KEY.match(str(k)):
            raise _describe("cluster.env", k, "it is not an environment variable name", "e.g. TF_CPP_MIN_LOG_LEVEL")
        lines.append(f"export {k}={shlex.quote(text(f'cluster.env.{k}', v))}")
    lines += [setup_line("cluster.setup", s) for s in setup or ()]
    return lines
