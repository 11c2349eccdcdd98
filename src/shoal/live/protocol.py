"""One message layout for both legs of the live view: run → viewer (a local socket) and
viewer → page (a binary WebSocket message).

A message is a JSON header followed by arrays, laid out so that the page reads each array as a
typed view of the message without copying (JavaScript's typed arrays need aligned offsets)::

    bytes 0-3   header length H, unsigned 32-bit little-endian (a multiple of 8 minus 4)
    bytes 4..   the header, UTF-8 JSON, padded with spaces
    then        each array's bytes, little-endian, every one starting at a multiple of 8

The header holds ``"type"``, the message's own fields and ``"arrays"``: one
``{"name", "dtype", "shape", "offset"}`` per array, ``offset`` counted from the message's
first byte. Only three dtypes travel: ``f4`` (float32: every physical value), ``i4``
(int32: ids, owners) and ``u1`` (uint8: flags). Nothing in a message is ever evaluated.

On the socket between a run and its viewer each message is preceded by its length (8 bytes,
unsigned little-endian), so either side reads whole messages.

Message types (the fields each carries are documented in ``docs/reference/view.md``):
``hello``, ``frame``, ``loads``, ``placement`` and ``end`` from a run; ``stop`` to a run.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct

import numpy as np

from ..errors import ShoalError

#: The dtypes a message may carry, by their code in the header.
DTYPES = {"f4": np.dtype("<f4"), "i4": np.dtype("<i4"), "u1": np.dtype("u1")}
#: The largest message either side accepts (a frame is meant to stay near 2 MB).
MAX_MESSAGE_BYTES = 64 * 2**20
_ALIGN = 8


def _code(a: np.ndarray) -> str:
    kind = a.dtype.kind
    if kind == "f":
        return "f4"
    if kind == "b" or a.dtype == np.uint8:
        return "u1"
    if kind in "iu":
        return "i4"
    raise ShoalError(f"live view: cannot send an array of dtype {a.dtype}")


def encode(kind: str, fields: dict | None = None, arrays: dict[str, np.ndarray] | None = None) -> bytes:
    """Lay out one message.

    Parameters
    ----------
    kind : str
        The message type (``"frame"``, ``"loads"``, ...).
    fields : dict, optional
        JSON-serialisable fields of the header; non-finite floats are sent as ``null``.
    arrays : dict of str to ndarray, optional
        Arrays to carry, converted to float32, int32 or uint8 by their kind.

    Returns
    -------
    bytes
        The message (without the socket's length prefix).
    """
    arrays = arrays or {}
    converted = {name: np.asarray(a, dtype=DTYPES[_code(np.asarray(a))]) for name, a in arrays.items()}
    specs, offset = [], 0
    for name, a in converted.items():
        specs.append({"name": name, "dtype": _code(a), "shape": list(a.shape), "offset": offset, "nbytes": a.nbytes})
        offset += -(-a.nbytes // _ALIGN) * _ALIGN
    header = {"type": kind, **_finite(fields or {}), "arrays": specs}
    # Offsets are relative to the arrays' start until the header's length is known; the header
    # grows as they are made absolute, so pad for the widest offset first.
    base = _header_size(header, offset)
    for spec in specs:
        spec["offset"] += base
    text = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
    text += b" " * (base - 4 - len(text))
    out = bytearray(base + offset)
    out[:4] = struct.pack("<I", base - 4)
    out[4:base] = text
    for spec, a in zip(specs, converted.values(), strict=True):
        out[spec["offset"]:spec["offset"] + a.nbytes] = a.tobytes()
    return bytes(out)


def _header_size(header: dict, payload: int) -> int:
    """Bytes of length field and padded header, leaving room for absolute offsets."""
    widest = dict(header, arrays=[dict(s, offset=s["offset"] + 10**12) for s in header["arrays"]])
    n = 4 + len(json.dumps(widest, separators=(",", ":"), allow_nan=False).encode())
    return -(-n // _ALIGN) * _ALIGN


def _finite(obj):
    """``obj`` with NaN and infinities replaced by ``None`` (JSON has no such numbers)."""
    if isinstance(obj, float):
        return obj if np.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, np.generic):
        return _finite(obj.item())
    return obj


def decode(data: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """Read a message :func:`encode` laid out: its header and its arrays (read-only views).

    Raises
    ------
    ShoalError
        When ``data`` is not such a message (truncated, bad JSON, an unknown dtype, an array
        outside the message).
    """
    if len(data) < 4:
        raise ShoalError("live view: a message shorter than its length field")
    (n,) = struct.unpack_from("<I", data)
    if 4 + n > len(data):
        raise ShoalError(f"live view: a header of {n} bytes in a message of {len(data)}")
    try:
        header = json.loads(bytes(data[4:4 + n]))
        specs = header["arrays"]
        kind = header["type"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ShoalError(f"live view: not a message ({exc})") from None
    if not isinstance(kind, str):
        raise ShoalError("live view: a message's type must be a string")
    arrays = {}
    for spec in specs:
        try:
            dtype = DTYPES[spec["dtype"]]
            shape = tuple(int(s) for s in spec["shape"])
            start = int(spec["offset"])
        except (KeyError, TypeError, ValueError):
            raise ShoalError(f"live view: a bad array entry {spec!r}") from None
        count = int(np.prod(shape, dtype=np.int64))
        if start < 4 + n or start + count * dtype.itemsize > len(data) or min(shape, default=1) < 0:
            raise ShoalError(f"live view: array {spec.get('name')!r} lies outside its message")
        arrays[str(spec["name"])] = np.frombuffer(data, dtype=dtype, count=count, offset=start).reshape(shape)
    return header, arrays


# ----- the socket between a run and its viewer ------------------------------------------------------
def send(sock: socket.socket, message: bytes) -> None:
    """Write one ``message`` with its length prefix into ``sock`` (blocks until the socket
    takes it all)."""
    sock.sendall(struct.pack("<Q", len(message)))
    sock.sendall(message)


def receive(sock: socket.socket) -> bytes | None:
    """Read one message written by :func:`send`; ``None`` when the peer closed the socket."""
    head = _read_exactly(sock, 8)
    if head is None:
        return None
    (n,) = struct.unpack("<Q", head)
    if n > MAX_MESSAGE_BYTES:
        raise ShoalError(f"live view: a message of {n} bytes (at most {MAX_MESSAGE_BYTES})")
    body = _read_exactly(sock, n)
    if body is None:
        raise ShoalError("live view: the peer closed the socket inside a message")
    return body


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            if got == 0:
                return None
            raise ShoalError(f"live view: the peer closed the socket after {got} of {n} bytes")
        got += k
    return bytes(buf)


async def read(reader: asyncio.StreamReader) -> bytes | None:
    """The asyncio side of :func:`receive`: one message, or ``None`` at end of stream."""
    try:
        head = await reader.readexactly(8)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise ShoalError("live view: the peer closed the socket inside a length field") from None
        return None
    (n,) = struct.unpack("<Q", head)
    if n > MAX_MESSAGE_BYTES:
        raise ShoalError(f"live view: a message of {n} bytes (at most {MAX_MESSAGE_BYTES})")
    try:
        return await reader.readexactly(n)
    except asyncio.IncompleteReadError:
        raise ShoalError("live view: the peer closed the socket inside a message") from None


async def write(writer: asyncio.StreamWriter, message: bytes) -> None:
    """The asyncio side of :func:`send`: ``message`` into ``writer``."""
    writer.write(struct.pack("<Q", len(message)))
    writer.write(message)
    await writer.drain()
