"""The arXiv bulk source against moto's S3, with a manifest and tars in the real layout; no network.

Bucket `arxiv`: src/arXiv_src_manifest.xml lists five tars; the config (2303..2304, max_tars 2) selects the
first two, which are the only ones uploaded, so touching any other fails the test:

    src/arXiv_src_2303_001.tar  2303/2303.00001.gz  gzipped tar: main.tex + \\input{sections/method} + a letter
                                2303/2303.00002.gz  a single gzipped .tex
                                2303/2303.00003.gz  corrupt gzip                     -> corrupt_gzip
    src/arXiv_src_2304_001.tar  2304/2304.00004.gz  tar with ../../evil.tex          -> unsafe_member_name
                                2304/2304.00005.pdf PDF-only submission              -> pdf_only
                                2304/2304.00006.gz  \\input of /etc/passwd, ../outside, missing: refused/unresolved
                                2304/2304.00008.gz  3 MiB of zeros, cap 1 MiB       -> too_large
"""
from __future__ import annotations

import gzip
import hashlib
import io
import posixpath
import tarfile
from datetime import datetime, timezone

import pytest

boto3 = pytest.importorskip("boto3")
moto = pytest.importorskip("moto")

from curation.sources import arxiv  # noqa: E402
from curation.sources.arxiv import Quarantine  # noqa: E402

MAIN_TEX = rb"""\documentclass{article}
\usepackage{amsmath}
\title{Streaming Example Papers\\ in Memory}
% a preamble comment
\begin{document}
\maketitle
\begin{abstract}
The abstract comes before the first section and is dropped, as in RedPajama.
\end{abstract}
\section{Introduction}
We keep 50\% of the text. % this comment goes
% this whole line goes
\input{sections/method}
A line break then a comment: a\\% gone
\bibliographystyle{plain}
\bibliography{refs}
\end{document}
"""
METHOD_TEX = b"\\section{Method}\nThe method streams tars. % inline note\n"
LETTER_TEX = b"\\documentclass{letter}\nA reply to the referees, without a document body.\n"
SINGLE_TEX = rb"""\documentclass[aps]{revtex4}
\begin{document}
\title{A Single File}
\section*{Results}
Caf\'e results hold. A single file longer than one 512-byte tar block must not be taken for a tar, so this
paragraph goes on for a while: the bulk tars hold many single-file submissions, most of them longer than this,
and each must reach the cleaner as TeX rather than fail as a corrupt archive.
One more sentence makes it long enough to matter.
\begin{thebibliography}{9}
\bibitem{x} Someone, 2001.
\end{thebibliography}
\end{document}
"""
INPUTS_TEX = rb"""\documentclass{article}
\begin{document}
\section{Inputs}
Before.
\input{/etc/passwd}
\input{../outside}
\input{missing}
\include{chap}
After.
\end{document}
"""
CFG = {"kind": "arxiv", "path": "s3://arxiv/src/", "yymm_from": "2303", "yymm_to": "2304", "max_tars": 2,
       "requester_pays": True, "max_decompressed_bytes": 1 << 20}


def gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)  # set verbatim: tarfile does not check names when writing
            info.size, info.mtime = len(data), 0
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def manifest(entries: list[tuple[str, str, str]]) -> bytes:
    """The real manifest's shape: <arXivSRC><file>...</file></arXivSRC>, one <file> per tar."""
    files = "".join(
        f"<file><content_md5sum>{md5}</content_md5sum><filename>src/arXiv_src_{yymm}_{seq}.tar</filename>"
        f"<first_item>{yymm}.00001</first_item><last_item>{yymm}.09999</last_item><md5sum>{md5}</md5sum>"
        f"<num_items>4</num_items><seq_num>{int(seq)}</seq_num><size>1024</size>"
        f"<timestamp>2023-05-02 00:00:00</timestamp><yymm>{yymm}</yymm></file>\n"
        for yymm, seq, md5 in entries)
    return f"<?xml version='1.0' standalone='yes'?>\n<arXivSRC>\n{files}</arXivSRC>\n".encode()


