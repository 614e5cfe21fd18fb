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
from functools import partial
from pathlib import Path

import pytest

from orchestrator.tracking.server_access import server_problem
from tests.orchestrator.helpers import PYTHON, REPO, env, side_by_side

pytestmark = pytest.mark.slow  # the module's launches against one server, side by side: ~2 minutes

ADMIN, ADMIN_PASSWORD = "admin", "admin-password-for-the-test-9f3"
USER, PASSWORD = "alice", "alice-password-for-the-test-41c"
CELLS = ["model=lenet300", "train.epochs=1", "train.batch_size=32", "tracking_patience_s=5"]


def _request(uri: str, path: str, body: dict, auth: tuple[str, str] | None) -> int:
    request = urllib.request.Request(uri + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    if auth:
        request.add_header("Authorization", "Basic " + base64.b64encode(":".join(auth).encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # a busy 2-core machine answers late
            return response.status
    except urllib.error.HTTPError as e:
        return e.code


def _answers(uri: str) -> bool:
    """Whether the server answers its health check (no credentials needed) within 10 s."""
    try:
        with urllib.request.urlopen(uri + "/health", timeout=10) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False  # not listening, or not answering, yet


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
                                 "MLFLOW_FLASK_SERVER_SECRET_KEY": os.urandom(16).hex(),
                                 # no job runners: eight more processes importing MLflow, for jobs no test asks of it
                                 "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True, cwd=root)  # its mlartifacts/ there
    uri = f"http://127.0.0.1:{port}"
    try:  # the server stopped however the fixture ends, a failed start included
        deadline = time.time() + 180
        while not _answers(uri):
            assert proc.poll() is None and time.time() < deadline, (root / "server.log").read_text()[-3000:]
            time.sleep(1)
        # Once only: a creation retried after a timeout would find the user made and never answer 200.
        created = _request(uri, "/api/2.0/mlflow/users/create", {"username": USER, "password": PASSWORD},
                           (ADMIN, ADMIN_PASSWORD))
        assert created == 200, (created, (root / "server.log").read_text()[-3000:])
        # The grid's user may create experiments and runs (NO_PERMISSIONS is the default for everyone else's).
        yield uri
    finally:
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


# The module's launches: name -> (the password in its ~/.mlflow/credentials, that file's mode, launch.py's arguments).
LAUNCHES = {"readable": (PASSWORD, 0o644, ("-m", "mult=native,am16")),
            "wrong": ("not-the-password", 0o600, ("mult=native",)),
            "accepted": (PASSWORD, 0o600, ("-m", "mult=native,am16"))}


@pytest.fixture(scope="module")
def launched(server, tmp_path_factory) -> dict[str, tuple[Path, subprocess.CompletedProcess]]:
    """Each of LAUNCHES against the server, all side by side, each in a folder of its own: name -> (folder, result)."""
    roots = {name: tmp_path_factory.mktemp(name) for name in LAUNCHES}
    results = side_by_side(*(partial(_launch, roots[name], _home(roots[name], password, mode), server, *args)
                             for name, (password, mode, args) in LAUNCHES.items()))
    return {name: (roots[name], result) for name, result in zip(LAUNCHES, results)}


def test_a_client_without_credentials_is_refused(server, tmp_path, monkeypatch):
    assert _request(server, "/api/2.0/mlflow/experiments/search", {"max_results": 1}, None) == 401
    assert _request(server, "/api/2.0/mlflow/experiments/search", {"max_results": 1}, (USER, "wrong")) == 401
    assert _request(server, "/api/2.0/mlflow/experiments/search", {"max_results": 1}, (USER, PASSWORD)) == 200
    monkeypatch.setenv("HOME", str(_home(tmp_path, None)))
    for key in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(key, raising=False)
    problem = server_problem(server)
    assert problem and "refused" in problem and "without credentials" in problem and "401" in problem


def test_a_password_file_others_can_read_stops_the_launch(launched):
    """A grid whose ~/.mlflow/credentials others can read is refused (exit 2, the chmod that fixes it) untrained."""
    tmp_path, result = launched["readable"]
    assert result.returncode == 2, result.stderr[-3000:]
    assert "chmod 600" in result.stderr and "sweep refused" in result.stderr
    assert not (tmp_path / "ck").exists()  # nothing trained


def test_a_wrong_password_stops_the_launch(launched):
    """A launch whose password the server refuses stops (exit 2, the user and the HTTP 401 said) untrained."""
    tmp_path, result = launched["wrong"]
    assert result.returncode == 2, result.stderr[-3000:]
    assert "refused a request as 'alice' (HTTP 401)" in result.stderr
    assert not (tmp_path / "ck").exists()


def test_a_grid_with_the_users_credentials_is_accepted(server, launched):
    """A grid of two cells with the user's credentials in a mode-600 file runs (the password printed nowhere), and
    both cells' runs are on the server, FINISHED and trained."""
    _, result = launched["accepted"]
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
