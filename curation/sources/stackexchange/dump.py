"""Reading a Stack Exchange dump as a stream of <row> attributes: a plain Posts.xml (local or s3://) or a per-site
.7z, decompressed through a bounded queue from py7zr's writer callback (nothing extracted to disk; an s3:// .7z is
first copied to a temporary file because 7z needs to seek). The Source is curation/sources/stackexchange/source.py."""
from __future__ import annotations

import contextlib
import io
import posixpath
import queue
import threading
from typing import Any, BinaryIO, Iterator

from curation.io import storage


def iter_post_rows(stream: BinaryIO) -> Iterator[dict[str, str]]:
    """The attributes of every <row>, in file order, freeing each element once read (constant memory)."""
    from lxml import etree

    # Untrusted input: no DTD loading, no entity expansion, no network; huge_tree for very long bodies.
    events = etree.iterparse(stream, events=("end",), tag="row", huge_tree=True, resolve_entities=False,
                             load_dtd=False, no_network=True)
    for _, elem in events:
        yield dict(elem.attrib)
        elem.clear(keep_tail=True)
        parent = elem.getparent()
        if parent is not None:
            while elem.getprevious() is not None:
                del parent[0]


class _Cancelled(Exception):
    pass


class _ChunkQueueReader(io.RawIOBase):
    """The reading end of the 7z stream: chunks arrive from the extraction thread through a bounded queue."""

    def __init__(self, chunks: "queue.Queue[object]"):
        self._chunks = chunks
        self._view = memoryview(b"")
        self._eof = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._view and not self._eof:
            item = self._chunks.get()
            if item is None:
                self._eof = True
            elif isinstance(item, BaseException):
                raise item
            else:
                self._view = memoryview(item)
        n = min(len(buffer), len(self._view))
        buffer[:n] = self._view[:n]
        self._view = self._view[n:]
        return n


@contextlib.contextmanager
def _seven_zip_stream(archive: str) -> Iterator[BinaryIO]:
    """Posts.xml inside a .7z as a readable stream. py7zr pushes decompressed chunks (~1 MB) into a writer; a
    thread runs the extraction and a queue of 8 chunks bounds what is held in memory."""
    import py7zr
    from py7zr.io import Py7zIO, WriterFactory

    chunks: queue.Queue[object] = queue.Queue(maxsize=8)
    stop = threading.Event()

    class _Writer(Py7zIO):
        def __init__(self) -> None:
            self._size = 0

        def write(self, s) -> int:
            data = bytes(s)
            while True:  # put with a timeout so that a closed reader can cancel a blocked extraction
                if stop.is_set():
                    raise _Cancelled()
                try:
                    chunks.put(data, timeout=0.2)
                    break
                except queue.Full:
                    continue
            self._size += len(data)
            return len(data)

        def read(self, size=None) -> bytes:
            return b""

        def seek(self, offset, whence=0) -> int:
            return 0

        def flush(self) -> None:
            pass

        def size(self) -> int:
            return self._size

    class _Factory(WriterFactory):
        def create(self, filename: str) -> Py7zIO:
            return _Writer()

    def extract() -> None:
        try:
            with py7zr.SevenZipFile(archive, "r") as z:
                members = [n for n in z.getnames() if posixpath.basename(n).lower() == "posts.xml"]
                if not members:
                    raise FileNotFoundError(f"{archive} holds no Posts.xml")
                z.extract(targets=[members[0]], factory=_Factory())
            _put_final(None)
        except _Cancelled:
            pass
        except BaseException as exc:  # noqa: BLE001 - handed to the reader, which raises it
            _put_final(exc)

    def _put_final(item: object) -> None:
        while not stop.is_set():
            try:
                chunks.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    worker = threading.Thread(target=extract, name="7z-posts", daemon=True)
    worker.start()
    try:
        with io.BufferedReader(_ChunkQueueReader(chunks), buffer_size=1 << 16) as reader:
            yield reader
    finally:
        stop.set()
        worker.join()


@contextlib.contextmanager
def open_posts(path: str, **opts: Any) -> Iterator[BinaryIO]:
    """A binary stream of the Posts.xml that `path` names (an .xml file or a .7z), local or s3://."""
    if path.lower().endswith(".7z"):
        with storage.local_path(path, **opts) as local, _seven_zip_stream(local) as stream:
            yield stream
    else:
        with storage.open_binary(path, **opts) as stream:
            yield stream
