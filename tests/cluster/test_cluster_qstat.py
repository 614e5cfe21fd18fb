"""qstat parsers and the PBS plugin's plumbing, without a scheduler.

No PBS Pro server can run here (Debian has none), so PBS Pro's `qstat -x -f -F json` is read from files written in
the layout and attribute names of PBS Pro output on Gadi (data/qstat_pbspro_*.json): a valid one, and the invalid
documents known PBS Pro builds really print (OpenPBS issues 1255, 2541 and PR 2049, 2672), fed to the reader through
a stand-in for qstat. The Torque-style text is read both from a Torque-format sample and from output recorded from
Slurm's Torque wrapper on this machine.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchestrator.schedulers.pbs import qstat, query
from orchestrator.schedulers.pbs.executor import PBSExecutor, PBSInfoWatcher, job_id_from_qsub, submission_command
from orchestrator.schedulers.resources import RESOURCE_NAMES, scheduler_resources, walltime_seconds

DATA = Path(__file__).parent / "data"


def test_pbspro_json_states_and_exit_codes():
    info = qstat.parse_pbspro_json((DATA / "qstat_pbspro_gadi.json").read_text())
    states = {k: v["State"] for k, v in info.items()}
    assert states == {
        "12345678.gadi-pbs": "COMPLETED",      # F, Exit_status 0
        "12345679.gadi-pbs": "TIMEOUT",        # F, -29 = JOB_EXEC_KILL_WALLTIME
        "12345680.gadi-pbs": "CANCELLED",      # F, 271 = 256 + SIGTERM (qdel)
        "12345681.gadi-pbs": "RUNNING",
        "12345682.gadi-pbs": "PENDING",
        "12345683.gadi-pbs": "FAILED",
        "12345684.gadi-pbs": "PENDING",        # held
    }
    assert info["12345678.gadi-pbs"]["Resource_List"]["ngpus"] == 1


def test_pbspro_json_without_jobs_is_empty():
    assert qstat.parse_pbspro_json('{"timestamp":1, "pbs_version":"2022.1.5", "pbs_server":"gadi-pbs-01"}') == {}
    assert qstat.parse_pbspro_json("") == {}


def test_torque_text_with_wrapped_values():
    info = qstat.parse_torque_text((DATA / "qstat_f_torque.txt").read_text())
    assert [v["State"] for v in info.values()] == ["TIMEOUT", "PENDING", "COMPLETED"]
    first = info["4242.torque-head.example.edu"]
    assert first["Resource_List.walltime"] == "01:00:00"
    assert first["Variable_List"].endswith("PBS_O_WORKDIR=/home/abc123/amdnn")


def test_slurm_torque_wrapper_text():
    info = qstat.parse_torque_text((DATA / "qstat_f_slurm_wrapper_running.txt").read_text())
    assert list(info) == ["9"] and info["9"]["State"] == "RUNNING" and info["9"]["Job_Name"] == "amdnn"
    # The wrapper reports no exit status: a finished job is FINISHED, which submitit counts as done.
    assert qstat.state_name("C", None) == "FINISHED"


def test_watcher_matches_short_and_long_ids(monkeypatch):
    monkeypatch.setenv("AMDNN_PBS_FLAVOUR", "pbspro")
    from orchestrator.schedulers.pbs import executor

    executor.qstat_flavour.cache_clear()
    try:
        watcher = PBSInfoWatcher()
        watcher.register_job("12345681")
        info = watcher.read_info((DATA / "qstat_pbspro_gadi.json").read_text())
        assert info["12345681"]["State"] == "RUNNING"
        assert watcher._make_command() == ["qstat", "-x", "-f", "-F", "json", "12345681"]
    finally:
        executor.qstat_flavour.cache_clear()


@pytest.mark.parametrize("output,job", [("12345678.gadi-pbs\n", "12345678.gadi-pbs"), ("77\n", "77"),
                                        ("qsub: warning\n12345[].gadi-pbs", "12345[].gadi-pbs")])
def test_job_id_from_qsub(output, job):
    assert job_id_from_qsub(output) == job


def test_qsub_garbage_is_an_error_that_quotes_it():
    from submitit.core.utils import FailedSubmissionError

    with pytest.raises(FailedSubmissionError, match="qsub: Unknown queue"):
        job_id_from_qsub("qsub: Unknown queue MSG=requested queue not found")


def test_submission_runs_qsub_from_the_script_folder(tmp_path):
    assert submission_command(tmp_path / "s.sh") == ["env", "-C", str(tmp_path), "qsub", str(tmp_path / "s.sh")]


def test_one_resource_table_covers_every_scheduler():
    cluster = {"walltime": "47:59:30", "cpus": 12, "gpus": 1, "mem": 96}
    assert scheduler_resources("slurm", cluster) == {"time": 2880, "cpus_per_task": 12, "gpus_per_node": 1,
                                                     "mem": "96GB"}
    assert scheduler_resources("pbs", cluster) == {"walltime": "47:59:30", "ncpus": 12, "ngpus": 1, "mem": "96GB"}
    assert set(RESOURCE_NAMES) == {"walltime", "cpus", "gpus", "mem"}
    with pytest.raises(ValueError, match="HH:MM:SS"):
        walltime_seconds("2 days")
    with pytest.raises(ValueError, match="cluster.cpus"):
        scheduler_resources("pbs", {**cluster, "cpus": -1})
    with pytest.raises(ValueError, match="valid: slurm, pbs"):
        scheduler_resources("sge", cluster)


def test_the_installed_entry_points_load_the_plugin(monkeypatch):
    """Through the installed package's metadata (pip install -e .), as submitit finds plugins: a misspelt module or
    class in pyproject.toml fails here."""
    from importlib.metadata import entry_points

    from submitit.core import plugins

    from orchestrator.schedulers.pbs.job_environment import PBSJobEnvironment

    points = {p.name: p for p in entry_points(group="submitit") if p.value.startswith("orchestrator.")}
    assert sorted(points) == ["executor", "job_environment"]
    assert points["executor"].load() is PBSExecutor
    assert points["job_environment"].load() is PBSJobEnvironment
    # submitit itself, from the entry points alone (the cache may hold a registration made by another test).
    monkeypatch.setattr(plugins, "_get_plugins", plugins._get_plugins.__wrapped__)
    plugins.get_executors.cache_clear()
    plugins.get_job_environments.cache_clear()
    try:
        assert plugins.get_executors()["pbs"] is PBSExecutor
        assert isinstance(plugins.get_job_environments()["pbs"], PBSJobEnvironment)
    finally:
        plugins.get_executors.cache_clear()
        plugins.get_job_environments.cache_clear()


# ---- PBS Pro's JSON as real builds print it -------------------------------------------------------------------------

def test_pbspro_json_with_broken_values_is_read_job_by_job():
    """Unquoted numeric-looking values (issue 1255), invalid escapes \\' \\, from -V and bash functions (issue
    2541, PR 2049), and an unescaped line break in a bash function: every state is read, and no value is guessed."""
    text = (DATA / "qstat_pbspro_broken_variables.json").read_text()
    with pytest.raises(ValueError):
        __import__("json").loads(text)  # what the reader must survive
    info, unreadable = qstat.read_pbspro_json(text)
    assert {k: v["State"] for k, v in info.items()} == {
        "12345685.gadi-pbs": "RUNNING", "12345686.gadi-pbs": "COMPLETED", "12345687.gadi-pbs": "PENDING",
        "12345688.gadi-pbs": "RUNNING"}
    # Repaired as PR 2049 repairs them: the value the user exported.
    assert info["12345685.gadi-pbs"]["Variable_List"]["AMDNN_RUN"] == "005"
    assert info["12345685.gadi-pbs"]["Variable_List"]["TZ_OFFSET"] == "+1000"
    variables = info["12345686.gadi-pbs"]["Variable_List"]
    assert variables["MYVAR"] == "'\"asads\"'" and variables["MYVAR2"] == "ab,c"
    assert variables["MYVAR3"] == "/home/abc123/Mo\\'"
    assert variables["BASH_FUNC_module%%"].startswith("() {  local IFS=,; eval `")
    # A line break inside Variable_List cannot be repaired line by line: the job is read without its variables.
    assert "Variable_List" not in info["12345688.gadi-pbs"]
    # A line break elsewhere: not read at all, and said so (the caller asks again in the text form).
    assert unreadable == ["12345689.gadi-pbs"]


class FakeQstat:
    """qstat's answers by command line, for query.py; records what was asked."""

    def __init__(self, answers: dict):
        self.answers = answers
        self.calls: list = []

    def __call__(self, command, **kw):
        self.calls.append(" ".join(command))
        return subprocess.CompletedProcess(command, 0, self.answers.get(" ".join(command), ""), "")


