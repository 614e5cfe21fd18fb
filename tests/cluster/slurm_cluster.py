"""A real single-node Slurm for the cluster tests: munge, MariaDB, slurmdbd, slurmctld, slurmd and the Torque wrappers.

Follows ../shared/CLUSTER.md. `SlurmCluster().start()` installs the Debian packages when they are missing, writes the
configuration, starts only what is not already running and remembers what it started; `stop()` stops exactly that.
Starting is idempotent: a cluster this harness brought up earlier (in this test session, or in an earlier one kept
with AMDNN_KEEP_SLURM=1) is reused as it is.

    python tests/cluster/slurm_cluster.py start|stop|status      (by hand, as root)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

PACKAGES = ("slurm-wlm", "slurmdbd", "mariadb-server", "munge", "slurm-wlm-torque")
# The commands each package provides; a missing one means the package must be installed.
COMMANDS = ("slurmctld", "slurmd", "slurmdbd", "mysqld_safe", "munged", "qsub")
CLUSTER_NAME = "amdnn"
# Seconds between SIGTERM and SIGKILL at a time limit. Short, so that a walltime test cut twice still takes minutes.
KILL_WAIT_S = 15
CRED_EXPIRE_S = 10
DB = {"name": "slurm_acct_db", "user": "slurm", "password": "amdnn-test-only"}

ETC = Path("/etc/slurm")
STATE = Path("/var/lib/amdnn-slurm")  # spool, state, logs, pid files and the record of what was started
RECORD = STATE / "started.json"


class Unavailable(RuntimeError):
    """Slurm cannot be set up here (not root, no apt): the tests using it are skipped with this message."""


def _run(cmd: list[str], check: bool = True, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, timeout=timeout, capture_output=True, text=True, **kw)


def _ok(cmd: list[str], timeout: float = 20) -> bool:
    try:
        return _run(cmd, check=False, timeout=timeout).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _wait(what: str, test, timeout: float = 90) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if test():
            return
        time.sleep(0.5)
    raise RuntimeError(f"Slurm test cluster: {what} did not come up within {timeout:.0f} s; logs are in {STATE}/log")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _mem_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            # Leave room for the OS and the other daemons.
            return int(line.split()[1]) // 1024 - 1024
    return 2048


class SlurmCluster:
    """One single-node Slurm cluster on this machine; see the module docstring."""

    def __init__(self) -> None:
        self.host = socket.gethostname().split(".")[0]
        self.started: dict[str, int] = {}  # daemon name -> pid of what this harness started
        self._conf_changed = False

    # ---- availability -------------------------------------------------------------------------------------------
    @staticmethod
    def unavailable_reason() -> str | None:
        """Why this machine cannot run the test cluster, or None when it can."""
        if os.geteuid() != 0:
            return "the Slurm cluster tests need root (they install and start munge, MariaDB and Slurm daemons)"
        if not all(shutil.which(c) for c in COMMANDS) and not shutil.which("apt-get"):
            return (f"the Slurm cluster tests need the Debian packages {' '.join(PACKAGES)} or apt-get to install "
                    "them, and this machine has neither")
        return None

    def install(self) -> None:
        if all(shutil.which(c) for c in COMMANDS):
            return
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        # Package scripts try to start services; there is no init system in a container, and we start them ourselves.
        policy = Path("/usr/sbin/policy-rc.d")
        created_policy = not policy.exists()
        if created_policy:
            policy.write_text("#!/bin/sh\nexit 101\n")
            policy.chmod(0o755)
        try:
            _run(["apt-get", "update"], env=env, timeout=900)
            _run(["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES], env=env, timeout=1800)
        except subprocess.CalledProcessError as e:
            raise RuntimeError(f"installing {' '.join(PACKAGES)} failed:\n{e.stdout}\n{e.stderr}") from e
        finally:
            if created_policy:
                policy.unlink()

    # ---- start ------------------------------------------------------------------------------------------------
    def start(self) -> "SlurmCluster":
        reason = self.unavailable_reason()
        if reason:
            raise Unavailable(reason)
        self.install()
        for sub in ("spool/ctld", "spool/d", "log", "run"):
            (STATE / sub).mkdir(parents=True, exist_ok=True)
        if RECORD.exists():
            self.started = {k: v for k, v in json.loads(RECORD.read_text()).items() if _pid_alive(v)}
        self._start_munge()
        self._start_mariadb()
        self._start_slurmdbd()
        self._start_slurm()
        RECORD.write_text(json.dumps(self.started))
        return self

    def _remember(self, name: str, pid: int | None) -> None:
        if pid is not None:
            self.started[name] = pid
            RECORD.write_text(json.dumps(self.started))

    def _start_munge(self) -> None:
        key = Path("/etc/munge/munge.key")
        if not key.exists():
            _run(["mungekey", "--create", "--keyfile", str(key)])
        shutil.chown(key, "munge", "munge")
        key.chmod(0o400)
        for d in ("/run/munge", "/var/log/munge", "/var/lib/munge"):
            Path(d).mkdir(parents=True, exist_ok=True)
            shutil.chown(d, "munge", "munge")
        if self._munge_ok():
            return
        _run(["runuser", "-u", "munge", "--", "munged", "--force"])
        _wait("munged", self._munge_ok, 30)
        self._remember("munged", _read_pid(Path("/run/munge/munged.pid")))

    @staticmethod
    def _munge_ok() -> bool:
        try:
            cred = _run(["munge", "-n"], check=False, timeout=10).stdout
            return "Success" in _run(["unmunge"], check=False, input=cred, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            return False

    def _start_mariadb(self) -> None:
        run = Path("/run/mysqld")
        run.mkdir(parents=True, exist_ok=True)
        shutil.chown(run, "mysql", "mysql")
        ping = lambda: _ok(["mariadb-admin", "ping"])  # noqa: E731
        if not ping():
            proc = subprocess.Popen(["mysqld_safe", "--user=mysql"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
            _wait("MariaDB", ping, 90)
            self._remember("mysqld_safe", proc.pid)
        sql = (f"CREATE DATABASE IF NOT EXISTS {DB['name']}; "
               f"CREATE USER IF NOT EXISTS '{DB['user']}'@'localhost' IDENTIFIED BY '{DB['password']}'; "
               f"GRANT ALL ON {DB['name']}.* TO '{DB['user']}'@'localhost'; FLUSH PRIVILEGES;")
        _run(["mariadb", "-e", sql])

    @staticmethod
    def _write(path: Path, text: str, mode: int = 0o644) -> bool:
        """Write if different; True when the file changed."""
        changed = not path.exists() or path.read_text() != text
        if changed:
            path.write_text(text)
        path.chmod(mode)
        return changed

    def _start_slurmdbd(self) -> None:
        ETC.mkdir(parents=True, exist_ok=True)
        # sacctmgr reads slurm.conf to find slurmdbd, so it must exist before the first sacctmgr call.
        self._conf_changed = self._write(ETC / "slurm.conf", self.slurm_conf())
        self._write(ETC / "slurmdbd.conf", "\n".join([
            "AuthType=auth/munge", "DbdHost=localhost", "SlurmUser=root",
            f"LogFile={STATE}/log/slurmdbd.log", f"PidFile={STATE}/run/slurmdbd.pid",
            "StorageType=accounting_storage/mysql", "StorageHost=localhost",
            f"StorageUser={DB['user']}", f"StoragePass={DB['password']}", f"StorageLoc={DB['name']}", ""]), 0o600)
        pidfile = STATE / "run/slurmdbd.pid"
        pid = _read_pid(pidfile)
        if pid is None or not _pid_alive(pid):
            _run(["slurmdbd"])
            _wait("slurmdbd's pid file", lambda: _read_pid(pidfile) is not None, 30)
            self._remember("slurmdbd", _read_pid(pidfile))
            _wait("slurmdbd", lambda: _ok(["sacctmgr", "-n", "show", "cluster"]), 60)
        if CLUSTER_NAME not in _run(["sacctmgr", "-n", "-P", "show", "cluster", "format=cluster"]).stdout.split():
            _run(["sacctmgr", "-i", "add", "cluster", CLUSTER_NAME])

    def slurm_conf(self) -> str:
        return "\n".join([
            f"ClusterName={CLUSTER_NAME}", f"SlurmctldHost={self.host}", "SlurmUser=root", "AuthType=auth/munge",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
            "AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=localhost",
            "JobAcctGatherType=jobacct_gather/none",
            f"StateSaveLocation={STATE}/spool/ctld", f"SlurmdSpoolDir={STATE}/spool/d",
            f"SlurmctldPidFile={STATE}/run/slurmctld.pid", f"SlurmdPidFile={STATE}/run/slurmd.pid",
            f"SlurmctldLogFile={STATE}/log/slurmctld.log", f"SlurmdLogFile={STATE}/log/slurmd.log",
            f"KillWait={KILL_WAIT_S}", "ReturnToService=2", "MpiDefault=none",
            # A requeued job waits cred_expire seconds (120 by default) before it may start again; the walltime test
            # requeues several times, so keep that short here.
            f"AuthInfo=cred_expire={CRED_EXPIRE_S}",
            # ... and the scheduler looks for newly eligible jobs every few seconds instead of every minute.
            "SchedulerParameters=sched_interval=5",
            # Requeued and finished jobs leave the controller's memory quickly; sacct keeps them.
            "MinJobAge=60",
            f"NodeName={self.host} CPUs={os.cpu_count()} RealMemory={_mem_mb()} State=UNKNOWN",
            f"PartitionName=debug Nodes={self.host} Default=YES MaxTime=INFINITE State=UP", ""])

    def _start_slurm(self) -> None:
        # slurm.conf may have been rewritten by _start_slurmdbd; running daemons keep some settings (cred_expire)
        # until restarted, so a changed file restarts them.
        if self._conf_changed:
            for daemon in ("slurmd", "slurmctld"):
                pid = _read_pid(STATE / f"run/{daemon}.pid")
                if pid is not None and _pid_alive(pid):
                    os.kill(pid, signal.SIGTERM)
                    _wait(f"{daemon} to stop", lambda: not _pid_alive(pid), 30)
        for daemon in ("slurmctld", "slurmd"):
            pidfile = STATE / f"run/{daemon}.pid"
            pid = _read_pid(pidfile)
            if pid is None or not _pid_alive(pid):
                _run([daemon])
                _wait(f"{daemon}'s pid file", lambda: _read_pid(pidfile) is not None, 30)
                self._remember(daemon, _read_pid(pidfile))
        _wait("the Slurm node", self.node_idle, 90)

    def node_idle(self) -> bool:
        try:
            out = _run(["sinfo", "-h", "-N", "-o", "%T"], check=False, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            return False
        states = out.split()
        if any(s.rstrip("*") in ("down", "drained", "draining") for s in states):
            _run(["scontrol", "update", f"nodename={self.host}", "state=resume"], check=False)
        return any(s.rstrip("*") in ("idle", "mixed", "allocated") for s in states)

    # ---- stop -------------------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop what this harness started, newest first; leave anything else running."""
        if RECORD.exists():
            self.started.update(json.loads(RECORD.read_text()))
        for name in ("slurmd", "slurmctld", "slurmdbd", "mysqld_safe", "munged"):
            pid = self.started.pop(name, None)
            if pid is None or not _pid_alive(pid):
                continue
            if name == "mysqld_safe":
                _run(["mariadb-admin", "shutdown"], check=False, timeout=60)
            else:
                os.kill(pid, signal.SIGTERM)
            deadline = time.time() + 30
            while _pid_alive(pid) and time.time() < deadline:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
                time.sleep(0.2)
            if _pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        RECORD.unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    cluster = SlurmCluster()
    action = argv[1] if len(argv) > 1 else "status"
    if action == "start":
        cluster.start()
        print(f"Slurm test cluster up on {cluster.host}; started {sorted(cluster.started) or 'nothing (reused)'}")
    elif action == "stop":
        cluster.stop()
        print("stopped what the harness had started")
    else:
        print(_run(["sinfo"], check=False).stdout or "no Slurm answering")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
