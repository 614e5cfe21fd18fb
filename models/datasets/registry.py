"""DATASETS, the one list of datasets: where each one's files live, their published MD5s, and how to read them.

A dataset's files are looked for in data_dir/<subdir> for each of its `subdirs`, then in its `system_dirs`
(Debian's dataset-fashion-mnist package installs into /usr/share/datasets/fashion-mnist). Loading checks the files'
structure (IDX magic numbers and sizes, gzip integrity, CIFAR pickle keys and shapes, label ranges); downloading
checks the published MD5s (system copies may be recompressed, so their MD5s differ while their contents do not).
"""

import dataclasses
from pathlib import Path

from models.datasets import augment, cifar, digits, idx


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    name: str
    num_classes: int
    input_shape: tuple  # (h, w, c)
    loader: object  # loader(spec, data_dir) -> Dataset
    files: dict = dataclasses.field(default_factory=dict)  # role -> file name, the names the loader reads
    subdirs: tuple = ()  # folders under data_dir holding `files`, the first is where download writes
    system_dirs: tuple = ()  # absolute folders searched after data_dir
    downloads: dict = dataclasses.field(default_factory=dict)  # file name -> MD5, what download() fetches
    mirrors: tuple = ()  # base URLs, tried in order; a file's URL is base + file name
    extracted_md5s: dict = dataclasses.field(default_factory=dict)  # for archives: member file name -> MD5
    augmentation: object = None  # augmentation(x, rng) -> x for batches(augment=True), None if none is usual
    other_source: str = ""  # another way to get the files, for error messages

    def get_command(self, data_dir):
        """The command that puts this dataset's files into `data_dir`."""
        command = f"python -m models.download --dataset {self.name} --data-dir {data_dir}"
        return f"{command} (on a machine with internet){'; or ' + self.other_source if self.other_source else ''}"

    def search_dirs(self, data_dir):
        """The folders the loader looks in, in order."""
        return [Path(data_dir) / sub for sub in self.subdirs] + [Path(d) for d in self.system_dirs]


_IDX_FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}

DATASETS = {
    # scikit-learn's bundled 8x8 digits: no files, no download; the default that works anywhere.
    "digits": DatasetSpec(name="digits", num_classes=10, input_shape=(8, 8, 1), loader=digits.load),
    "mnist": DatasetSpec(
        name="mnist", num_classes=10, input_shape=(28, 28, 1), loader=idx.load, files=_IDX_FILES,
        subdirs=("mnist",),
        downloads={
            "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
            "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
            "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
            "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
        },
        # yann.lecun.com often refuses downloads now; torchvision's mirror comes first.
        mirrors=("https://ossci-datasets.s3.amazonaws.com/mnist/",
                 "https://storage.googleapis.com/cvdf-datasets/mnist/",
                 "http://yann.lecun.com/exdb/mnist/"),
    ),
    "fashion_mnist": DatasetSpec(
        name="fashion_mnist", num_classes=10, input_shape=(28, 28, 1), loader=idx.load, files=_IDX_FILES,
        subdirs=("fashion_mnist", "fashion-mnist"),
        system_dirs=("/usr/share/datasets/fashion-mnist",),
        downloads={
            "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
            "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
            "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
            "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
        },
        mirrors=("https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
                 "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"),
        other_source="apt-get install dataset-fashion-mnist (Debian/Ubuntu; installs into "
                     "/usr/share/datasets/fashion-mnist, which is searched)",
    ),
    "cifar10": DatasetSpec(
        name="cifar10", num_classes=10, input_shape=(32, 32, 3), loader=cifar.load,
        files={**{f"train_{i}": f"data_batch_{i}" for i in range(1, 6)}, "test": "test_batch"},
        subdirs=(cifar.FOLDER,),
        downloads={"cifar-10-python.tar.gz": "c58f30108f718f92721af3b95e74349a"},
        mirrors=("https://www.cs.toronto.edu/~kriz/",),
        extracted_md5s={
            "data_batch_1": "c99cafc152244af753f735de768cd75f",
            "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
            "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
            "data_batch_4": "634d18415352ddfa80567beed471001a",
            "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
            "test_batch": "40351d587109b95175f43aff81a1287e",
            "batches.meta": "5ff9c542aee3614f3951f8cda6e48888",
        },
        augmentation=augment.pad_crop_flip,
    ),
}


def get_spec(name):
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; valid datasets: {', '.join(DATASETS)}")
    return DATASETS[name]