TAR_2303 = tar({
    "2303/2303.00001.gz": gz(tar({"main.tex": MAIN_TEX, "sections/method.tex": METHOD_TEX,
                                  "response.tex": LETTER_TEX, "figs/plot.png": b"\x89PNG\r\n\x1a\n" + bytes(64)})),
    "2303/2303.00002.gz": gz(SINGLE_TEX),
    "2303/2303.00003.gz": b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03this is not deflate data",
})
TAR_2304 = tar({
    "2304/2304.00004.gz": gz(tar({"main.tex": INPUTS_TEX, "../../evil.tex": b"\\section{x} pwned"})),
    "2304/2304.00005.pdf": b"%PDF-1.5\n%%EOF\n",
    "2304/2304.00006.gz": gz(tar({"paper.tex": INPUTS_TEX, "chap.tex": b"Chapter text.\n"})),
    "2304/2304.00008.gz": gz(bytes(3 << 20)),
})


def md5(b: bytes) -> str:
    return hashlib.md5(b).hexdigest()


# Every test here runs with the network refused (tests/curation/sources/conftest.py).
pytestmark = pytest.mark.usefixtures("no_network")


@pytest.fixture
def s3(monkeypatch):
    """A moto S3 holding the bucket; yields a client that records (operation, RequestPayer) for every call."""
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                 "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}.items():
        monkeypatch.setenv(k, v)
    with moto.mock_aws():
        setup = boto3.client("s3", region_name="us-east-1")
        setup.create_bucket(Bucket="arxiv")
        setup.put_object(Bucket="arxiv", Key="src/arXiv_src_manifest.xml", Body=manifest([
            ("9912", "001", "0" * 32),  # sorts after 2304 as a string, before 2303 in time: not selected
            ("2303", "001", md5(TAR_2303)), ("2304", "001", md5(TAR_2304)),
            ("2304", "002", "1" * 32),  # in range, cut by max_tars
            ("2305", "001", "2" * 32)]))
        setup.put_object(Bucket="arxiv", Key="src/arXiv_src_2303_001.tar", Body=TAR_2303)
        setup.put_object(Bucket="arxiv", Key="src/arXiv_src_2304_001.tar", Body=TAR_2304)
        client = boto3.client("s3", region_name="us-east-1")
        client.calls = []
        client.meta.events.register(
            "before-parameter-build.s3.*",
            lambda params, model, **_: client.calls.append((model.name, params.get("Key"), params.get("RequestPayer"))))
        yield client


def run(s3, **overrides):
    return {d["id"]: d for d in arxiv.iter_documents({**CFG, **overrides}, s3=s3)}


def reasons(docs):
    return {k: d["meta"]["quarantine"]["reason"] for k, d in docs.items() if "quarantine" in d["meta"]}


def test_reads_selected_tars_with_request_payer_on_every_call(s3):
    docs = run(s3)
    assert s3.calls == [("GetObject", "src/arXiv_src_manifest.xml", "requester"),
                        ("GetObject", "src/arXiv_src_2303_001.tar", "requester"),
                        ("GetObject", "src/arXiv_src_2304_001.tar", "requester")]
    assert sorted(docs) == ["arxiv:2303.00001", "arxiv:2303.00002", "arxiv:2303.00003", "arxiv:2304.00004",
                            "arxiv:2304.00005", "arxiv:2304.00006", "arxiv:2304.00008"]
    assert reasons(docs) == {"arxiv:2303.00003": "corrupt_gzip", "arxiv:2304.00004": "unsafe_member_name",
                             "arxiv:2304.00005": "pdf_only", "arxiv:2304.00008": "too_large"}


def test_paper_tar_main_file_inputs_and_redpajama_cleaning(s3):
    doc = run(s3)["arxiv:2303.00001"]
    assert doc["text"] == ("\\section{Introduction}\n"
                           "We keep 50\\% of the text.\n"
                           "\\section{Method}\n"
                           "The method streams tars.\n"
                           "A line break then a comment: a\\\\")
    assert doc["title"] == "Streaming Example Papers in Memory"
    assert doc["created_at"] == datetime(2023, 3, 1, tzinfo=timezone.utc)
    assert doc["url"] == "https://arxiv.org/abs/2303.00001" and doc["source"] == "arxiv"
    assert doc["meta"]["main_file"] == "main.tex"  # not response.tex: it has no \begin{document}
    assert doc["meta"]["inputs"] == ["sections/method.tex"]
    assert doc["meta"]["tar"] == "arXiv_src_2303_001.tar" and doc["meta"]["created_at_precision"] == "month"


