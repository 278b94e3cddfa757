//! The key-taking methods plain and atomic filters share (`contains`, `insert_all`,
//! `contains_each`), written once as a macro each filter type expands with its own receiver,
//! word type and batch insert.

/// `contains`, `insert_all` and `contains_each` of a filter of words `self.words` (plain or
/// atomic), written once: `$($mut)?` is the receiver's mutability and `$variant` the
/// [`BitsRef`](crate::probe::BitsRef) the words are read as. The filter type has
/// `self.config`, `self.words`, `hashing()`, `probe()`, its one-key probe,
/// `insert_many`, its many-key insert, and `took(&Inserted)`, which records what a batch
/// changed.
macro_rules! batch_methods {
    ($($mut:ident)?; $variant:ident) => {
        /// Whether a key (text, bytes or already encoded: see [`Key`]) may have been
        /// inserted (Guava's `mightContain`). `false` is definite (for an atomic filter, for
        /// every insert that finished before this call started).
        ///
        /// With foreign Unicode tables
        /// ([`FilterConfig::has_foreign_tables`](crate::FilterConfig::has_foreign_tables)) a
        /// key outside ASCII, and every already-encoded key, is answered *maybe*: this build
        /// cannot tell where the other tables put it. A byte key is answered with a `Result`,
        /// as in `insert`.
        #[must_use]
        #[inline(always)]
        pub fn contains<K: Key + ?Sized>(&self, key: &K) -> K::Answer<bool> {
            let (takes, _, _) = self.hashing().rules();
            match $crate::key::probe_as_is(key, takes, self.probe()) {
                Some(answer) => K::answer(Ok(answer)),
                None => self.contains_encoded(key),
            }
        }

        /// `contains` for a key that must be encoded first.
        #[cold]
        #[inline(never)]
        fn contains_encoded<K: Key + ?Sized>(&self, key: &K) -> K::Answer<bool> {
            let (_, encoding, foreign_tables) = self.hashing().rules();
            K::answer($crate::key::probe_encoded(
                key,
                (encoding, foreign_tables),
                self.probe(),
            ))
        }

        /// Inserts every key; returns how many changed a bit, which is how many `insert`
        /// calls would have returned `true` (Guava's `putAll`).
        ///
        /// At least as fast per key as `insert` in a loop. A plain filter larger than the
        /// CPU's caches hashes the keys a batch at a time and requests the lines of the next
        /// batch while it sets this one, so that the cache misses of a whole batch overlap
        /// the work; an atomic filter sets them one at a time. Byte keys are answered with a
        /// `Result`: the first key a text encoding refuses stops the call, after every key
        /// before it was inserted.
        pub fn insert_all<I>(& $($mut)? self, keys: I) -> <I::Item as Key>::Answer<u64>
        where
            I: IntoIterator,
            I::Item: Key,
        {
            let mut inserted = $crate::batch::Inserted::default();
            let outcome = self.insert_many(keys.into_iter(), &mut inserted);
            self.took(&inserted);
            <I::Item as Key>::answer(outcome.map(|()| inserted.changed))
        }

        /// Whether each key may have been inserted: one answer per key, in order, exactly
        /// those of `contains`.
        ///
        /// At least as fast per key as `contains` in a loop. A filter that fits in the CPU's
        /// caches hashes and probes each key in one step, in a loop of its own (a plain
        /// filter's compiled for AVX2 when the CPU has it); a larger one hashes them a batch
        /// at a time and requests the lines of the next batch while it answers this one, so
        /// that the cache misses of a whole batch overlap the work. Keys are taken lazily, at
        /// most 256 ahead of the answers read, so a stream of any length is answered in
        /// constant memory (except by `collect` in cache: see
        /// [`ContainsEach`](crate::ContainsEach)); keys that end (`None`) and then resume are
        /// followed, `None` included. An atomic filter in cache answers each key when it is asked for; past
        /// the caches, when the batch of 16 holding it is answered, so an insert finished
        /// after that is not in the answer (bits are only ever set, so a `true` stays true).
        ///
        /// ```
        /// use bloom_core::BloomFilter;
        ///
        /// let mut filter = BloomFilter::with_capacity(1_000, 0.01)?;
        /// assert_eq!(filter.insert_all(["a", "b", "a"]), 2); // the second "a" changes nothing
        /// let answers: Vec<bool> = filter.contains_each(["a", "b"]).collect();
        /// assert_eq!(answers, [true, true]);
        /// # Ok::<(), Box<dyn std::error::Error>>(())
        /// ```
        pub fn contains_each<I>(&self, keys: I) -> $crate::ContainsEach<'_, I::IntoIter>
        where
            I: IntoIterator,
            I::Item: Key,
        {
            $crate::ContainsEach::new(
                $crate::probe::BitsRef::$variant(&self.words),
                self.hashing(),
                keys.into_iter(),
            )
        }
    };
}
pub(crate) use batch_methods;
