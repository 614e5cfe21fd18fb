"""Checks, before a grid is launched, that its MLflow tracking server lets this user in and no one else.

A tracking server started as docs/tracking.md says runs MLflow's basic-auth app: every request needs a user's name
and password. MLflow's client takes them from MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD or from the file
~/.mlflow/credentials:

    [mlflow]
    mlflow_tracking_username = alice
    mlflow_tracking_password = ...

Jobs on a cluster read the same file in the shared home, so the password never appears on a command line, in a job
script or in a job's environment. The file must be readable by its owner only. Checked here for every http(s)
tracking URI of a sweep, before anything is trained or submitted: the file's mode, then one authenticated request
to the server (a refused or unreachable server would otherwise be found by every job, hours later).
"""
from __future__ import annotations

import base64
import json
import stat
import urllib.error
import urllib.request
from pathlib import Path

CREDENTIALS = Path("~/.mlflow/credentials")  # where MLflow's client reads them (mlflow/utils/credentials.py)
PROBE = "/api/2.0/mlflow/experiments/search"  # any authenticated read
TIMEOUT_S = 10.0


def is_server(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def credentials_file() -> Path:
    return CREDENTIALS.expanduser()


def credentials_problem(path: Path | None = None) -> str | None:
    """What is wrong with the credentials file's permissions, or None (also when there is no file)."""
    path = path or credentials_file()
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        return (f"{path} holds a tracking password and can be read by others (mode {stat.filemode(mode)}): "
                f"run `chmod 600 {path}`")
    return None


def _credentials() -> tuple[str | None, str | None]:
    """(user, password) as MLflow's client will send them: the environment first, then the file."""
    from mlflow.utils.credentials import read_mlflow_creds  # MLflow only where a server is checked

    creds = read_mlflow_creds()
    return creds.username, creds.password


def server_problem(uri: str) -> str | None:
    """Why a grid tracking to `uri` would fail (the credentials file, a refusal, no answer), or None."""
    if not is_server(uri):
        return None
    problem = credentials_problem()
    if problem:
        return problem
    user, password = _credentials()
    request = urllib.request.Request(uri.rstrip("/") + PROBE, method="POST", data=json.dumps(
        {"max_results": 1}).encode(), headers={"Content-Type": "application/json"})
    if user and password:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S):
            return None
    except urllib.error.HTTPError as e:
        if e.code in (401, 403):
            who = f"as {user!r}" if user else "without credentials"
            return (f"the tracking server {uri} refused a request {who} (HTTP {e.code}): put your user name and "
                    f"password in {credentials_file()} ([mlflow] mlflow_tracking_username = ..., "
                    f"mlflow_tracking_password = ...; chmod 600), or ask the server's admin for access")
        return f"the tracking server {uri} answered HTTP {e.code} to a search: is it an MLflow server?"
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        return (f"the tracking server {uri} did not answer ({reason}): start it (docs/tracking.md) or fix "
                f"tracking_uri")