def test_single_gzipped_tex(s3):
    doc = run(s3)["arxiv:2303.00002"]
    assert doc["text"].startswith("\\section*{Results}\nCaf\\'e results hold. A single file")
    assert doc["text"].endswith("One more sentence makes it long enough to matter.") and len(SINGLE_TEX) > 512
    assert doc["title"] == "A Single File"


def test_quarantined_items_carry_stage_reason_detail_and_no_text(s3):
    docs = run(s3)
    bad = docs["arxiv:2303.00003"]
    assert bad["text"] == "" and bad["meta"]["quarantine"]["stage"] == "source.arxiv"
    assert bad["meta"]["quarantine"]["detail"]  # zlib's message
    assert docs["arxiv:2304.00004"]["meta"]["quarantine"]["detail"] == "../../evil.tex"
    assert "1048576" in docs["arxiv:2304.00008"]["meta"]["quarantine"]["detail"]


def test_inputs_are_resolved_only_from_the_member_map(s3):
    doc = run(s3)["arxiv:2304.00006"]
    assert doc["meta"]["refused_inputs"] == ["/etc/passwd", "../outside"]
    assert doc["meta"]["unresolved_inputs"] == ["missing"]
    assert doc["meta"]["inputs"] == ["chap.tex"]
    assert doc["text"] == "\\section{Inputs}\nBefore.\n\nChapter text.\nAfter."  # refused lines leave no text


def test_snapshot_records_manifest_and_selected_tars(s3):
    snap = arxiv.snapshot(CFG, s3=s3)
    manifest_body = s3.get_object(Bucket="arxiv", Key="src/arXiv_src_manifest.xml", RequestPayer="requester")
    assert snap["manifest"]["md5"] == md5(manifest_body["Body"].read())
    assert snap["manifest"]["etag"] == manifest_body["ETag"].strip('"')
    assert [t["filename"] for t in snap["tars"]] == ["src/arXiv_src_2303_001.tar", "src/arXiv_src_2304_001.tar"]
    assert snap["tars"][0]["md5sum"] == md5(TAR_2303) and snap["tars"][0]["seq_num"] == 1


def test_md5_mismatch_is_reported_and_default_client_is_used(s3):
    setup = boto3.client("s3", region_name="us-east-1")
    setup.put_object(Bucket="arxiv", Key="src/arXiv_src_manifest.xml",
                     Body=manifest([("2303", "001", "f" * 32)]))
    docs = {d["id"]: d for d in arxiv.iter_documents({**CFG, "max_tars": None})}  # boto3 client made inside
    assert docs["arxiv:tar:arXiv_src_2303_001.tar"]["meta"]["quarantine"]["reason"] == "tar_md5_mismatch"
    assert "arxiv:2303.00001" in docs  # papers already yielded stay; the mismatch is counted beside them


def test_shards_one_per_tar_without_rereading_the_manifest(s3):
    shards = arxiv.shards(CFG, s3=s3)
    assert [sh["tar"]["filename"] for sh in shards] == ["src/arXiv_src_2303_001.tar", "src/arXiv_src_2304_001.tar"]
    s3.calls.clear()
    ids = [d["id"] for d in arxiv.iter_documents(shards[1], s3=s3)]
    assert ids == ["arxiv:2304.00004", "arxiv:2304.00005", "arxiv:2304.00006", "arxiv:2304.00008"]
    assert s3.calls == [("GetObject", "src/arXiv_src_2304_001.tar", "requester")]


def test_max_papers_and_no_requester_pays(s3):
    docs = list(arxiv.iter_documents({**CFG, "max_papers": 2, "requester_pays": False}, s3=s3))
    assert [d["id"] for d in docs] == ["arxiv:2303.00001", "arxiv:2303.00002"]
    assert all(payer is None for _, _, payer in s3.calls)


