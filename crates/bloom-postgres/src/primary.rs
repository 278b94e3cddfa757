//! [`PostgresStore`] as a [`PrimaryStore`] (and as a `Batched` store, raw keys a batch at a
//! time): lookups, the history and scans of it a page at a time, commits in one
//! transaction holding the head, and the claims a wrapper takes.

use std::collections::HashSet;

use bloom_format::{DatasetGeneration, HistoryDigest, StoreIdentity};
use bloom_store::history::{self, Change, ChangeKind, HistoryPoint, KeyGeneration, Removal};
use bloom_store::{ClaimKind, PrimaryStore, StoreClaim};

use crate::PostgresStoreError;
use crate::statements::Q;
use crate::store::PostgresStore;
use crate::values::{digest16, field, from_seq, point, to_seq};

/// Rows read per page of a scan: the memory a scan holds, whatever the store's size.
const PAGE: i64 = 4096;

/// The 1-based positions in a `PresentOf` row, as indexes into `present`.
fn mark_present(row: &postgres::Row, present: &mut [bool]) -> Result<(), PostgresStoreError> {
    let positions: Vec<i64> = field(row, 1, "the keys found")?;
    for position in positions {
        if let Some(slot) = usize::try_from(position - 1)
            .ok()
            .and_then(|i| present.get_mut(i))
        {
            *slot = true;
        }
    }
    Ok(())
}

fn damaged(what: &'static str, detail: String) -> PostgresStoreError {
    PostgresStoreError::Damaged { what, detail }
}

/// The error for a generation missing from the log, which no writer of the store leaves.
fn gap(missing: DatasetGeneration) -> PostgresStoreError {
    damaged(
        "the change log",
        format!("generation {missing} is missing below the head"),
    )
}

fn kind_of(value: i16, seq: i64) -> Result<ChangeKind, PostgresStoreError> {
    match value {
        1 => Ok(ChangeKind::Inserted),
        2 => Ok(ChangeKind::Removed),
        other => Err(damaged(
            "a change kind",
            format!("{other} at generation {seq}"),
        )),
    }
}

fn next(head: HistoryPoint) -> Result<DatasetGeneration, PostgresStoreError> {
    head.generation
        .next()
        .ok_or_else(|| damaged("the generation", "at its maximum".into()))
}

impl PostgresStore {
    /// Inserts keys in one transaction holding the head: those not in the store (once each)
    /// are appended with the next generations and their digests.
    ///
    /// First as if every key were new (the usual case behind a filter): one statement
    /// appends them all, skipping those in the store. A key skipped before a new one leaves
    /// a gap, which the log's guard refuses, rolling the attempt back; the batch is then
    /// written again knowing which keys are there. Skipped keys at the end leave no gap, and
    /// the digests of the rows before them are the chain's.
    fn insert_batch(
        &self,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<DatasetGeneration>>, PostgresStoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        match self.append(keys, false) {
            Err(e) if e.is_gap() => self.append(keys, true),
            done => done,
        }
    }

    /// One attempt of [`PostgresStore::insert_batch`]: with `probe`, the keys in the store
    /// are looked up (after the head is held) and left out.
    fn append(
        &self,
        keys: &[&[u8]],
        probe: bool,
    ) -> Result<Vec<Option<DatasetGeneration>>, PostgresStoreError> {
        let done = self.with_head(|tx, mut head| {
            // Read after the head was granted: every commit before ours is seen.
            let mut present = vec![false; keys.len()];
            if probe {
                for row in tx.query(Q::PresentOf, &[&keys])? {
                    mark_present(&row, &mut present)?;
                }
            }
            let mut seen = HashSet::with_capacity(keys.len());
            let mut done = Vec::with_capacity(keys.len());
            let (mut seqs, mut new_keys, mut digests) = (Vec::new(), Vec::new(), Vec::new());
            for (&key, present) in keys.iter().zip(present) {
                if present || !seen.insert(key) {
                    done.push(None);
                    continue;
                }
                let generation = next(head)?;
                let digest = history::after_insert(head.digest, generation, key);
                seqs.push(to_seq(generation));
                new_keys.push(key);
                digests.push(digest.to_bytes());
                head = HistoryPoint { generation, digest };
                done.push(Some(generation));
            }
            if seqs.is_empty() {
                return Ok(None);
            }
            let digest_refs: Vec<&[u8]> = digests.iter().map(<[u8; 16]>::as_slice).collect();
            let appended: HashSet<i64> = tx
                .query(Q::Append, &[&seqs, &new_keys, &digest_refs])?
                .iter()
                .map(|row| field(row, 0, "an appended generation"))
                .collect::<Result<_, _>>()?;
            // The head after the appends: the newest appended row (those skipped are at
            // the end).
            let after = seqs
                .iter()
                .zip(&digests)
                .filter(|(seq, _)| appended.contains(seq))
                .map(|(&seq, &digest)| HistoryPoint {
                    generation: from_seq(seq),
                    digest: HistoryDigest::from_bytes(digest),
                })
                .next_back();
            if appended.len() == seqs.len() {
                return Ok(after.map(|after| (done, after)));
            }
            // Only keys at the end were skipped (a gap fails the statement). They must be in
            // the store: a row skipped for any other conflict means the log is not as its
            // guards keep it, and nothing is committed.
            let skipped: Vec<&[u8]> = new_keys
                .iter()
                .zip(&seqs)
                .filter(|(_, seq)| !appended.contains(seq))
                .map(|(key, _)| *key)
                .collect();
            let mut there = vec![false; skipped.len()];
            for row in tx.query(Q::PresentOf, &[&skipped])? {
                mark_present(&row, &mut there)?;
            }
            if there.contains(&false) {
                return Err(damaged(
                    "the change log",
                    "an append was refused for another reason than its key being there".into(),
                ));
            }
            for slot in &mut done {
                if slot.is_some_and(|g| !appended.contains(&to_seq(g))) {
                    *slot = None;
                }
            }
            Ok(after.map(|after| (done, after)))
        })?;
        Ok(done.unwrap_or_else(|| vec![None; keys.len()]))
    }

