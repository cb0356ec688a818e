"""A month of arXiv source tars through build-benchmark's workers-write path, with the driver's memory sampled.

`python -m bench.scale_bench --job arxiv --sizes 2000,20000` (sizes count papers): a moto S3 server on 127.0.0.1
holds bucket `arxiv` laid out as arXiv's bulk data (src/arXiv_src_manifest.xml, src/arXiv_src_YYMM_NNN.tar), two
months (2302: members, 2303: non-members) of tars of `PAPERS_PER_TAR` papers each; a paper is a gzipped .tex
with a preamble, an abstract, three sections of SOTU prose (passages no other paper has) and a bibliography, so
RedPajama's cleaning has work to do. A real month is ~20k papers in ~50 tars of ~500 MB; the generated tars are
smaller (text only) but as many papers per month at the largest size. The job runs as a subprocess with the
arxiv config, pointed at the server with source.endpoint_url.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import os
import socket
import tarfile
from pathlib import Path

from bench.wikidump import prose_passages

PAPERS_PER_TAR = 500


def paper_tex(title: str, paras: list[str]) -> bytes:
    body = "\n\n".join(f"\\section{{Part {k}}}\n{p} % a comment the cleaner drops" for k, p in enumerate(paras))
    return (f"\\documentclass{{article}}\n\\title{{{title}}}\n\\begin{{document}}\n\\maketitle\n"
            f"\\begin{{abstract}}An abstract.\\end{{abstract}}\n{body}\n"
            f"\\begin{{thebibliography}}{{9}}\\bibitem{{x}} Someone, 2001.\\end{{thebibliography}}\n"
            f"\\end{{document}}\n").encode()


def month_tars(yymm: str, papers: int, passages: list[str], first: int):
    """(tar name, bytes) for `papers` papers of month yymm, PAPERS_PER_TAR per tar; passage k of the corpus goes to
    one paper only (passages wrap around past the corpus, which the dedup step then sees as copies)."""
    for seq, start in enumerate(range(0, papers, PAPERS_PER_TAR), 1):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
            for k in range(start, min(papers, start + PAPERS_PER_TAR)):
                paras = [passages[(first + 3 * k + j) % len(passages)] for j in range(3)]
                data = gzip.compress(paper_tex(f"Paper {yymm}.{k + 1:05d}", paras), mtime=0)
                info = tarfile.TarInfo(f"{yymm}/{yymm}.{k + 1:05d}.gz")
                info.size, info.mtime = len(data), 0
                tf.addfile(info, io.BytesIO(data))
        yield f"arXiv_src_{yymm}_{seq:03d}.tar", buf.getvalue()


def manifest(entries: list[tuple[str, str, bytes]]) -> bytes:
    files = "".join(
        f"<file><content_md5sum>{hashlib.md5(b).hexdigest()}</content_md5sum><filename>src/{name}</filename>"
        f"<md5sum>{hashlib.md5(b).hexdigest()}</md5sum><num_items>{PAPERS_PER_TAR}</num_items>"
        f"<seq_num>{int(name[-7:-4])}</seq_num><size>{len(b)}</size><yymm>{yymm}</yymm></file>\n"
        for yymm, name, b in entries)
    return f"<?xml version='1.0' standalone='yes'?>\n<arXivSRC>\n{files}</arXivSRC>\n".encode()


def main_bench(args) -> int:
    import boto3
    from moto.server import ThreadedMotoServer

    from bench.scale_jobs import ROOT, log, run_job, write_job_runs

    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # the server's per-request lines
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    os.environ.pop("AWS_PROFILE", None)
    work = Path(args.work or Path(args.out) / "_scale_arxiv_work")
    passages = prose_passages(120)
    runs: dict = {}
    try:
        for n in [int(x) for x in args.sizes.split(",") if x]:
            s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
            bucket = f"arxiv-{n}"
            s3.create_bucket(Bucket=bucket)
            entries = []
            for yymm, first in (("2302", 0), ("2303", 3 * n // 2)):
                for name, data in month_tars(yymm, n // 2, passages, first):
                    s3.put_object(Bucket=bucket, Key=f"src/{name}", Body=data)
                    entries.append((yymm, name, data))
            s3.put_object(Bucket=bucket, Key="src/arXiv_src_manifest.xml", Body=manifest(entries))
            tars = len(entries)
            log(f"{n} papers in {tars} tars ({sum(len(e[2]) for e in entries) / 1e6:.0f} MB) on {endpoint}; "
                "build-benchmark ...")
            out = work / f"out-{n}"
            res = run_job(["build-benchmark", "--config", str(ROOT / "jobs" / "configs" / "arxiv.yaml"),
                           "--set", f"source.path=s3://{bucket}/src/", "--set", f"source.endpoint_url={endpoint}",
                           "--set", "source.yymm_from=2302", "--set", "source.yymm_to=2303",
                           "--set", f"source.tars_per_month={tars}", "--out", str(out)], out, "manifest.json",
                          quiet=False)
            res.update(papers=n, tars=tars, rows_per_s=round(n / res["wall_s"], 1))
            runs[n] = res
            log(f"  {res['wall_s']} s ({res['rows_per_s']} papers/s), driver peak {res['driver_peak_mb']} MB, "
                f"workers {res['workers_peak_mb']} MB")
    finally:
        server.stop()
    return write_job_runs(args, work, "arxiv", runs, "paper", "arXiv papers (two months of tars)",
                          "tidemark build-benchmark (arxiv config) as a subprocess on two months of generated "
                          f"arXiv source tars ({PAPERS_PER_TAR} gzipped .tex papers each, SOTU prose) served by a "
                          "moto S3 server on 127.0.0.1 (source.endpoint_url); 2302 members, 2303 non-members")
