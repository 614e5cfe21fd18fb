"""qstat parsers and the PBS plugin's plumbing, without a scheduler.

No PBS Pro server can run here (Debian has none), so PBS Pro's `qstat -x -f -F json` is read from a file written in
the layout and attribute names of PBS Pro 2022 output on Gadi (data/qstat_pbspro_gadi.json). The Torque-style text is
read both from a Torque-format sample and from output recorded from Slurm's Torque wrapper on this machine.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.cluster.pbs import qstat
from orchestrator.cluster.pbs.executor import PBSInfoWatcher, job_id_from_qsub, submission_command
from orchestrator.cluster.resources import RESOURCE_NAMES, scheduler_resources, walltime_seconds

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
    from orchestrator.cluster.pbs import executor

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


def test_submitit_finds_the_plugin_by_entry_point_or_registration():
    """Installed (pip install -e .), submitit's entry points name the plugin; the job entry point registers it
    either way."""
    from submitit.core import plugins

    import orchestrator.cluster.pbs.__main__ as entry

    entry._register()
    assert "pbs" in plugins.get_executors() and "pbs" in plugins.get_job_environments()