    fn remove_one(&self, key: &[u8]) -> Result<Option<Removal>, PostgresStoreError> {
        self.with_head(|tx, head| {
            let rows = tx.query(Q::LiveInsert, &[&key])?;
            let inserted_at: Option<i64> = match rows.first() {
                Some(row) => field(row, 1, "the generation of a key's insert")?,
                None => None,
            };
            let Some(inserted_at) = inserted_at else {
                return Ok(None);
            };
            let generation = next(head)?;
            let digest = history::after_remove(head.digest, generation, key);
            let seq = to_seq(generation);
            tx.execute(
                Q::AppendRemoval,
                &[&seq, &key, &digest.to_bytes().as_slice(), &inserted_at],
            )?;
            tx.execute(Q::MarkRemoved, &[&seq, &inserted_at])?;
            Ok(Some((
                Removal {
                    generation,
                    inserted_at: from_seq(inserted_at),
                },
                HistoryPoint { generation, digest },
            )))
        })
    }

    /// Scans the log after `after`, up to `end` (the head read before the scan began), a page
    /// at a time, checking that generations follow one another; `visit` gets each row.
    fn scan(
        &self,
        q: Q,
        identity_column: usize,
        after: DatasetGeneration,
        end: DatasetGeneration,
        mut visit: impl FnMut(DatasetGeneration, &postgres::Row) -> Result<(), PostgresStoreError>,
    ) -> Result<DatasetGeneration, PostgresStoreError> {
        let mut reached = after;
        while reached < end {
            let rows = self.query(q, &[&to_seq(reached), &to_seq(end), &PAGE])?;
            if rows.is_empty() {
                return Err(gap(reached.next().unwrap_or(reached)));
            }
            if let Some(row) = rows.first() {
                self.same_store(row, identity_column)?;
            }
            for row in &rows {
                let generation = from_seq(field(row, 0, "a generation")?);
                let expected = reached.next().unwrap_or(reached);
                if generation != expected {
                    return Err(gap(expected));
                }
                visit(generation, row)?;
                reached = generation;
            }
        }
        Ok(reached)
    }
}

