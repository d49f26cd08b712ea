"""Label Studio round trip with Label Studio itself (``pytest -m integrations``, run by
``scripts/integrations_env.sh``): its server started on loopback with its default SQLite in a
folder of the test's own, mispair's tasks and config imported through its API (Label Studio
validates every task's data against the config), two annotators' answers posted, the project
exported as JSON and imported into mispair. The server lives in an environment of its own
(its pins conflict with the lock): ``MISPAIR_LABEL_STUDIO`` names its ``label-studio``."""

import json
import os
import signal
import socket
import subprocess
import time

import pytest

from mispair.audit.apply import read_decisions
from mispair.cli import main
from mispair.estimate.labels import read_labels
from tests.exchange.audit_folder import audit_id, exchange_audit

pytestmark = [pytest.mark.integrations, pytest.mark.slow]
REQUIRED = os.environ.get("MISPAIR_REQUIRE_INTEGRATIONS") == "1"
TOKEN = "0123456789abcdef0123456789abcdef01234567"
requests = pytest.importorskip("requests") if not REQUIRED else __import__("requests")
sdk = pytest.importorskip("label_studio_sdk") if not REQUIRED else __import__("label_studio_sdk")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The URL of a Label Studio started for these tests (stopped after them)."""
    executable = os.environ.get("MISPAIR_LABEL_STUDIO", "")
    if not os.path.isfile(executable):
        if REQUIRED:
            raise FileNotFoundError(f"MISPAIR_LABEL_STUDIO={executable!r}: no label-studio there")
        pytest.skip("no Label Studio server (MISPAIR_LABEL_STUDIO; scripts/integrations_env.sh)")
    data, port = tmp_path_factory.mktemp("label-studio"), free_port()
    env = {**os.environ, "HOME": str(data), "LABEL_STUDIO_BASE_DATA_DIR": str(data)}
    command = [executable, "start", "--no-browser", "--internal-host", "127.0.0.1", "-p", str(port)]
    command += ["--data-dir", str(data), "--username", "ann@example.org", "--password", "not-a-secret-1"]
    command += ["--user-token", TOKEN, "--enable-legacy-api-token"]
    with (data / "server.log").open("wb") as log:
        process = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(url, process, data / "server.log")
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)


def _wait(url, process, log, seconds=300):
    """Until the server answers (its first start migrates its database: a minute or two)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"label-studio stopped: {log.read_text()[-2000:]}")
        try:
            if requests.get(f"{url}/health", timeout=5).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(2)
    raise TimeoutError(f"label-studio did not answer in {seconds} s")


# (place in the tasks, Ann's answer, Bob's answer); None: no annotation
ANSWERS = [
    (0, ("correct", ""), ("correct", "")),
    (1, ("mismatched", "a grey bar under a tree"), ("mismatched", "")),
    (2, ("mismatched", ""), ("correct", "")),
    (3, ("unsure", ""), ("mismatched", "")),
    (4, ("mismatched", ""), ("mismatched", "")),
    (5, ("correct", ""), None),
]


def result(label, caption):
    regions = [
        {"from_name": "judgement", "to_name": "caption", "type": "choices", "value": {"choices": [label]}}
    ]
    if caption:
        regions.append(
            {
                "from_name": "corrected_caption",
                "to_name": "caption",
                "type": "textarea",
                "value": {"text": [caption]},
            }
        )
    return regions


def test_tasks_annotations_and_the_export_round_trip(server, tmp_path, capsys):
    audit = exchange_audit(tmp_path, pairs=40, images=16)
    assert (
        main(["export", str(audit), "--to", "label-studio", "--sample", "6", "--out", str(tmp_path / "ls")])
        == 0
    )
    studio = sdk.LabelStudio(base_url=server, api_key=TOKEN)
    bob = studio.users.create(email="bob@example.org", username="bob")
    config = (tmp_path / "ls" / "config.xml").read_text()
    project = studio.projects.create(title="mispair round trip", label_config=config)
    tasks = json.loads((tmp_path / "ls" / "tasks.json").read_text())
    imported = studio.projects.import_tasks(id=project.id, request=tasks)
    assert imported.task_count == 6
    stored = sorted(studio.tasks.list(project=project.id), key=lambda t: t.id)
    ids = [t.data["pair_id"] for t in stored]
    assert ids == [t["data"]["pair_id"] for t in tasks]
    for place, ann, bobs in ANSWERS:
        if ann:
            studio.annotations.create(id=stored[place].id, result=result(*ann))
        if bobs:
            studio.annotations.create(id=stored[place].id, result=result(*bobs), completed_by=bob.id)
    exported = requests.get(
        f"{server}/api/projects/{project.id}/export?exportType=JSON",
        headers={"Authorization": f"Token {TOKEN}"},
        timeout=120,
    )
    exported.raise_for_status()
    path = tmp_path / "export.json"
    path.write_bytes(exported.content)
    labels, decisions = tmp_path / "labels.csv", tmp_path / "decisions.csv"
    argv = ["import", str(audit), "--from", "label-studio", str(path), "--out", str(labels)]
    assert main([*argv, "--decisions", str(decisions)]) == 0
    out = capsys.readouterr().out
    read = read_labels(labels, audit=audit_id(audit))
    assert dict(zip(read["pair_id"], read["label"])) == {
        ids[0]: "correct",
        ids[1]: "mismatched",
        ids[2]: "unsure",
        ids[3]: "unsure",
        ids[4]: "mismatched",
        ids[5]: "correct",
    }
    got = read_decisions(decisions, audit_id(audit))
    assert {p: (d, c) for p, d, c in got.itertuples(index=False)} == {
        ids[0]: ("keep", ""),
        ids[1]: ("replace", "a grey bar under a tree"),
        ids[4]: ("drop", ""),
        ids[5]: ("keep", ""),
    }
    assert "2 pair(s) judged differently" in out and "Cohen's kappa user 1 / user 2" in out
