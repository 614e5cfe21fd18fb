"""Downloads without internet: MD5 verification of local files, fetching from file:// mirrors, atomic writes, the
CLI. A file:// mirror goes through the same urllib path as an https one."""

import dataclasses
import io
import pickle
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from models import download as download_cli
from models.datasets import DATASETS, ChecksumError, DownloadError, download, load, md5_of, verify_md5

MNIST_MD5 = DATASETS["mnist"].downloads
REPO = Path(__file__).resolve().parents[2]


def _quiet(*_):
    pass


def test_mnist_files_have_the_published_md5s(mnist_dir):
    for name, md5 in MNIST_MD5.items():
        verify_md5(mnist_dir / name, md5)


def test_checksum_mismatch_is_detected(tmp_path, mnist_dir):
    damaged = tmp_path / "t10k-labels-idx1-ubyte.gz"
    data = bytearray((mnist_dir / "t10k-labels-idx1-ubyte.gz").read_bytes())
    data[100] ^= 1
    damaged.write_bytes(bytes(data))
    with pytest.raises(ChecksumError) as error:
        verify_md5(damaged, MNIST_MD5["t10k-labels-idx1-ubyte.gz"])
    assert str(damaged) in str(error.value) and "expected ec29112dd5afa0611ce80d1b7f02629c" in str(error.value)
    assert error.value.actual == md5_of(damaged) != error.value.expected


def test_download_from_a_mirror_verifies_and_loads(tmp_path, mnist_dir):
    data_dir = tmp_path / "data"
    target = download("mnist", data_dir, mirrors=[mnist_dir.as_uri() + "/"], log=_quiet)
    assert target == data_dir / "mnist"
    assert sorted(p.name for p in target.iterdir()) == sorted(MNIST_MD5)  # no temporary files left
    for name, md5 in MNIST_MD5.items():
        assert md5_of(target / name) == md5
    assert len(load("mnist", data_dir).y_test) == 10000
    # A second run keeps the verified files and fetches nothing (the mirror is gone).
    lines = []
    download("mnist", data_dir, mirrors=[(tmp_path / "gone").as_uri() + "/"], log=lines.append)
    assert sum("present, MD5 verified" in line for line in lines) == 4


@pytest.fixture
def bad_mirror(tmp_path, mnist_dir):
    """A mirror serving the real MNIST files except for a damaged t10k-labels."""
    mirror = tmp_path / "bad-mirror"
    mirror.mkdir()
    for name in MNIST_MD5:
        (mirror / name).symlink_to(mnist_dir / name)
    data = bytearray((mnist_dir / "t10k-labels-idx1-ubyte.gz").read_bytes())
    data[200] ^= 1
    (mirror / "t10k-labels-idx1-ubyte.gz").unlink()
    (mirror / "t10k-labels-idx1-ubyte.gz").write_bytes(bytes(data))
    return mirror


def test_bad_file_on_a_mirror_is_rejected_and_never_written(tmp_path, bad_mirror):
    data_dir = tmp_path / "data"
    with pytest.raises(DownloadError) as error:
        download("mnist", data_dir, mirrors=[bad_mirror.as_uri() + "/"], log=_quiet)
    message = str(error.value)
    assert "t10k-labels-idx1-ubyte.gz" in message and "expected ec29112dd5afa0611ce80d1b7f02629c" in message
    # The three good files were kept; of the bad one neither the file nor a temporary is left.
    good = sorted(set(MNIST_MD5) - {"t10k-labels-idx1-ubyte.gz"})
    assert sorted(p.name for p in (data_dir / "mnist").iterdir()) == good


def test_next_mirror_is_tried_and_a_corrupt_local_file_replaced(tmp_path, bad_mirror, mnist_dir):
    data_dir = tmp_path / "data"
    (data_dir / "mnist").mkdir(parents=True)
    (data_dir / "mnist" / "train-labels-idx1-ubyte.gz").write_bytes(b"not the labels")
    download("mnist", data_dir, mirrors=[bad_mirror.as_uri() + "/", mnist_dir.as_uri() + "/"], log=_quiet)
    for name, md5 in MNIST_MD5.items():
        assert md5_of(data_dir / "mnist" / name) == md5