impl PostgresStore {
    /// Replays the log from `from` up to `end`, checking that every row's digest follows
    /// from the changes before it (a row appended by hand with a wrong digest, or rewritten,
    /// fails the replay instead of being applied). `visit` gets each change and whether it
    /// is to be applied (an insert, or a removal linked to the insert it undid). Returns the
    /// point reached.
    fn replay(
        &self,
        from: HistoryPoint,
        end: DatasetGeneration,
        mut visit: impl FnMut(Change<'_>, bool),
    ) -> Result<HistoryPoint, PostgresStoreError> {
        let mut point = from;
        self.scan(Q::ChangesPage, 5, from.generation, end, |generation, row| {
            let seq: i64 = field(row, 0, "a generation")?;
            let kind = kind_of(field(row, 1, "a change kind")?, seq)?;
            let key: &[u8] = field(row, 2, "a key")?;
            let digest = history::after_change(point.digest, generation, kind, key);
            if digest16(field(row, 3, "a history digest")?)? != digest {
                return Err(damaged(
                    "the change log",
                    format!(
                        "the history digest at generation {generation} does not follow from the changes before it"
                    ),
                ));
            }
            point = HistoryPoint { generation, digest };
            let applied = field::<bool>(row, 4, "a removal's link")?;
            visit(Change { generation, kind, key }, applied);
            Ok(())
        })?;
        Ok(point)
    }

    /// Replays the whole change log: the generations run 1, 2, 3, … to the head with no
    /// row past it, and every row's digest follows from the changes before it (the
    /// documented chain, from the store's identity). Returns the head.
    ///
    /// A store whose rows were rewritten or edited with its guards off (a key changed by
    /// `ALTER TABLE … USING`, a row deleted with triggers disabled) fails with
    /// [`PostgresStoreError::Damaged`]. An open does this unless
    /// [`Settings::verify_history`](crate::Settings::verify_history) is off.
    ///
    /// # Errors
    /// `Damaged`, or the server's error.
    pub fn verify_history(&self) -> Result<HistoryPoint, PostgresStoreError> {
        let head = self.head()?;
        let point = self.replay(
            HistoryPoint::genesis(self.identity),
            head.generation,
            |_, _| {},
        )?;
        // No row past the head: both read in one statement (writers may be appending).
        let row = self.read_one(Q::LastSeq, &[])?;
        let (at, last): (i64, Option<i64>) = (
            field(&row, 1, "a generation")?,
            field(&row, 2, "a generation")?,
        );
        if point != head || last.unwrap_or(0) != at {
            return Err(damaged(
                "the head of the change log",
                format!(
                    "it records generation {at} but the log ends at {}",
                    last.unwrap_or(0)
                ),
            ));
        }
        Ok(head)
    }
}

impl PrimaryStore for PostgresStore {
    type Error = PostgresStoreError;

    fn identity(&self) -> Result<StoreIdentity, PostgresStoreError> {
        Ok(self.identity)
    }

    fn contains(&self, key: &[u8]) -> Result<bool, PostgresStoreError> {
        field(&self.read_one(Q::Contains, &[&key])?, 1, "an answer")
    }

    fn head(&self) -> Result<HistoryPoint, PostgresStoreError> {
        let floor = self.guard.floor();
        let row = self.read_one(Q::Head, &[])?;
        let head = point(
            self.identity,
            field(&row, 1, "the head of the change log")?,
            field(&row, 2, "the head of the change log")?,
        )?;
        self.guard.saw_after(floor, head)?;
        Ok(head)
    }

    fn history_at(
        &self,
        generation: DatasetGeneration,
    ) -> Result<Option<HistoryDigest>, PostgresStoreError> {
        if generation == DatasetGeneration::ZERO {
            return Ok(Some(history::genesis(self.identity)));
        }
        let row = self.read_one(Q::HistoryAt, &[&to_seq(generation)])?;
        match field::<Option<&[u8]>>(&row, 1, "a history digest")? {
            Some(digest) => Ok(Some(digest16(digest)?)),
            None if self.head()?.generation >= generation => Err(gap(generation)),
            None => Ok(None),
        }
    }

    fn keys_since(
        &self,
        after: DatasetGeneration,
        visit: &mut dyn FnMut(&[u8]),
    ) -> Result<DatasetGeneration, PostgresStoreError> {
        self.scan(Q::KeysPage, 3, after, self.head()?.generation, |_, row| {
            if field::<bool>(row, 1, "a change kind")? {
                visit(field(row, 2, "a key")?);
            }
            Ok(())
        })
    }

