"""A crawler's dedup step: which of these URLs were never crawled?

The filter answers "definitely new" cheaply; its "maybe" is confirmed against the primary
store (SQLite here), so a new URL is never dropped as seen. The snapshot records the store's
generation, and a stale, damaged or foreign snapshot is rebuilt from the store, never trusted.

    python crawler_dedup.py STATE_DIR < urls.txt     # prints the URLs that are new
"""

import sqlite3
import sys
from pathlib import Path

import bloom

BATCH = 10_000


def open_state(state: Path):
    db = sqlite3.connect(state / "crawled.db")
    db.execute("CREATE TABLE IF NOT EXISTS crawled (url TEXT PRIMARY KEY)")
    # The store only grows, so its row count is its generation.
    (generation,) = db.execute("SELECT count(*) FROM crawled").fetchone()
    try:
        seen = bloom.load(state / "seen.bloom")
        if seen.generation == generation:
            return db, seen
        print(f"snapshot covers generation {seen.generation}, store is at {generation}: rebuilding", file=sys.stderr)
    except bloom.SnapshotIOError:
        pass  # no snapshot yet
    except bloom.BloomError as e:
        print(f"snapshot not trusted ({e.kind}: {e}): rebuilding", file=sys.stderr)
    seen = bloom.BloomFilter(max(1_000_000, 2 * generation), 0.01)
    seen.insert_all(url for (url,) in db.execute("SELECT url FROM crawled"))
    return db, seen


def new_urls(db, seen, batch):
    """The URLs of `batch` the store does not hold, committed to it before they are returned."""
    batch = list(dict.fromkeys(batch))  # each URL once, in order
    maybe = [url for url, m in zip(batch, seen.contains_all(batch)) if m]
    confirmed = set()
    for i in range(0, len(maybe), 500):
        part = maybe[i : i + 500]
        marks = ",".join("?" * len(part))
        confirmed |= {u for (u,) in db.execute(f"SELECT url FROM crawled WHERE url IN ({marks})", part)}
    new = [url for url in batch if url not in confirmed]
    with db:
        db.executemany("INSERT INTO crawled (url) VALUES (?)", ((u,) for u in new))
    seen.insert_all(new)
    return new


def main():
    state = Path(sys.argv[1])
    state.mkdir(parents=True, exist_ok=True)
    db, seen = open_state(state)
    batch = []
    for line in sys.stdin:
        if url := line.strip():
            batch.append(url)
        if len(batch) == BATCH:
            print(*new_urls(db, seen, batch), sep="\n")
            batch = []
    if batch:
        print(*new_urls(db, seen, batch), sep="\n")
    (generation,) = db.execute("SELECT count(*) FROM crawled").fetchone()
    seen.save(state / "seen.bloom", generation=generation)


if __name__ == "__main__":
    main()