@pytest.fixture
def pbspro(monkeypatch):
    monkeypatch.setenv("AMDNN_PBS_FLAVOUR", "pbspro")
    query.qstat_flavour.cache_clear()
    yield
    query.qstat_flavour.cache_clear()


def test_ids_missing_from_the_answer_are_asked_again_singly(pbspro):
    """OpenPBS issue 2672: `qstat -f -F json A B` answers A only. B must not look forgotten (that is: dead)."""
    fake = FakeQstat({
        "qstat -x -f -F json 12345690.gadi-pbs 12345691.gadi-pbs": (DATA / "qstat_pbspro_first_only.json").read_text(),
        "qstat -x -f -F json 12345691.gadi-pbs": (DATA / "qstat_pbspro_12345691.json").read_text()})
    info = query.query_info(["12345691.gadi-pbs", "12345690.gadi-pbs"], run=fake)
    assert {k: v["State"] for k, v in info.items()} == {"12345690.gadi-pbs": "RUNNING",
                                                        "12345691.gadi-pbs": "TIMEOUT"}
    assert fake.calls == ["qstat -x -f -F json 12345690.gadi-pbs 12345691.gadi-pbs",
                          "qstat -x -f -F json 12345691.gadi-pbs"]


def test_unreadable_json_falls_back_to_the_text_form_for_that_job_only(pbspro):
    ids = [f"1234568{i}.gadi-pbs" for i in range(5, 10)]
    fake = FakeQstat({"qstat -x -f -F json " + " ".join(ids): (DATA / "qstat_pbspro_broken_variables.json").read_text(),
                      "qstat -x -f 12345689.gadi-pbs": (DATA / "qstat_pbspro_text_12345689.txt").read_text()})
    states = query.query_states(ids, run=fake)
    assert states == {"12345685.gadi-pbs": "RUNNING", "12345686.gadi-pbs": "COMPLETED",
                      "12345687.gadi-pbs": "PENDING", "12345688.gadi-pbs": "RUNNING",
                      "12345689.gadi-pbs": "CANCELLED"}  # 271 = 256 + SIGTERM, from the text form
    assert fake.calls[1:] == ["qstat -x -f 12345689.gadi-pbs"]


