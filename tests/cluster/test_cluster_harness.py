"""The test Slurm's harness (slurm_cluster.py) keeps to its own folder and ports; no scheduler is started here."""
from __future__ import annotations

import re
import socket

from tests.cluster import slurm_cluster


def test_free_ports_skip_ports_in_use():
    (port,) = slurm_cluster.free_ports(1, start=24000)
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", port))
        taken.listen()
        found = slurm_cluster.free_ports(3, start=port)
    assert port not in found and len(set(found)) == 3 and all(p > port for p in found)


def test_configuration_names_only_its_own_folder_and_ports(tmp_path):
    cluster = slurm_cluster.SlurmCluster(tmp_path / "slurm")
    cluster.ports = {"slurmctld": 20001, "slurmd": 20002, "slurmdbd": 20003, "mariadbd": 20004}
    cluster.db = {"name": "db", "user": "amdnn_x", "password": "secret"}
    slurm, dbd = cluster.slurm_conf(), cluster.slurmdbd_conf()
    paths = re.findall(r"=(/[^\s,]+)", slurm + dbd)
    assert paths and all(p.startswith(str(tmp_path / "slurm")) for p in paths), paths
    assert {"SlurmctldPort=20001", "SlurmdPort=20002", "AccountingStoragePort=20003"} <= set(slurm.splitlines())
    assert {"DbdPort=20003", "StoragePort=20004", "StorageHost=127.0.0.1"} <= set(dbd.splitlines())
    # Clients and daemons reach our munged, not the machine's.
    socket_path = str(cluster.paths.munge_socket)
    assert f"AccountingStoragePass={socket_path}" in slurm and f"socket={socket_path}" in slurm
    assert cluster.conf == tmp_path / "slurm/etc/slurm.conf" and cluster.env()["SLURM_CONF"] == str(cluster.conf)
