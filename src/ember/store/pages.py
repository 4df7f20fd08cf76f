"""Reading a damaged SQLite file page by page, without SQLite (pure; ``ember doctor``).

SQLite reads a table through its b-tree, from the root down. One damaged interior page hides
every intact leaf below it; a damaged first page (the header, the schema) hides the whole file;
a damaged WAL frame hides every commit after it, because recovery stops at the first frame
whose checksum fails. The rows are often still there, on intact pages. This module reads them
the way the file format documents them (https://www.sqlite.org/fileformat2.html):
- ``read_wal``: the WAL's frames, split into the *verified* ones (the checksum chain SQLite's
  own recovery accepts, up to the last commit) and the *tail* after a break — every committed
  version of each page in frames of the same WAL generation (their salts match) that no
  checksum can vouch for any more (the newest may be the damaged one: older ones still hold
  the rows of their commit);
- ``leaf_rows``: the rows of a table b-tree leaf page (records decoded, overflow followed);
- ``guess_page_size`` and ``fresh_header``: a header to put back over a garbage one.

Nothing here decides what a row is worth: ``rescue.py`` matches rows to tables and counts.
Every decoder is bounded by the bytes it is given and raises ``Malformed`` on anything that
does not parse — never an ``IndexError`` or an endless overflow chain.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

MAGIC = b"SQLite format 3\x00"
HEADER_BYTES = 100
_WAL_MAGIC = {0x377F0682: "<", 0x377F0683: ">"}
_WAL_HEADER = 32
_FRAME_HEADER = 24
#: b-tree page types (the first byte of a page's header)
TABLE_LEAF = 13
TABLE_INTERIOR = 5
_PAGE_TYPES = (2, 5, 10, 13)

Value = None | int | float | str | bytes


class Malformed(ValueError):
    """Bytes that are not what the file format says they should be."""


# -- the header -------------------------------------------------------------------------------


def page_size_of(header: bytes) -> int | None:
    """The page size a database header declares, or None when it is not a valid header."""
    if len(header) < HEADER_BYTES or not header.startswith(MAGIC):
        return None
    raw = int.from_bytes(header[16:18], "big")
    size = 65536 if raw == 1 else raw
    if size < 512 or size & (size - 1):
        return None
    if header[21:24] != b"\x40\x20\x20":  # payload fractions: fixed by the format
        return None
    return size


def guess_page_size(data: bytes) -> int:
    """The page size under which most pages of ``data`` start like a b-tree page (a header
    lost to garbage no longer says); 4096, SQLite's default, when nothing stands out."""
    best, best_score = 4096, 0
    for size in (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536):
        pages = len(data) // size
        if pages < 2:
            continue
        score = sum(_looks_like_page(data[i * size : (i + 1) * size]) for i in range(1, pages))
        if score * 4096 > best_score * size:  # per byte: small sizes see more pages
            best, best_score = size, score
    return best


def _looks_like_page(page: bytes) -> bool:
    if not page or page[0] not in _PAGE_TYPES:
        return False
    cells = int.from_bytes(page[3:5], "big")
    content = int.from_bytes(page[5:7], "big") or 65536
    return 0 < cells < len(page) // 4 and 8 <= content <= len(page)


def fresh_header(page_size: int, pages: int, *, wal: bool) -> bytes:
    """A valid 100-byte header for a file of ``pages`` pages: what the format fixes, UTF-8,
    no freelist (free pages are then just unreferenced, which reading does not mind), and
    the in-header size valid. ``wal``: the file is read together with its WAL."""
    version = 2 if wal else 1
    h = bytearray(HEADER_BYTES)
    h[0:16] = MAGIC
    h[16:18] = (1 if page_size == 65536 else page_size).to_bytes(2, "big")
    h[18], h[19] = version, version
    h[21:24] = b"\x40\x20\x20"
    h[24:28] = (1).to_bytes(4, "big")  # change counter
    h[28:32] = pages.to_bytes(4, "big")
    h[40:44] = (1).to_bytes(4, "big")  # schema cookie
    h[44:48] = (4).to_bytes(4, "big")  # schema format
    h[56:60] = (1).to_bytes(4, "big")  # UTF-8
    h[92:96] = (1).to_bytes(4, "big")  # version-valid-for = change counter
    h[96:100] = (3_045_000).to_bytes(4, "big")
    return bytes(h)


# -- the WAL ----------------------------------------------------------------------------------


