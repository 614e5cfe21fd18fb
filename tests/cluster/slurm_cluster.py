"""A real single-node Slurm for the cluster tests, private to them: munge, MariaDB, slurmdbd, slurmctld, slurmd.

Debian 12's packages (Slurm 22.05, MariaDB 10.11, munge 0.5), started without an init system, with everything in one
private folder (ROOT, default /var/lib/amdnn-test-slurm, or AMDNN_SLURM_DIR): configuration, munge key and socket,
MariaDB data, Slurm state, spool, logs and pid files. The daemons read their configuration from there (`-f`, and
SLURM_CONF for slurmdbd); clients find it through SLURM_CONF, which the test session sets in its own environment so
that every command the product runs (sbatch, squeue, sacct, scancel, the Torque wrappers qsub/qstat/qdel) and every
job inherits it. Ports are chosen free on this machine, the database user is new with a random password, and nothing
under /etc is written: the suite runs beside a Slurm, munge or MariaDB the machine already has, and leaves them
alone. Packages are installed with apt when missing (their own defaults, --force-confold: no configuration file the
machine has is replaced, and this harness writes none outside ROOT).

`SlurmCluster().start()` starts the daemons and records them (ROOT/cluster.json); `stop()` stops exactly those and
removes ROOT. A cluster kept with AMDNN_KEEP_SLURM=1 is reused by the next session when its daemons still run.
AMDNN_TEST_SLURM=system uses the machine's own Slurm instead (the user's cluster: its default configuration, its
default partition; nothing is started or stopped).

    python tests/cluster/slurm_cluster.py start|stop|status      (by hand, as root; then export SLURM_CONF=...)
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

PACKAGES = ("slurm-wlm", "slurmdbd", "mariadb-server", "munge", "slurm-wlm-torque")
# The commands each package provides; a missing one means the package must be installed.
COMMANDS = ("slurmctld", "slurmd", "slurmdbd", "mariadbd", "mariadb-install-db", "munged", "qsub")
CLUSTER_NAME = "amdnn"
# Seconds between SIGTERM and SIGKILL at a time limit. Short, so that a walltime test cut twice still takes minutes.
KILL_WAIT_S = 15
CRED_EXPIRE_S = 10
ROOT = Path(os.environ.get("AMDNN_SLURM_DIR", "/var/lib/amdnn-test-slurm"))
# Daemons in start order; stop goes the other way.
DAEMONS = ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd")
# Ports are looked for from here upwards: below Linux's ephemeral range (32768-60999), so that no outgoing
# connection takes one between choosing it and the daemon binding it, and away from Slurm's defaults (6817-6819).
PORT_BASE = 16817
MODES = ("private", "system")


class Unavailable(RuntimeError):
    """Slurm cannot be set up here (not root, no apt): the tests using it are skipped with this message."""


def mode() -> str:
    """AMDNN_TEST_SLURM: 'private' (default: start a private cluster) or 'system' (use the machine's own Slurm)."""
    value = os.environ.get("AMDNN_TEST_SLURM", "private")
    if value not in MODES:
        raise ValueError(f"AMDNN_TEST_SLURM={value!r}: expected one of {', '.join(MODES)}")
    return value


def _run(cmd: list[str], check: bool = True, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, timeout=timeout, capture_output=True, text=True, **kw)


def _ok(cmd: list[str], timeout: float = 20, **kw) -> bool:
    try:
        return _run(cmd, check=False, timeout=timeout, **kw).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _wait(what: str, test, timeout: float = 90) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if test():
            return
        time.sleep(0.5)
    raise RuntimeError(f"Slurm test cluster: {what} did not come up within {timeout:.0f} s; logs are in {ROOT}/log")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours counts as gone
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return True


def _is_process(pid: int, name: str) -> bool:
    """pid is alive and is `name` (a recorded pid may have been reused by another process since)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == name[:15] and _pid_alive(pid)
    except OSError:
        return False


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


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_ports(count: int, start: int = PORT_BASE) -> list[int]:
    """`count` TCP ports nothing listens on, from `start` upwards."""
    ports: list[int] = []
    port = start
    while len(ports) < count:
        if port > 32000:
            raise RuntimeError(f"Slurm test cluster: fewer than {count} free TCP ports in {start}-32000")
        if _port_free(port):
            ports.append(port)
        port += 1
    return ports


class Paths:
    """Where everything of the private cluster lives, under one root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.etc = root / "etc"
        self.slurm_conf = self.etc / "slurm.conf"
        self.dbd_conf = self.etc / "slurmdbd.conf"  # slurmdbd reads it beside $SLURM_CONF
        self.munge = root / "munge"                 # owned by the munge user: key, socket, seed, log, pid
        self.munge_key = self.munge / "munge.key"
        self.munge_socket = self.munge / "munge.socket"
        self.mysql = root / "mysql"                 # owned by the mysql user: data, socket, pid, error log
        self.mysql_socket = self.mysql / "mysqld.sock"
        self.log = root / "log"
        self.run = root / "run"
        self.record = root / "cluster.json"         # ports, database credentials, pids of what was started


class SlurmCluster:
    """One private single-node Slurm cluster on this machine; see the module docstring."""

    def __init__(self, root: Path = ROOT) -> None:
        self.host = socket.gethostname().split(".")[0]
        self.paths = Paths(root)
        self.started: dict[str, int] = {}  # daemon name -> pid of what this harness started
        self.ports: dict[str, int] = {}
        self.db: dict[str, str] = {}

    @property
    def conf(self) -> Path:
        """The slurm.conf that clients must be given as SLURM_CONF."""
        return self.paths.slurm_conf

    def env(self) -> dict[str, str]:
        return dict(os.environ, SLURM_CONF=str(self.conf))

    # ---- availability -------------------------------------------------------------------------------------------
    @staticmethod
    def unavailable_reason() -> str | None:
        """Why this machine cannot run the test cluster, or None when it can."""
        if os.geteuid() != 0:
            return ("the Slurm cluster tests need root (they install and start munge, MariaDB and Slurm daemons); "
                    "to run them on a Slurm you already have, set AMDNN_TEST_SLURM=system")
        if not all(shutil.which(c) for c in COMMANDS) and not shutil.which("apt-get"):
            return (f"the Slurm cluster tests need the Debian packages {' '.join(PACKAGES)} or apt-get to install "
                    "them, and this machine has neither")
        return None

    def install(self) -> None:
        if all(shutil.which(c) for c in COMMANDS):
            return
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        # Package scripts try to start services; there is no init system in a container, and we start our own.
        policy = Path("/usr/sbin/policy-rc.d")
        created_policy = not policy.exists()
        if created_policy:
            policy.write_text("#!/bin/sh\nexit 101\n")
            policy.chmod(0o755)
        try:
            _run(["apt-get", "update"], env=env, timeout=900)
            # --force-confold: a configuration file the machine already has is kept, never replaced.
            _run(["apt-get", "install", "-y", "--no-install-recommends", "-o", "Dpkg::Options::=--force-confold",
                  *PACKAGES], env=env, timeout=1800)
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
        if self._reusable():
            return self
        self.stop()  # whatever is left of an earlier cluster under ROOT
        self._prepare()
        self._start_munge()
        self._start_mariadb()
        self._start_slurmdbd()
        self._start_slurm()
        return self

    def _load(self) -> bool:
        try:
            record = json.loads(self.paths.record.read_text())
        except (OSError, ValueError):
            return False
        self.started, self.ports, self.db = record["started"], record["ports"], record["db"]
        return True

    def _save(self) -> None:
        self.paths.record.write_text(json.dumps({"started": self.started, "ports": self.ports, "db": self.db}))
        self.paths.record.chmod(0o600)  # holds the database password

    def _reusable(self) -> bool:
        """A cluster of this harness from an earlier session (AMDNN_KEEP_SLURM=1), complete, current and answering."""
        if not self._load():
            return False
        if set(self.started) != set(DAEMONS) or not all(_is_process(p, n) for n, p in self.started.items()):
            return False
        if not self.conf.exists() or self.conf.read_text() != self.slurm_conf():
            return False  # this file's settings changed since: start afresh
        try:
            _wait("the Slurm node", self.node_idle, 30)
        except RuntimeError:
            return False
        return True

    def _prepare(self) -> None:
        p = self.paths
        for d in (p.etc, p.log, p.run, p.root / "spool/ctld", p.root / "spool/d"):
            d.mkdir(parents=True, exist_ok=True)
        p.root.chmod(0o755)
        # munged wants its socket's folder open to all (any user's client talks to it), mariadbd only to root.
        for d, owner, d_mode in ((p.munge, "munge", 0o755), (p.mysql, "mysql", 0o700)):
            d.mkdir(exist_ok=True)
            d.chmod(d_mode)
            shutil.chown(d, owner, owner)
        self.ports = dict(zip(("slurmctld", "slurmd", "slurmdbd", "mariadbd"), free_ports(4)))
        # A database user of our own, with a fresh password: an existing 'slurm' user elsewhere does not matter.
        self.db = {"name": "amdnn_slurm_acct", "user": f"amdnn_{secrets.token_hex(4)}",
                   "password": secrets.token_urlsafe(18)}
        self.started = {}
        self._save()

    def _remember(self, name: str, pid: int | None) -> None:
        if pid is not None:
            self.started[name] = pid
            self._save()

    # munge ---------------------------------------------------------------------------------------------------
    def _start_munge(self) -> None:
        p = self.paths
        _run(["mungekey", "--create", "--keyfile", str(p.munge_key)])
        shutil.chown(p.munge_key, "munge", "munge")
        p.munge_key.chmod(0o400)
        pidfile = p.munge / "munged.pid"
        _run(["runuser", "-u", "munge", "--", "munged", f"--socket={p.munge_socket}", f"--key-file={p.munge_key}",
              f"--pid-file={pidfile}", f"--log-file={p.munge / 'munged.log'}", f"--seed-file={p.munge / 'seed'}"])
        _wait("munged", self.munge_ok, 30)
        self._remember("munged", _read_pid(pidfile))

    def munge_ok(self) -> bool:
        sock = f"--socket={self.paths.munge_socket}"
        try:
            cred = _run(["munge", sock, "-n"], check=False, timeout=10).stdout
            return "Success" in _run(["unmunge", sock], check=False, input=cred, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            return False

    # MariaDB -------------------------------------------------------------------------------------------------
    def _mariadb(self, *args: str, **kw) -> list[str]:
        # --no-defaults: nothing from /etc/mysql; root logs in through the socket (unix_socket authentication).
        return ["mariadb", "--no-defaults", f"--socket={self.paths.mysql_socket}", "-u", "root", *args]

    def _start_mariadb(self) -> None:
        p = self.paths
        data = p.mysql / "data"
        _run(["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=mysql",
              "--auth-root-authentication-method=socket", "--skip-test-db"], timeout=300)
        log = open(p.log / "mariadbd.log", "ab")  # noqa: SIM115 - handed to the daemon
        proc = subprocess.Popen(
            ["mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={p.mysql_socket}",
             f"--port={self.ports['mariadbd']}", "--bind-address=127.0.0.1", f"--pid-file={p.mysql / 'mariadbd.pid'}",
             "--user=mysql", "--skip-name-resolve"],
            stdout=log, stderr=log, start_new_session=True)
        log.close()
        self._remember("mariadbd", proc.pid)
        _wait("MariaDB", lambda: _ok(self._mariadb("-e", "SELECT 1")), 90)
        db = self.db
        users = [f"'{db['user']}'@'{host}'" for host in ("127.0.0.1", "localhost")]
        sql = f"CREATE DATABASE {db['name']}; " + " ".join(
            f"CREATE USER {u} IDENTIFIED BY '{db['password']}'; GRANT ALL ON {db['name']}.* TO {u};" for u in users)
        _run(self._mariadb("-e", sql))

    # Slurm ---------------------------------------------------------------------------------------------------
    def slurmdbd_conf(self) -> str:
        p, db = self.paths, self.db
        return "\n".join([
            "AuthType=auth/munge", f"AuthInfo=socket={p.munge_socket}", "DbdHost=localhost",
            f"DbdPort={self.ports['slurmdbd']}", "SlurmUser=root",
            f"LogFile={p.log}/slurmdbd.log", f"PidFile={p.run}/slurmdbd.pid",
            "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1", f"StoragePort={self.ports['mariadbd']}",
            f"StorageUser={db['user']}", f"StoragePass={db['password']}", f"StorageLoc={db['name']}", ""])

    def slurm_conf(self) -> str:
        p = self.paths
        return "\n".join([
            f"ClusterName={CLUSTER_NAME}", f"SlurmctldHost={self.host}", "SlurmUser=root", "AuthType=auth/munge",
            f"SlurmctldPort={self.ports['slurmctld']}", f"SlurmdPort={self.ports['slurmd']}",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
            "AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=localhost",
            f"AccountingStoragePort={self.ports['slurmdbd']}",
            # Messages to slurmdbd take their munge socket from here, not from AuthInfo (Slurm's slurm.conf(5)).
            f"AccountingStoragePass={p.munge_socket}",
            "JobAcctGatherType=jobacct_gather/none",
            f"StateSaveLocation={p.root}/spool/ctld", f"SlurmdSpoolDir={p.root}/spool/d",
            f"SlurmctldPidFile={p.run}/slurmctld.pid", f"SlurmdPidFile={p.run}/slurmd.pid",
            f"SlurmctldLogFile={p.log}/slurmctld.log", f"SlurmdLogFile={p.log}/slurmd.log",
            f"KillWait={KILL_WAIT_S}", "ReturnToService=2", "MpiDefault=none",
            # A requeued job waits cred_expire seconds (120 by default) before it may start again; the walltime test
            # requeues several times, so keep that short here. socket=: our munged, not the machine's.
            f"AuthInfo=cred_expire={CRED_EXPIRE_S},socket={p.munge_socket}",
            # ... and the scheduler looks for newly eligible jobs every few seconds instead of every minute.
            "SchedulerParameters=sched_interval=5",
            # Requeued and finished jobs leave the controller's memory quickly; sacct keeps them.
            "MinJobAge=60",
            f"NodeName={self.host} CPUs={os.cpu_count()} RealMemory={_mem_mb()} State=UNKNOWN",
            f"PartitionName=debug Nodes={self.host} Default=YES MaxTime=INFINITE State=UP", ""])

    def _start_daemon(self, name: str, cmd: list[str]) -> None:
        pidfile = self.paths.run / f"{name}.pid"
        try:
            _run(cmd, env=self.env(), timeout=60)
        except subprocess.CalledProcessError as e:
            raise RuntimeError(f"Slurm test cluster: {name} did not start ({e.stderr.strip()}); logs are in "
                               f"{self.paths.log}") from e
        _wait(f"{name}'s pid file", lambda: _read_pid(pidfile) is not None, 30)
        self._remember(name, _read_pid(pidfile))

    def _start_slurmdbd(self) -> None:
        p = self.paths
        # sacctmgr reads slurm.conf to find slurmdbd, so it must exist before the first sacctmgr call.
        p.slurm_conf.write_text(self.slurm_conf())
        p.dbd_conf.write_text(self.slurmdbd_conf())
        p.dbd_conf.chmod(0o600)  # slurmdbd refuses a readable one: it holds the database password
        self._start_daemon("slurmdbd", ["slurmdbd"])
        _wait("slurmdbd", lambda: _ok(["sacctmgr", "-n", "show", "cluster"], env=self.env()), 60)
        _run(["sacctmgr", "-i", "add", "cluster", CLUSTER_NAME], env=self.env())

    def _start_slurm(self) -> None:
        for daemon in ("slurmctld", "slurmd"):
            self._start_daemon(daemon, [daemon, "-f", str(self.conf)])
        _wait("the Slurm node", self.node_idle, 90)

    def node_idle(self) -> bool:
        try:
            out = _run(["sinfo", "-h", "-N", "-o", "%T"], check=False, timeout=10, env=self.env()).stdout
        except (OSError, subprocess.TimeoutExpired):
            return False
        states = out.split()
        if any(s.rstrip("*") in ("down", "drained", "draining") for s in states):
            _run(["scontrol", "update", f"nodename={self.host}", "state=resume"], check=False, env=self.env())
        return any(s.rstrip("*") in ("idle", "mixed", "allocated") for s in states)

    # ---- stop -------------------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop what this harness started, newest first, and remove ROOT; anything else on the machine stays."""
        ours = self._load()
        for name in reversed(DAEMONS):
            pid = self.started.pop(name, None)
            if pid is None or not _is_process(pid, name):
                continue
            os.kill(pid, signal.SIGTERM)
            deadline = time.time() + 30
            while _pid_alive(pid) and time.time() < deadline:
                time.sleep(0.2)
            if _pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        if ours:
            shutil.rmtree(self.paths.root)
        elif self.paths.root.exists() and any(self.paths.root.iterdir()):
            raise RuntimeError(f"Slurm test cluster: {self.paths.root} holds files but no {self.paths.record.name}; "
                               "it is not this harness's folder: remove it or set AMDNN_SLURM_DIR to another one")


class SystemSlurm:
    """The machine's own Slurm (AMDNN_TEST_SLURM=system): used as it is configured, never started or stopped."""

    conf = None

    @staticmethod
    def unavailable_reason() -> str | None:
        if not shutil.which("sbatch"):
            return "AMDNN_TEST_SLURM=system, but there is no sbatch in PATH"
        if not _ok(["sinfo", "-h"]):
            return "AMDNN_TEST_SLURM=system, but sinfo gets no answer from this machine's Slurm controller"
        if not _ok(["sacct", "-n", "-X", "-S", "now"]):
            return ("AMDNN_TEST_SLURM=system, but sacct fails (is accounting through slurmdbd configured?): the "
                    "cluster tests read job states with sacct")
        return None

    def start(self) -> "SystemSlurm":
        reason = self.unavailable_reason()
        if reason:
            raise Unavailable(reason)
        return self

    def stop(self) -> None:
        pass


def cluster() -> SlurmCluster | SystemSlurm:
    """The cluster the tests use, by AMDNN_TEST_SLURM."""
    return SystemSlurm() if mode() == "system" else SlurmCluster()


def main(argv: list[str]) -> int:
    action = argv[1] if len(argv) > 1 else "status"
    c = SlurmCluster()
    if action == "start":
        c.start()
        print(f"Slurm test cluster up on {c.host}, ports {c.ports}; use it with\n  export SLURM_CONF={c.conf}")
    elif action == "stop":
        c.stop()
        print(f"stopped what the harness had started and removed {c.paths.root}")
    else:
        print(_run(["sinfo"], check=False, env=c.env()).stdout or "no Slurm answering")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
