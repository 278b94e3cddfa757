"""Bloom filters that are safe to persist and safe to trust.

A snapshot is verified (both checksums, every field) before it is used, and answers every
key exactly as the Rust reader, the `bloom` CLI and the C ABI answer it. "maybe" is not
"yes": confirm a `True` against your primary store before treating a key as seen.
"""

import os
from typing import Any, Iterable, Literal, Optional, Union, final

from typing_extensions import Buffer

Key = Union[str, bytes]
"""A key: `str` (encoded by the filter's encoding, NFC by default) or `bytes` (which a text
encoding takes as UTF-8, refusing other bytes with `KeyEncodingError`)."""

Source = Union[str, os.PathLike, bytes, bytearray]
"""A snapshot: a path, or its bytes."""

DEFAULT_MAX_BYTES: int
"""The largest payload read unless told otherwise: 1 GiB."""

__version__: str

@final
class BloomFilter:
    """A Bloom filter: plain, counting or scalable.

    Safe to share between threads: queries run side by side, and each insert has the filter
    to itself. The many-key forms (`insert_all`, `contains_all`, `insert_packed`,
    `contains_packed`) and all file work release the GIL. `insert_packed` holds the filter
    for its whole call; `insert_all` a chunk of keys at a time (up to 2^20 keys from a list
    or a tuple, 2^16 from any other iterable), so a `save` from another thread while it
    runs may record part of it: save after the inserts the generation covers return.
    Pickles as its snapshot, verified again when unpickled; an unpickled scalable filter
    grows as a loaded one does (see `load`).

    A scalable filter grows up to `max_bytes`, and no further: past it, its last stage
    fills up and answers "maybe" for more and more absent keys, up to every one.
    `info()["is_over_capacity"]` tells when that has begun; plan a larger `max_bytes`, or
    rebuild from the primary store.
    """

    def __new__(
        cls,
        expected_items: int,
        false_positive_rate: float = 0.01,
        *,
        kind: Literal["plain", "counting", "scalable"] = "plain",
        rule: Optional[str] = None,
        layout: Optional[str] = None,
        encoding: Literal["nfc", "utf8", "bytes", "nfc-trim-lower", "utf16le"] = "nfc",
        salt: Optional[bytes] = None,
        max_bytes: Optional[int] = None,
    ) -> BloomFilter:
        """A new, empty filter planned for `expected_items` keys at `false_positive_rate`,
        planned exactly as `bloom build` plans it (the same keys and options make the same
        snapshot bytes).

        `rule` is a position rule's name (`xxh3-128`, `xxh3-64`, `sha256-double`, ...;
        default: the fastest for the rate, or `sha256-double` when salted); `layout` a
        layout's name (`standard`, `blocked-512`, `split-block-512`, ...); `salt` a secret
        for keys an adversary picks; `max_bytes` the most payload bytes a scalable filter
        may grow to (`None` or 0: 1 GiB, what `load` reads by default; refused for another
        kind, whose size is its plan's). That limit is not
        recorded in the snapshot: a loaded filter grows as `load` says.

        Raises `InvalidArgumentError` for a plan or options that cannot be built, and
        `OutOfMemoryError` when its bits cannot be allocated.
        """

    def insert(self, key: Key) -> bool:
        """Inserts a key; whether it changed the filter (`False`: it may have been there)."""

    def contains(self, key: Key) -> bool:
        """Whether a key may have been inserted: `False` is definite, `True` is "maybe"."""

    def __contains__(self, key: Key) -> bool: ...
    def remove(self, key: Key) -> None:
        """Removes a key from a counting filter. Raises `InvalidArgumentError` for another
        kind of filter, or for a key it says is absent. A snapshot saved afterwards is no
        longer bound to the store it was loaded with."""

    def insert_all(self, keys: Iterable[Key]) -> int:
        """Inserts every key of any iterable (taken a chunk at a time, in bounded memory; one
        `str` or `bytes` is refused with `TypeError`); how many changed the filter. A refused
        key (`KeyEncodingError`, or `TypeError` for a wrong type) stops the call after every
        key before it was inserted; the exception's message and `key_index` name it."""

    def contains_all(self, keys: Iterable[Key]) -> list[bool]:
        """Whether each key may have been inserted, in order: the answers of `contains`."""

    def insert_packed(self, data: bytes, offsets: Buffer) -> int:
        """Inserts keys packed in one `bytes` object, as an Arrow string or binary column
        holds them: key `i` is `data[offsets[i]:offsets[i + 1]]`, taken as a `bytes` key.
        `offsets` is any one-dimensional buffer of `n + 1` 32- or 64-bit integers for `n`
        keys (`array.array('q')`, a NumPy int64 or int32 array, an Arrow array's offsets
        viewed as integers), never decreasing, within `data`; it need not start at 0.
        No Python object per key: the fastest way in. Offsets that do not cut `data` raise
        `InvalidArgumentError` before any key is inserted; a buffer of anything else,
        `TypeError`; a key refused by the encoding stops the call as in `insert_all`.
        Returns how many keys changed the filter."""

    def contains_packed(self, data: bytes, offsets: Buffer) -> list[bool]:
        """Whether each key packed as `insert_packed` takes them may have been inserted, in
        order."""

    def save(self, path: Union[str, os.PathLike], generation: Optional[int] = None) -> None:
        """Writes a snapshot atomically (the old file or the new one, never a mix),
        recording `generation`: the generation of the primary store these bits fully cover.
        `None` keeps the one it was loaded with or last saved at (0 for a new filter), and
        with it a store binding (more keys only add false positives); another generation
        drops the binding. A file that is not a snapshot is never replaced."""

    def to_bytes(self, generation: Optional[int] = None) -> bytes:
        """The snapshot as bytes: what `save` writes."""

    def to_guava(self) -> bytes:
        """The Guava stream of a filter of Guava's rules (`guava-mitz32`/`guava-mitz64`), which
        the JVM's `BloomFilter.readFrom` reads. Raises `InvalidArgumentError` otherwise."""

    @property
    def kind(self) -> Literal["plain", "counting", "scalable"]: ...
    @property
    def generation(self) -> int:
        """The dataset generation the filter was loaded with or last saved at (0 for a new
        filter)."""

    def info(self) -> dict[str, Any]:
        """What a snapshot would record (as `inspect` gives it) and the estimates:
        `items_inserted`, `fill_ratio`, `estimated_items`, `estimated_false_positive_rate`,
        `remaining_capacity`, `is_over_capacity`."""