def _cifar_archive(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _batch_bytes(n, first_label):
    rng = np.random.default_rng(first_label)
    data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
    return pickle.dumps({b"data": data, b"labels": [(first_label + i) % 10 for i in range(n)]})


def test_cifar_archive_is_unpacked_and_its_members_verified(tmp_path, monkeypatch):
    batches = {f"data_batch_{b}": _batch_bytes(3, b) for b in range(1, 6)}
    batches["test_batch"] = _batch_bytes(2, 0)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    archive = mirror / "cifar-10-python.tar.gz"
    _cifar_archive(archive, {f"cifar-10-batches-py/{name}": data for name, data in batches.items()})
    member_md5s = {}
    for name, data in batches.items():
        (tmp_path / name).write_bytes(data)
        member_md5s[name] = md5_of(tmp_path / name)
    spec = dataclasses.replace(DATASETS["cifar10"], downloads={archive.name: md5_of(archive)},
                               extracted_md5s=member_md5s)
    monkeypatch.setitem(DATASETS, "cifar10", spec)
    data_dir = tmp_path / "data"
    assert download("cifar10", data_dir, mirrors=[mirror.as_uri() + "/"], log=_quiet) == \
        data_dir / "cifar-10-batches-py"
    data = load("cifar10", data_dir)
    assert data.x_train.shape == (15, 32, 32, 3) and data.y_test.tolist() == [0, 1]

    monkeypatch.setitem(DATASETS, "cifar10", dataclasses.replace(spec, extracted_md5s={**member_md5s,
                                                                                       "test_batch": "0" * 32}))
    (data_dir / archive.name).unlink()
    with pytest.raises(ChecksumError, match="test_batch: MD5 .* expected 00000000"):
        download("cifar10", tmp_path / "data2", mirrors=[mirror.as_uri() + "/"], log=_quiet)


def test_archive_members_outside_the_folder_are_refused(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    archive = mirror / "cifar-10-python.tar.gz"
    _cifar_archive(archive, {"../escaped": b"x"})
    monkeypatch.setitem(DATASETS, "cifar10", dataclasses.replace(DATASETS["cifar10"],
                                                                 downloads={archive.name: md5_of(archive)}))
    with pytest.raises(DownloadError, match="would be written outside"):
        download("cifar10", tmp_path / "data", mirrors=[mirror.as_uri() + "/"], log=_quiet)
    assert not (tmp_path / "escaped").exists()


def test_cli_downloads_and_reports_errors(tmp_path, mnist_dir, bad_mirror, capsys):
    assert download_cli.main(["--dataset", "mnist", "--data-dir", str(tmp_path / "ok"),
                              "--mirror", mnist_dir.as_uri() + "/"]) == 0
    assert "mnist: 60000 training and 10000 test examples" in capsys.readouterr().out
    assert download_cli.main(["--dataset", "mnist", "--data-dir", str(tmp_path / "bad"),
                              "--mirror", bad_mirror.as_uri() + "/"]) == 1
    assert "error: could not download t10k-labels-idx1-ubyte.gz" in capsys.readouterr().err
    assert download_cli.main(["--dataset", "digits", "--data-dir", str(tmp_path)]) == 0


def test_cli_lists_datasets_and_does_not_import_tensorflow():
    result = subprocess.run([sys.executable, "-c", "import sys; from models import download; "
                             "download.parse_args(['--help'])"], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert "--dataset {digits,mnist,fashion_mnist,cifar10}" in result.stdout
    check = subprocess.run([sys.executable, "-c", "import sys, models.download; "
                            "print('tensorflow' in sys.modules, 'keras' in sys.modules)"],
                           capture_output=True, text=True, timeout=60, cwd=REPO)
    assert check.stdout.strip() == "False False", check.stderr