@dataclass
class WalScan:
    """What a WAL holds. ``verified``: page images SQLite's recovery applies (the latest of
    each page up to the last valid commit). ``tail``: every image of each page (oldest
    first) in the frames after a break, up to the last commit frame of the same generation —
    written by commits, but no checksum can vouch for them any more."""

    page_size: int = 0
    frames: int = 0
    #: index (0-based) of the first frame recovery rejects; None: every frame is valid
    broken_at: int | None = None
    verified: dict[int, bytes] = field(default_factory=dict)
    tail: dict[int, list[bytes]] = field(default_factory=dict)
    #: why commits of this WAL cannot all be read (None: nothing of them is lost)
    damage: str | None = None
    #: the WAL ends inside a frame (the last write was torn: a power loss)
    torn: bool = False
    #: frames after the break that belong to this WAL's commits, or are garbage
    unverifiable: int = 0


def read_wal(data: bytes) -> WalScan:
    """Split a WAL into verified frames and the unverifiable tail; an empty scan when the WAL
    header itself is not valid (SQLite then ignores the whole WAL).

    Frames after the last valid one are normal when they belong to an earlier generation of
    the WAL (a checkpoint restarts it from the top, with the first salt one higher): those
    are stale, not damage. Damage is a frame of *this* generation that fails its checksum,
    frames of this generation after the break, frames of neither (garbage), or a WAL that
    ends inside a frame (torn)."""
    if len(data) < _WAL_HEADER:
        return WalScan()
    magic, _version, page_size, _seq, salt1, salt2, c1, c2 = struct.unpack(">8I", data[:32])
    order = _WAL_MAGIC.get(magic)
    if order is None or page_size < 512 or page_size & (page_size - 1):
        return WalScan()
    if _checksum(data[:24], 0, 0, order) != (c1, c2):
        return WalScan()
    scan = WalScan(page_size=page_size)
    step = _FRAME_HEADER + page_size
    scan.frames, partial = divmod(len(data) - _WAL_HEADER, step)
    s0, s1 = c1, c2
    pending: dict[int, bytes] = {}
    tail_pending: list[tuple[int, bytes]] = []
    ours_after = garbage = 0
    for i in range(scan.frames):
        at = _WAL_HEADER + i * step
        head = data[at : at + _FRAME_HEADER]
        page = data[at + _FRAME_HEADER : at + step]
        pgno, commit, fs1, fs2, f1, f2 = struct.unpack(">6I", head)
        ours = (fs1, fs2) == (salt1, salt2) and pgno > 0
        if scan.broken_at is None:
            got = _checksum(head[:8] + page, s0, s1, order)
            if ours and got == (f1, f2):
                s0, s1 = got
                pending[pgno] = page
                if commit:
                    scan.verified.update(pending)
                    pending = {}
                continue
            scan.broken_at = i
            if ours:
                ours_after += 1  # this generation's frame, with a bad checksum: damage
                continue  # its page holds the start of the damage: never read
        if ours:
            ours_after += 1
            tail_pending.append((pgno, page))
            if commit:
                for number, image in tail_pending:
                    scan.tail.setdefault(number, []).append(image)
                tail_pending = []
        elif not 0 < (salt1 - fs1) & 0xFFFFFFFF <= 1024:
            garbage += 1  # neither this generation nor a recent earlier one
    scan.torn = partial > 0
    scan.unverifiable = ours_after + garbage
    scan.damage = _wal_damage(scan, ours_after, garbage, partial)
    return scan


def _wal_damage(scan: WalScan, ours_after: int, garbage: int, partial: int) -> str | None:
    if not ours_after and not garbage:
        if partial:
            return f"the WAL ends inside frame {scan.frames + 1} (a torn write)"
        return None  # only stale frames of an earlier generation after the last commit
    return (
        f"frame {(scan.broken_at or 0) + 1} of {scan.frames} fails its checksum; "
        f"{ours_after} later frames of this WAL and {garbage} unreadable ones cannot be "
        "verified"
    )


