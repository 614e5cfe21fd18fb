"""download(): fetch a dataset's published files on a machine with internet, verify their MD5s, write atomically.

Each file is streamed to a temporary name beside its destination, its MD5 checked, fsynced, then renamed into
place, so an interrupted download never leaves a file with the right name and the wrong contents. Files already
present with the right MD5 are kept. Mirrors are tried in order. Archives (CIFAR-10) are unpacked member by member
in the same atomic way, and the unpacked files' MD5s are checked too. At the end the dataset is loaded once, so a
download that succeeds is a dataset that loads.
"""

import tarfile
import urllib.request
from pathlib import Path

from models.datasets.checksums import md5_of, verify_md5
from models.datasets.errors import ChecksumError, DownloadError
from models.datasets.loading import load
from models.datasets.registry import get_spec
from ops.atomic import replacing

_TIMEOUT_S = 60
_CHUNK = 1 << 20


def write_atomically(dest, chunks, expected_md5=None):
    """Write the byte chunks to `dest` through a temporary file, checking the MD5 before the rename."""
    dest = Path(dest)
    with replacing(dest) as tmp:
        with open(tmp, "xb") as handle:
            for chunk in chunks:
                handle.write(chunk)
        actual = md5_of(tmp) if expected_md5 is not None else None
        if actual != expected_md5:
            raise ChecksumError(dest, expected_md5, actual, "nothing was written")


def _url_chunks(url):
    with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as response:
        yield from iter(lambda: response.read(_CHUNK), b"")


def fetch(file_name, md5, mirrors, folder, log=print):
    """folder/file_name from the first mirror that serves it with MD5 `md5`; kept if already there and verified."""
    dest = Path(folder) / file_name
    if dest.is_file():
        if md5_of(dest) == md5:
            log(f"{dest}: present, MD5 verified")
            return dest
        log(f"{dest}: present but its MD5 is not the published {md5}; downloading it again")
    failures = []
    for base in mirrors:
        url = base + file_name
        log(f"{dest}: downloading {url}")
        try:
            write_atomically(dest, _url_chunks(url), md5)
        except (OSError, ChecksumError) as error:  # URLError and HTTPError are OSErrors
            failures.append(f"{url}: {error}")
            continue
        log(f"{dest}: MD5 verified")
        return dest
    raise DownloadError(f"could not download {file_name} with MD5 {md5} into {folder}:\n  " + "\n  ".join(failures))


def _extract(archive, folder, expected_md5s, log):
    """Unpack the regular files of a tar archive under `folder`, refusing members that would land outside it."""
    folder = Path(folder).resolve()
    with tarfile.open(archive) as tar:
        for member in tar:
            if not member.isfile():
                continue
            dest = (folder / member.name).resolve()
            if folder not in dest.parents:
                raise DownloadError(f"{archive}: member {member.name!r} would be written outside {folder}")
            source = tar.extractfile(member)
            write_atomically(dest, iter(lambda: source.read(_CHUNK), b""), expected_md5s.get(dest.name))
            log(f"{dest}: unpacked{', MD5 verified' if dest.name in expected_md5s else ''}")


def _extracted_ok(spec, folder):
    try:
        for name, md5 in spec.extracted_md5s.items():
            verify_md5(Path(folder) / spec.subdirs[0] / name, md5)
    except (OSError, ChecksumError):
        return False
    return True


def download(name, data_dir, mirrors=None, log=print):
    """Put dataset `name`'s files into data_dir (as load() expects them), verified; returns the folder written.

    mirrors: base URLs to use instead of the dataset's own (e.g. an institutional mirror or a file:// copy).
    """
    spec = get_spec(name)
    if not spec.downloads:
        log(f"{name}: nothing to download (bundled with scikit-learn)")
        return None
    data_dir = Path(data_dir)
    mirrors = tuple(mirrors) if mirrors else spec.mirrors
    if spec.extracted_md5s:
        if _extracted_ok(spec, data_dir):
            log(f"{data_dir / spec.subdirs[0]}: present, MD5s verified")
        else:
            for file_name, md5 in spec.downloads.items():
                _extract(fetch(file_name, md5, mirrors, data_dir, log), data_dir, spec.extracted_md5s, log)
        target = data_dir / spec.subdirs[0]
    else:
        target = data_dir / spec.subdirs[0]
        for file_name, md5 in spec.downloads.items():
            fetch(file_name, md5, mirrors, target, log)
    dataset = load(name, data_dir)
    log(f"{name}: {len(dataset.x_train)} training and {len(dataset.x_test)} test examples in {target}")
    return target