    fn changes_since(
        &self,
        after: DatasetGeneration,
        visit: &mut dyn FnMut(Change<'_>),
    ) -> Result<DatasetGeneration, PostgresStoreError> {
        let end = self.head()?.generation;
        if after >= end {
            return Ok(after);
        }
        let digest = self.history_at(after)?.ok_or_else(|| gap(after))?;
        let from = HistoryPoint {
            generation: after,
            digest,
        };
        let reached = self.replay(from, end, |change, applied| {
            if applied {
                visit(change);
            }
        })?;
        Ok(reached.generation)
    }

    fn insert(&self, key: &[u8]) -> Result<Option<DatasetGeneration>, PostgresStoreError> {
        Ok(self.insert_batch(&[key])?.pop().flatten())
    }

    fn generation_of(&self, key: &[u8]) -> Result<KeyGeneration, PostgresStoreError> {
        let row = self.read_one(Q::LiveInsert, &[&key])?;
        let seq: Option<i64> = field(&row, 1, "the generation of a key's insert")?;
        Ok(seq.map_or(KeyGeneration::Absent, |seq| {
            KeyGeneration::Since(from_seq(seq))
        }))
    }

    /// One transaction for the batch: all of it is committed, or (on an error) none of it.
    fn insert_all(
        &self,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<DatasetGeneration>>, PostgresStoreError> {
        self.insert_batch(keys)
    }

    /// One statement: the answers are of one snapshot of the store.
    fn contains_each(&self, keys: &[&[u8]]) -> Result<Vec<bool>, PostgresStoreError> {
        let mut answers = vec![false; keys.len()];
        if keys.is_empty() {
            return Ok(answers);
        }
        mark_present(&self.read_one(Q::PresentOf, &[&keys])?, &mut answers)?;
        Ok(answers)
    }

    fn remove(&self, key: &[u8]) -> Result<Option<Removal>, PostgresStoreError> {
        self.remove_one(key)
    }

    fn claim_key_encoding(&self, proposed: &str) -> Result<String, PostgresStoreError> {
        let recorded = || -> Result<Option<String>, PostgresStoreError> {
            field(&self.read_one(Q::Encoding, &[])?, 1, "the key encoding")
        };
        if let Some(found) = recorded()? {
            return Ok(found);
        }
        // Two statements: the second's snapshot sees whichever insert won.
        self.query(
            Q::ClaimEncoding,
            &[&proposed, &self.identity.to_bytes().as_slice()],
        )?;
        recorded()?
            .ok_or_else(|| damaged("the key encoding", "vanished after it was recorded".into()))
    }

    /// A session-level advisory lock (exclusive, or shared for [`ClaimKind::Shared`]), held
    /// by a connection of its own for as long as the claim is, and freed by the server when
    /// that connection ends (the process died, the server restarted). Its keys are the
    /// class `0x626c6f63` and `hashtext` of the namespace and the identity. The same
    /// connection holds the store's tables (`ACCESS SHARE`) in an open transaction, and a
    /// thread waits on its socket.
    ///
    /// - Its session ended (the database dropped, a backend terminated, a server restart):
    ///   seen as it happens; the claim is unconfirmed (the wrapper asks the store for every
    ///   lookup) until it is taken again and the store checked. If another wrapper took it
    ///   first, it is lost for good, and every call of this store fails with
    ///   [`PostgresStoreError::ClaimLost`].
    /// - Someone waits for the store's tables (`DROP SCHEMA`, `pg_restore --clean`,
    ///   `TRUNCATE`, `ALTER TABLE`): the claim turns unconfirmed first, then lets the tables
    ///   go (within 0.2 s), and takes them again once the change is done.
    /// - The check: the store is the one opened and its history still has the newest point
    ///   this process saw. Otherwise (another store, an older backup, a diverged copy) the
    ///   claim is lost for good and every call fails with [`PostgresStoreError::Replaced`].
    fn claim_wrapper(&self, kind: ClaimKind) -> Result<Option<StoreClaim>, PostgresStoreError> {
        self.claim(kind)
    }
}

/// The store behind [`bloom_store::Coalesced`]: the async counterpart of its
/// [`PrimaryStore::insert`] and [`PrimaryStore::contains`], with callers' single keys
/// gathered into one transaction ([`PrimaryStore::insert_all`]) or one query
/// ([`PrimaryStore::contains_each`]). Keys are stored as given (`KeyEncoding::Bytes`: a
/// wrapper's keys arrive already encoded); a key is [`Lookup::Present`] or
/// [`Lookup::AbsentBypassed`] (no filter is asked). Its other calls go through
/// [`bloom_store::Coalesced::run`].
///
/// [`Lookup::Present`]: bloom_store::Lookup::Present
/// [`Lookup::AbsentBypassed`]: bloom_store::Lookup::AbsentBypassed
impl bloom_store::Batched for PostgresStore {
    type Error = PostgresStoreError;

    fn encoding(&self) -> bloom_core::KeyEncoding {
        bloom_core::KeyEncoding::Bytes
    }

    fn insert_batch(
        &self,
        keys: &[bloom_core::EncodedKey<'_>],
    ) -> Result<Vec<bool>, PostgresStoreError> {
        let keys: Vec<&[u8]> = keys.iter().map(bloom_core::EncodedKey::as_bytes).collect();
        Ok(self
            .insert_all(&keys)?
            .into_iter()
            .map(|generation| generation.is_some())
            .collect())
    }

    fn contains_batch(
        &self,
        keys: &[bloom_core::EncodedKey<'_>],
    ) -> Result<Vec<bloom_store::Lookup>, PostgresStoreError> {
        let keys: Vec<&[u8]> = keys.iter().map(bloom_core::EncodedKey::as_bytes).collect();
        Ok(self
            .contains_each(&keys)?
            .into_iter()
            .map(|present| {
                if present {
                    bloom_store::Lookup::Present
                } else {
                    bloom_store::Lookup::AbsentBypassed
                }
            })
            .collect())
    }
}