# ---- the pieces, without S3 ----

def test_strip_comments():
    assert arxiv.strip_comments("50\\% kept % gone\n% whole line\nnext") == "50\\% kept\nnext"
    assert arxiv.strip_comments("a\\\\% gone\nb\\\\\\% kept") == "a\\\\\nb\\\\\\% kept"
    assert arxiv.strip_comments("trailing backslash \\") == "trailing backslash \\"


def test_clean_tex_cuts():
    tex = "\\begin{document}\nintro\n\\chapter{One}\ntext\n\\printbibliography\nrefs"
    assert arxiv.clean_tex(tex) == "\\chapter{One}\ntext"
    assert arxiv.clean_tex("no sections here") == ""
    tex = "\\section{A}\n\\subsection{B} x\n\\begin{thebibliography}{1}"
    assert arxiv.clean_tex(tex) == "\\section{A}\n\\subsection{B} x"


def test_main_file_choice_and_cycles():
    files = {"a.tex": "\\documentclass{article}\n\\input{b}", "b.tex": "\\input{a}\nB",
             "c.tex": "\\documentclass{x}\n\\begin{document}\\input{b}\\end{document}"}
    assert arxiv.main_file(files) == "c.tex"
    report = {"inputs": [], "unresolved_inputs": [], "refused_inputs": []}
    out = arxiv.resolve_inputs("a.tex", files, report)
    assert out == "\\documentclass{article}\n\nB" and report["unresolved_inputs"] == ["a"]
    with pytest.raises(Quarantine, match="no_main_tex"):
        arxiv.main_file({"x.tex": "% \\documentclass{article}\nplain"})
    # \includegraphics is not \include
    assert arxiv.resolve_inputs("m", {"m": "\\includegraphics{fig}"}, report) == "\\includegraphics{fig}"


def test_ids_dates_and_yymm_order():
    assert arxiv.arxiv_id("2303/2303.01234.gz") == "2303.01234"
    assert arxiv.arxiv_id("0001/hep-th0001001.gz") == "hep-th/0001001"
    assert arxiv.arxiv_id("0704/0704.0001v2.pdf") == "0704.0001"
    assert arxiv.arxiv_id("2303/README.txt") is None
    assert arxiv.created_from_id("hep-th/9108001") == datetime(1991, 8, 1, tzinfo=timezone.utc)
    assert arxiv.yymm_key("9912") < arxiv.yymm_key("0001") < arxiv.yymm_key("2303")
    entries = [{"filename": f"src/arXiv_src_{y}_001.tar"} for y in ("0002", "9912", "0001")]
    assert [e["yymm"] for e in arxiv.select_tars(entries, {"yymm_from": 9912, "yymm_to": 1})] == ["9912", "0001"]
    entries = [{"filename": f"src/arXiv_src_{y}_{n:03d}.tar"} for y in ("2301", "2302") for n in (3, 1, 2)]
    picked = arxiv.select_tars(entries, {"tars_per_month": 2, "max_tars": 3})
    assert [posixpath.basename(e["filename"]) for e in picked] == [
        "arXiv_src_2301_001.tar", "arXiv_src_2301_002.tar", "arXiv_src_2302_001.tar"]


def test_gunzip_caps_and_framing():
    assert arxiv.gunzip_capped(gz(b"ab") + gz(b"cd"), 10) == b"abcd"  # concatenated members
    with pytest.raises(Quarantine, match="corrupt_gzip: truncated"):
        arxiv.gunzip_capped(gz(b"x" * 1000)[:-12], 10_000)
    with pytest.raises(Quarantine, match="too_large"):
        arxiv.gunzip_capped(gz(bytes(5000)), 4999)
    assert arxiv.gunzip_capped(gz(bytes(5000)), 5000) == bytes(5000)


def test_unsafe_names():
    assert arxiv._safe_name("./a/b.tex") == "a/b.tex"
    for bad in ("/etc/passwd", "a/../../b", "..", "C:/x", "a\\..\\b", ""):
        assert arxiv._safe_name(bad) is None
