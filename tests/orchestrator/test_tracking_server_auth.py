"""A tracking server that lets no one else in (docs/tracking.md): a real `mlflow server --app-name basic-auth` on
localhost. A client without credentials is refused; a password file others can read, or a wrong password, stops a
launch before anything trains; a grid whose user keeps the password in ~/.mlflow/credentials (mode 600) is accepted
and its cells' runs land on the server, the password on no command line."""
from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from orchestrator.tracking.server_access import server_problem
from tests.orchestrator.helpers import PYTHON, REPO, env

ADMIN, ADMIN_PASSWORD = "admin", "admin-password-for-the-test-9f3"
USER, PASSWORD = "alice", "alice-password-for-the-test-41c"
CELLS = ["model=lenet300", "train.epochs=1", "train.batch_size=32", "tracking_patience_s=5"]


def _request(uri: str, path: str, body: dict, auth: tuple[str, str] | None) -> int:
    request = urllib.request.Request(uri + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    if auth:
        request.add_header("Authorization", "Basic " + base64.b64encode(":".join(auth).encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code
    except urllib.error.URLError:
        return 0  # not listening (yet)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("server")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (root / "auth.ini").write_text(
        "[mlflow]\ndefault_permission = NO_PERMISSIONS\n"
        f"database_uri = sqlite:///{root / 'users.db'}\nadmin_username = {ADMIN}\nadmin_password = {ADMIN_PASSWORD}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n")
    log = open(root / "server.log", "w")
    proc = subprocess.Popen([str(Path(PYTHON).with_name("mlflow")), "server", "--app-name", "basic-auth",
                             "--backend-store-uri", f"sqlite:///{root / 'store.db'}", "--host", "127.0.0.1",
                             "--port", str(port), "--workers", "1"],
                            env={**env(), "MLFLOW_AUTH_CONFIG_PATH": str(root / "auth.ini"),
                                 "MLFLOW_FLASK_SERVER_SECRET_KEY": os.urandom(16).hex()}, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True, cwd=root)  # its mlartifacts/ there
    uri = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while _request(uri, "/api/2.0/mlflow/users/create", {"username": USER, "password": PASSWORD},
                   (ADMIN, ADMIN_PASSWORD)) != 200:
        assert proc.poll() is None and time.time() < deadline, (root / "server.log").read_text()[-3000:]
        time.sleep(1)
    # The grid's user may create experiments and runs (NO_PERMISSIONS is the default for everyone else's).
    yield uri
    os.killpg(proc.pid, 15)
    proc.wait(timeout=30)


def _home(tmp_path: Path, password: str | None, mode: int = 0o600) -> Path:
    home = tmp_path / "home"
    (home / ".mlflow").mkdir(parents=True)
    if password is not None:
        path = home / ".mlflow" / "credentials"
        path.write_text(f"[mlflow]\nmlflow_tracking_username = {USER}\nmlflow_tracking_password = {password}\n")
        path.chmod(mode)
    return home


def _environment(home: Path) -> dict:
    e = {k: v for k, v in env().items() if not k.startswith("MLFLOW_TRACKING_")}
    # The ops' build cache stays where the suite built it (its default lies under HOME).
    e.setdefault("AMDNN_OPS_CACHE", str(Path.home() / ".cache" / "amdnn" / "ops"))
    return {**e, "HOME": str(home)}


def _launch(tmp_path: Path, home: Path, uri: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, str(REPO / "launch.py"), *args, *CELLS, f"checkpoint_root={tmp_path / 'ck'}",
                           f"tracking_uri={uri}"], cwd=tmp_path, env=_environment(home), capture_output=True,
                          text=True, timeout=900)


def test_a_client_without_credentials_is_refused(server, tmp_path, monkeypatch):
    assert _request(server, "/api/2.0/mlflow/experiments/search", {"max_results": 1}, None) == 401
    assert _request(server, "/api/2.0/mlflow/experiments/search", {"max_results": 1}, (USER, "wrong")) == 401
    assert _request(server, "/api/2.0/mlflow/experiments/search", {"max_results": 1}, (USER, PASSWORD)) == 200
    monkeypatch.setenv("HOME", str(_home(tmp_path, None)))
    for key in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(key, raising=False)
    problem = server_problem(server)
    assert problem and "refused" in problem and "without credentials" in problem and "401" in problem


def test_a_password_file_others_can_read_stops_the_launch(server, tmp_path):
    result = _launch(tmp_path, _home(tmp_path, PASSWORD, mode=0o644), server, "-m", "mult=native,am16")
    assert result.returncode == 2, result.stderr[-3000:]
    assert "chmod 600" in result.stderr and "sweep refused" in result.stderr
    assert not (tmp_path / "ck").exists()  # nothing trained


def test_a_wrong_password_stops_the_launch(server, tmp_path):
    result = _launch(tmp_path, _home(tmp_path, "not-the-password"), server, "mult=native")
    assert result.returncode == 2, result.stderr[-3000:]
    assert "refused a request as 'alice' (HTTP 401)" in result.stderr
    assert not (tmp_path / "ck").exists()


def test_a_grid_with_the_users_credentials_is_accepted(server, tmp_path):
    home = _home(tmp_path, PASSWORD)
    result = _launch(tmp_path, home, server, "-m", "mult=native,am16")
    assert result.returncode == 0, result.stderr[-3000:]
    assert PASSWORD not in result.stdout + result.stderr
    # The runs are on the server, readable with the user's credentials: both cells finished and trained.
    from mlflow import MlflowClient

    os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"] = USER, PASSWORD
    try:
        client = MlflowClient(server)
        runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])
                if "amdnn.cell" in r.data.tags]
    finally:
        del os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"]
    assert sorted(r.data.tags["amdnn.mult"] for r in runs) == ["am16", "native"]
    assert all(r.info.status == "FINISHED" and r.data.metrics["test_accuracy"] > 0.5 for r in runs)