def _checksum(data: bytes, s0: int, s1: int, order: str) -> tuple[int, int]:
    """The WAL's running checksum over ``data`` (a multiple of 8 bytes)."""
    words = struct.unpack(f"{order}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


# -- b-tree pages and records -----------------------------------------------------------------

Fetch = Callable[[int], bytes | None]


@dataclass(frozen=True)
class LeafRow:
    rowid: int
    values: tuple[Value, ...]


def page_type(page: bytes, pgno: int) -> int | None:
    at = HEADER_BYTES if pgno == 1 else 0
    return page[at] if len(page) > at else None


def leaf_rows(page: bytes, pgno: int, fetch: Fetch) -> list[LeafRow]:
    """Every row of a table leaf page; raises ``Malformed`` unless every cell decodes (a page
    partly overwritten is rejected whole: half a page of garbage can decode as plausible
    rows). ``fetch`` returns another page by number (overflow chains)."""
    at = HEADER_BYTES if pgno == 1 else 0
    if page_type(page, pgno) != TABLE_LEAF:
        raise Malformed("not a table leaf page")
    usable = len(page)
    count = int.from_bytes(page[at + 3 : at + 5], "big")
    if count > usable // 4:
        raise Malformed("more cells than the page can hold")
    rows = []
    for i in range(count):
        ptr = at + 8 + 2 * i
        offset = int.from_bytes(page[ptr : ptr + 2], "big")
        if not at + 8 + 2 * count <= offset < usable:
            raise Malformed("a cell pointer outside the page")
        rows.append(_leaf_cell(page, offset, usable, fetch))
    return rows


def _leaf_cell(page: bytes, offset: int, usable: int, fetch: Fetch) -> LeafRow:
    size, offset = varint(page, offset)
    rowid, offset = varint(page, offset)
    if rowid >= 1 << 63:
        rowid -= 1 << 64
    local = _local_bytes(size, usable)
    if offset + local > len(page):
        raise Malformed("a cell runs past the page")
    payload = page[offset : offset + local]
    if local < size:
        if offset + local + 4 > len(page):
            raise Malformed("an overflow pointer past the page")
        first = int.from_bytes(page[offset + local : offset + local + 4], "big")
        payload += _overflow(first, size - local, usable, fetch)
    return LeafRow(rowid, record(payload))


def _local_bytes(size: int, usable: int) -> int:
    """How much of a table leaf cell's payload is on the page (the format's formula)."""
    most = usable - 35
    if size <= most:
        return size
    least = ((usable - 12) * 32 // 255) - 23
    k = least + (size - least) % (usable - 4)
    return k if k <= most else least


def _overflow(first: int, need: int, usable: int, fetch: Fetch) -> bytes:
    out = bytearray()
    seen: set[int] = set()
    page_no = first
    while need > 0:
        if page_no == 0 or page_no in seen:
            raise Malformed("an overflow chain that ends early or loops")
        seen.add(page_no)
        page = fetch(page_no)
        if page is None or len(page) < 4:
            raise Malformed(f"overflow page {page_no} is missing")
        take = min(need, usable - 4)
        out += page[4 : 4 + take]
        need -= take
        page_no = int.from_bytes(page[0:4], "big")
    return bytes(out)


def varint(data: bytes, offset: int) -> tuple[int, int]:
    """SQLite's big-endian varint at ``offset``: (value, offset after it)."""
    value = 0
    for i in range(9):
        if offset + i >= len(data):
            raise Malformed("a varint runs past the data")
        byte = data[offset + i]
        if i == 8:
            return (value << 8) | byte, offset + 9
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, offset + i + 1
    raise AssertionError("unreachable")  # pragma: no cover


_INT_BYTES = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8}


def record(payload: bytes) -> tuple[Value, ...]:
    """The values of a record (header of serial types, then the body)."""
    header_size, at = varint(payload, 0)
    if not at <= header_size <= len(payload):
        raise Malformed("a record header larger than its record")
    types = []
    while at < header_size:
        serial, at = varint(payload, at)
        types.append(serial)
    if at != header_size:
        raise Malformed("a record header that overruns itself")
    values: list[Value] = []
    body = header_size
    for serial in types:
        value, body = _value(payload, body, serial)
        values.append(value)
    if body != len(payload):
        raise Malformed("a record body that does not fill its payload")
    return tuple(values)


def _value(payload: bytes, at: int, serial: int) -> tuple[Value, int]:
    if serial == 0:
        return None, at
    if serial in _INT_BYTES:
        n = _INT_BYTES[serial]
        if at + n > len(payload):
            raise Malformed("an integer past the record")
        return int.from_bytes(payload[at : at + n], "big", signed=True), at + n
    if serial == 7:
        if at + 8 > len(payload):
            raise Malformed("a float past the record")
        return struct.unpack(">d", payload[at : at + 8])[0], at + 8
    if serial in (8, 9):
        return serial - 8, at
    if serial in (10, 11):
        raise Malformed("a reserved serial type")
    n = (serial - 12) // 2
    if at + n > len(payload):
        raise Malformed("a string or blob past the record")
    raw = payload[at : at + n]
    if serial % 2 == 0:
        return bytes(raw), at + n
    try:
        return raw.decode("utf-8"), at + n
    except UnicodeDecodeError as exc:
        raise Malformed("text that is not UTF-8") from exc