def test_a_job_unreadable_both_ways_is_never_called_dead(pbspro):
    broken = (DATA / "qstat_pbspro_broken_variables.json").read_text()
    fake = FakeQstat({"qstat -x -f -F json 12345689.gadi-pbs": broken,
                      "qstat -x -f 12345689.gadi-pbs": "qstat: cannot connect to server gadi-pbs-01 (errno=15010)"})
    info = query.query_info(["12345689.gadi-pbs"], run=fake)
    assert info["12345689.gadi-pbs"]["State"] == "UNKNOWN"  # the watcher keeps waiting
    with pytest.raises(RuntimeError, match="12345689.gadi-pbs could not be read.*cannot tell whether"):
        query.query_states(["12345689.gadi-pbs"], run=fake)


def test_ids_qstat_does_not_know_are_left_out(pbspro):
    """A job PBS has forgotten (past its history) is absent: the status table calls it dead, as it is."""
    fake = FakeQstat({"qstat -x -f -F json 12345690.gadi-pbs 99.gadi-pbs":
                      (DATA / "qstat_pbspro_first_only.json").read_text()})
    assert query.query_states(["99.gadi-pbs", "12345690.gadi-pbs"], run=fake) == {"12345690.gadi-pbs": "RUNNING"}
    assert fake.calls[1:] == ["qstat -x -f -F json 99.gadi-pbs"]


def test_the_watcher_reads_every_job_through_the_same_queries(pbspro, monkeypatch):
    fake = FakeQstat({
        "qstat -x -f -F json 12345690.gadi-pbs 12345691": (DATA / "qstat_pbspro_first_only.json").read_text(),
        "qstat -x -f -F json 12345691": (DATA / "qstat_pbspro_12345691.json").read_text()})
    monkeypatch.setattr(query.subprocess, "run", fake)
    watcher = PBSInfoWatcher()
    watcher.register_job("12345690.gadi-pbs")
    watcher.register_job("12345691")  # as qsub printed it
    watcher.update()
    assert watcher.get_state("12345690.gadi-pbs", mode="cache") == "RUNNING"
    assert watcher.get_state("12345691", mode="cache") == "TIMEOUT"


def test_a_waiting_jobs_reason_is_pbs_comment(pbspro):
    """What `status` shows for a queued PBS job: its comment (a PBS Pro answer as text; no PBS Pro server here)."""
    from orchestrator.schedulers import job_status

    ids = ["12345682.gadi-pbs", "12345678.gadi-pbs"]
    fake = FakeQstat({"qstat -x -f -F json " + " ".join(sorted(ids)): (DATA / "qstat_pbspro_gadi.json").read_text()})
    assert job_status.job_reasons("pbs", ids, run=fake) == {
        "12345682.gadi-pbs": "Not Running: Insufficient amount of resource: ngpus"}
