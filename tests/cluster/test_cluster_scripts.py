"""Job scripts: the Slurm, PBS Pro (Gadi) and Torque scripts the launchers write, against golden files; the hand-written
jobs/ scripts against the same writers; and config values that try to inject shell, refused. No scheduler needed.

Regenerate the golden files after an intended change with AMDNN_UPDATE_GOLDEN=1 and review the diff.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from orchestrator.common import paths
from orchestrator.schedulers import scripts
from orchestrator.schedulers.params import executor_parameters
from orchestrator.schedulers.pbs.script import make_pbs_script
from orchestrator.schedulers.slurm import make_sbatch_script

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"
# Fixed paths, so the scripts do not depend on the machine running the tests.
FOLDER = "/scratch/ab12/abc123/amdnn/multirun/2026-01-01/00-00-00/.submitit/%j"
PYTHON = "/home/123/abc123/amdnn/.venv/bin/python"
REPO_ON_CLUSTER = "/home/123/abc123/amdnn"


def cluster_config(name: str, *overrides: str) -> dict:
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"cluster={name}", *overrides])
    return OmegaConf.to_container(cfg.cluster, resolve=True)


def render(name: str, *overrides: str, monkeypatch) -> str:
    """The script the launcher would submit for cluster=<name> (as the first job of a sweep)."""
    monkeypatch.setattr(paths, "repo_root", lambda: Path(REPO_ON_CLUSTER))
    cluster = cluster_config(name, *overrides)
    params = executor_parameters(cluster["scheduler"], cluster)
    command = f"{PYTHON} -u -m " + ("submitit.core._submit" if cluster["scheduler"] == "slurm"
                                    else "orchestrator.schedulers.pbs") + f" {FOLDER}"
    if cluster["scheduler"] == "slurm":
        return make_sbatch_script(command, FOLDER, **params)
    return make_pbs_script(command, FOLDER, **params)


CASES = {
    "slurm.sbatch": ("slurm", "cluster.partition=gpu", "cluster.gpus=1", "cluster.modules=[cuda/12.2.0]"),
    "gadi.pbs": ("gadi", "cluster.project=ab12", "cluster.modules=[cuda/12.2.0]"),
    "torque.pbs": ("pbs", "cluster.flavour=torque", "cluster.queue=batch", "cluster.walltime=12:00:00"),
}


@pytest.mark.parametrize("golden", sorted(CASES))
def test_job_script_matches_golden_file(golden, monkeypatch):
    text = render(*CASES[golden], monkeypatch=monkeypatch)
    path = GOLDEN / golden
    if os.environ.get("AMDNN_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert text == path.read_text(), f"{golden} changed; if intended, regenerate with AMDNN_UPDATE_GOLDEN=1"


def _directives(text: str, prefix: str) -> list[str]:
    return sorted(line.strip() for line in text.splitlines() if line.startswith(prefix))


def test_hand_slurm_script_has_the_launchers_directives(monkeypatch):
    generated = _directives(render("slurm", monkeypatch=monkeypatch), "#SBATCH")
    hand = _directives((REPO / "jobs/slurm.sbatch").read_text(), "#SBATCH")
    # The launcher's logs, wckey and array lines are its own business; the resources and the signal must agree.
    ignore = ("--output", "--error", "--wckey", "--array")
    strip = lambda lines: [d for d in lines if not d.split()[1].startswith(ignore)]  # noqa: E731
    assert strip(hand) == strip(generated)


def test_hand_gadi_script_has_the_launchers_directives(monkeypatch):
    text = render("gadi", "cluster.project=ab12", monkeypatch=monkeypatch)
    hand = (REPO / "jobs/gadi.pbs").read_text()
    assert _directives(hand, "#PBS") == _directives(text, "#PBS")
    # The same walltime and warning as the launcher's jobs.
    for var in ("AMDNN_WALLTIME_S", "AMDNN_WARN_BEFORE_S"):
        assert re.search(rf"{var}=(\d+)", hand).group(1) == re.search(rf"{var}=(\d+)", text).group(1)


@pytest.mark.parametrize("name, script", [("slurm", "jobs/slurm.sbatch"), ("gadi", "jobs/gadi.pbs")])
def test_hand_scripts_continue_as_often_as_the_config_says(name, script):
    # job.py has no default for --max-requeues: the hand scripts pass conf's cluster.max_requeues.
    hand = (REPO / script).read_text()
    assert int(re.search(r"--max-requeues (\d+)", hand).group(1)) == cluster_config(name)["max_requeues"]


@pytest.mark.parametrize("key", ["array_parallelism", "warn_before_s"])
def test_a_default_missing_from_the_config_is_named_not_invented(key):
    # Defaults live in conf/cluster/_scheduler.yaml only; the code has none to fall back on.
    cluster = {k: v for k, v in cluster_config("slurm").items() if k != key}
    with pytest.raises(ValueError, match=rf"cluster\.{key} is not set: .*conf/cluster/_scheduler\.yaml"):
        executor_parameters("slurm", cluster)


def test_slurm_warning_is_well_below_a_short_walltime():
    cluster = cluster_config("slurm", "cluster.walltime=00:01:00")
    params = executor_parameters("slurm", cluster)
    assert params["time"] == 1 and params["signal_delay_s"] == 10
    assert params["additional_parameters"]["signal"] == "USR1@10"


COMMON = [
    ("job_name", "x;touch /tmp/pwned"),
    ("job_name", "x\n#SBATCH --nodes=100"),
    ("modules", ["cuda; rm -rf ~"]),
    ("env", {"A;B": "1"}),
    ("env", {"OK": "line1\nline2"}),
    ("setup", ["echo hi\n#SBATCH --mem=1TB"]),
    ("setup", ["#PBS -l ngpus=8"]),
    ("walltime", "01:00:00;id"),
]
INJECTIONS = [("slurm", k, v) for k, v in COMMON + [
    ("partition", "debug$(touch /tmp/pwned)"), ("account", "a`id`"), ("qos", "normal --wrap=id"),
    ("constraint", "v100\n#SBATCH --gres=gpu:8")]] + [("gadi", k, v) for k, v in COMMON + [
    ("queue", "gpuvolta -l select=99"), ("project", "ab12\n#PBS -q x"), ("storage", "gdata/ab12 ;id"),
    ("jobfs", "100GB,ngpus=8 x"), ("account", "a`id`")]]


@pytest.mark.parametrize("scheduler,key,value", INJECTIONS,
                         ids=[f"{s}-{k}={v!r}"[:60] for s, k, v in INJECTIONS])
def test_injection_attempts_are_refused(scheduler, key, value):
    """Each value is refused before any script exists, with a message that says what would be right."""
    cluster = cluster_config(scheduler, *(["cluster.project=ab12"] if scheduler == "gadi" else []))
    cluster[key] = value
    with pytest.raises(ValueError) as err:
        params = executor_parameters(cluster["scheduler"], cluster)
        writer = make_sbatch_script if cluster["scheduler"] == "slurm" else make_pbs_script
        writer("true", FOLDER, **params)
    assert "expected" in str(err.value)


def test_paths_are_quoted_and_job_ids_checked(tmp_path):
    weird = "/tmp/a b/$(touch x)/'q'"
    text = make_pbs_script("true", weird + "/%j", workdir=weird, flavour="torque")
    assert "cd '/tmp/a b/$(touch x)/'\"'\"'q'\"'\"''" in text
    with pytest.raises(scripts.UnsafeValue):
        scripts.bare_path("folder", weird)  # Slurm's qsub wrapper would paste this into a shell unquoted
    with pytest.raises(scripts.UnsafeValue):
        scripts.job_id("123; scancel -u root")
    assert scripts.job_id("12345678[3].gadi-pbs") == "12345678[3].gadi-pbs"


def test_a_quoted_injection_does_not_run(tmp_path):
    """The quoting holds in a real shell: a path with $(...) in an exported variable runs nothing."""
    import subprocess

    marker = tmp_path / "pwned"
    lines = scripts.environment_lines(env={"AMDNN_X": f"$(touch {marker})"})
    subprocess.run(["bash", "-c", "\n".join(lines) + '\necho "$AMDNN_X"'], check=True, capture_output=True)
    assert not marker.exists()


def test_unknown_pbs_parameter_lists_the_valid_ones(tmp_path):
    from orchestrator.schedulers.pbs.executor import PBSExecutor

    if not __import__("shutil").which("qsub"):
        pytest.skip("no qsub on this machine (the PBS executor refuses to start without one)")
    executor = PBSExecutor(tmp_path / "%j")
    with pytest.raises(ValueError, match="(?s)Valid parameters are:.*walltime"):
        executor.update_parameters(wallclock="01:00:00")


def test_gadi_without_a_project_says_which_key_to_set(monkeypatch):
    monkeypatch.delenv("PROJECT", raising=False)
    cluster = cluster_config("gadi")
    with pytest.raises(ValueError, match="cluster.project"):
        executor_parameters("pbs", cluster)


def test_resume_cron_line_runs_the_resume_and_archive_commands(tmp_path):
    import subprocess
    import sys

    lines = [line for line in (REPO / "jobs/resume.cron").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert len(lines) == 1
    fields = lines[0].split(None, 5)
    assert len(fields) == 6 and fields[0] == "*/30"  # minute hour day month weekday command
    assert "-m orchestrator.cluster.resume" in fields[5] and "-m orchestrator.cluster.archive" in fields[5]
    for module in ("orchestrator.cluster.resume", "orchestrator.cluster.archive"):
        out = subprocess.run([sys.executable, "-m", module, "--state-dir", str(tmp_path)], cwd=REPO,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
    status = subprocess.run([sys.executable, "-m", "orchestrator.cluster.status", "--state-dir", str(tmp_path)],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert "no launched cells recorded" in status.stdout
