"""Parsers for qstat: PBS Pro's `qstat -x -f -F json` and the Torque-style `qstat -f` text (Torque itself, PBS Pro's
text form, and Slurm's Torque wrappers). Both give, per job id, the raw attributes plus "State", a state name in
submitit's (Slurm's) vocabulary so that submitit's watcher logic (`is_done`) works unchanged. PBS Pro's JSON is read
tolerantly (pbspro_json.py): a job whose attributes cannot be read is reported as unreadable, never guessed.
"""
from __future__ import annotations

import typing as tp

from orchestrator.schedulers.pbs import pbspro_json

# PBS job_state letter -> state name; finished letters are refined by the exit status (see `state_name`).
_LETTER_STATES = {
    "Q": "PENDING",   # queued
    "H": "PENDING",   # held
    "W": "PENDING",   # waiting for its start time
    "T": "PENDING",   # being moved to a new location
    "M": "PENDING",   # moved to another server
    "S": "PENDING",   # suspended by the server: it will run again
    "U": "PENDING",   # suspended (workstation busy)
    "R": "RUNNING",
    "B": "RUNNING",   # array job: at least one subjob started
    "E": "RUNNING",   # exiting after having run
    "F": "FINISHED",  # PBS Pro: finished (with -x)
    "X": "FINISHED",  # PBS Pro: finished subjob
    "C": "FINISHED",  # Torque: completed
}
# PBS exit codes that are the scheduler's doing (PBS Pro JOB_EXEC_* codes; Torque's walltime code), and 256+signal.
_EXIT_STATES = {-29: "TIMEOUT", -11: "TIMEOUT", -27: "OUT_OF_MEMORY", 271: "CANCELLED", 265: "CANCELLED"}


def state_name(job_state: str, exit_status: tp.Optional[int]) -> str:
    """PBS job_state (+ Exit_status once finished) -> PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, CANCELLED, ..."""
    name = _LETTER_STATES.get(job_state.strip().upper()[:1], "UNKNOWN")
    if name != "FINISHED":
        return name
    if exit_status is None:
        return "FINISHED"  # Slurm's wrappers do not report the exit status
    if exit_status == 0:
        return "COMPLETED"
    return _EXIT_STATES.get(exit_status, "FAILED")


def _int(value: tp.Any) -> tp.Optional[int]:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _with_state(info: tp.Dict[str, tp.Any]) -> tp.Dict[str, tp.Any]:
    exit_status = _int(info.get("Exit_status", info.get("exit_status")))
    info["State"] = state_name(str(info.get("job_state", "")), exit_status)
    info["ExitStatus"] = exit_status
    return info


def read_pbspro_json(text: tp.Union[str, bytes]) -> tp.Tuple[tp.Dict[str, tp.Dict[str, tp.Any]], tp.List[str]]:
    """`qstat -x -f -F json [ids]` -> ({job id: attributes + State}, ids of jobs whose attributes were unreadable)."""
    jobs, unreadable = pbspro_json.read_jobs(text)
    return {job_id: _with_state(dict(attrs)) for job_id, attrs in jobs.items()}, unreadable


def parse_pbspro_json(text: tp.Union[str, bytes]) -> tp.Dict[str, tp.Dict[str, tp.Any]]:
    """`qstat -x -f -F json [ids]` -> {job id: attributes + State} for the jobs it could read. No "Jobs" key (nothing
    matched) -> {}."""
    return read_pbspro_json(text)[0]


def parse_torque_text(text: tp.Union[str, bytes]) -> tp.Dict[str, tp.Dict[str, tp.Any]]:
    """`qstat -f [ids]` text -> {job id: attributes + State}.

    Blocks start with "Job Id: <id>"; attributes are "key = value" lines; a line without " = " continues the previous
    value (qstat wraps long values).
    """
    if isinstance(text, bytes):
        text = text.decode()
    out: tp.Dict[str, tp.Dict[str, tp.Any]] = {}
    info: tp.Optional[tp.Dict[str, tp.Any]] = None
    last_key = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("Job Id:"):
            info = {}
            out[line.split(":", 1)[1].strip()] = info
            last_key = None
        elif info is not None and " = " in line:
            key, value = line.split(" = ", 1)
            last_key = key.strip()
            info[last_key] = value.strip()
        elif info is not None and last_key is not None:
            info[last_key] += line
    for info in out.values():
        _with_state(info)
    return out


def short_id(job_id: str) -> str:
    """The numeric part of a PBS id ('12345678.gadi-pbs' -> '12345678'), by which qstat output and qsub output meet."""
    return job_id.split(".", 1)[0]