def load(path: Union[str, os.PathLike], max_bytes: Optional[int] = None) -> BloomFilter:
    """Loads the filter a snapshot file holds, every byte checked first; a payload over
    `max_bytes` (`None` or 0: 1 GiB) is refused before anything is allocated, with
    `SnapshotTooLargeError` (pass a larger `max_bytes` for a file you trust).

    `max_bytes` limits only what is read, not how far a loaded scalable filter grows: it may
    grow to 1 GiB (what a new one may by default), or to `max_bytes` when that is larger (so
    that what it saves loads again with the same limit), and never less than it holds."""

def loads(data: Union[bytes, bytearray], max_bytes: Optional[int] = None) -> BloomFilter:
    """`load` for a snapshot's bytes (a `bytearray` is copied first), with the same limits."""

def inspect(source: Source, max_bytes: Optional[int] = None) -> dict[str, Any]:
    """A snapshot's header (its checksum checked; the payload is not read): `format_version`,
    `kind`, `bits`, `hashes`, `rule`, `layout`, `encoding`, `salted`, `dataset_generation`,
    `items`, `payload_len`, `store_bound`, `plan_capacity`, `plan_false_positive_rate`."""

def verify(source: Source, max_bytes: Optional[int] = None) -> dict[str, Any]:
    """Checks a snapshot completely, as `bloom verify` does, in constant memory; returns its
    header as `inspect` does, or raises."""

def from_guava(
    source: Source, funnel: Literal["utf8", "chars", "bytes"], max_bytes: Optional[int] = None
) -> BloomFilter:
    """The filter a Guava `BloomFilter.writeTo` stream holds. The stream does not record how
    the JVM turned keys into bytes: give its funnel (`utf8` for
    `Funnels.stringFunnel(UTF_8)`, `chars` for `unencodedCharsFunnel()`, `bytes` for
    `byteArrayFunnel()` and the integer and long funnels over little-endian bytes)."""

def from_parquet(
    path: Union[str, os.PathLike], column: str, max_bytes: Optional[int] = None
) -> list[Optional[BloomFilter]]:
    """The Bloom filter of `column` (its dotted path, or a unique leaf name) in each row group
    of a Parquet file, `None` where a row group has none; no data page is read. Each answers
    as Parquet's own reader does. A key is the column value's plain encoding: a `str` (or its
    UTF-8 bytes) for a string column, the bytes of a binary value, the little-endian bytes of
    a number (`struct.pack("<q", n)` for INT64). A filter over `max_bytes` (`None` or 0:
    128 MiB) is refused before it is read."""

def from_parquet_blob(
    blob: bytes, encoding: Literal["utf8", "bytes"] = "utf8", max_bytes: Optional[int] = None
) -> BloomFilter:
    """The filter of a Parquet filter blob (a `BloomFilterHeader`, then its bitset): `utf8`
    keys for a string column's, `bytes` otherwise."""

class BloomError(Exception):
    """Every error of the package."""

    kind: str
    """The stable name of the error's kind (the C ABI's `bloom_status_name`)."""
    code: int
    """The stable code of the error's kind (the C ABI's `BLOOM_ERR_*`)."""
    key_index: Optional[int]
    """For a key refused among many, its index among them."""

class InvalidArgumentError(BloomError, ValueError): ...
class SnapshotIOError(BloomError, OSError):
    """A file could not be read or written; `errno` is the system's error number when it
    gave one."""

class SnapshotNotFoundError(SnapshotIOError, FileNotFoundError):
    """The file does not exist ("no snapshot yet"): `except FileNotFoundError` catches it."""

class NotASnapshotError(BloomError, ValueError): ...
class CorruptSnapshotError(BloomError, ValueError): ...
class UnsupportedSnapshotError(BloomError, ValueError): ...
class SnapshotTooLargeError(BloomError, ValueError): ...
class KeyEncodingError(BloomError, ValueError): ...
class OutOfMemoryError(BloomError, MemoryError): ...
class InternalError(BloomError, RuntimeError): ...
