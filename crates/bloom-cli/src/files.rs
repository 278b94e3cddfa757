//! Snapshot files for the commands: loading with a size limit and one copy of the payload,
//! writing atomically (or to standard output) without a second copy, interruptible by
//! SIGINT and SIGTERM, and the lock that serializes writers of one snapshot.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

use bloom_core::{
    BitsError, Filter, FilterConfig, KeyError, ReadSnapshotError, ScalableBloomFilter,
    ScalableError, SnapshotError,
};
use bloom_format::{
    AtomicFile, DecodeError, DecodeOptions, Header, LockError, ReadError, SnapshotLock,
    SnapshotReader, SnapshotWriter, WriteError, WriteOptions,
};

use crate::error::{CmdResult, Failure};
pub(crate) use crate::filters::{Answering, AnyFilter, Reported};
use crate::signals::Signals;

/// The path that means standard input or output.
pub(crate) fn is_stdio(path: &Path) -> bool {
    path == Path::new("-")
}

/// Refuses standard input or output (`-`, `/dev/stdout`) as the snapshot a command updates
/// in place.
pub(crate) fn in_place(command: &str, path: &Path) -> CmdResult {
    if is_stdio(path) || path == Path::new("/dev/stdout") || path == Path::new("/dev/stdin") {
        return Err(Failure::usage(format!(
            "{command} updates a snapshot file in place; {} is standard input or output, not a file",
            path.display()
        )));
    }
    Ok(())
}

/// A read error about `path` as a [`Failure`]: the environment for what the system failed
/// to do (the file missing, unreadable or not a regular file, memory), bad input for what
/// the bytes are. An
/// error that names the path already is not prefixed with it again.
pub(crate) fn read_failure(path: &Path, error: &ReadError) -> Failure {
    let message = match error {
        ReadError::Io { path: Some(_), .. } | ReadError::NotARegularFile { .. } => {
            error.to_string()
        }
        _ => format!("{}: {}", shown(path), described(error)),
    };
    match error {
        ReadError::Alloc { .. } | ReadError::Io { .. } | ReadError::NotARegularFile { .. } => {
            Failure::environment(message)
        }
        ReadError::Decode(DecodeError::OverLimit { .. }) => {
            Failure::input(format!("{message}; raise --max-bytes to read it"))
        }
        _ => Failure::input(message),
    }
}

/// A read error in words: an empty file is no snapshot at all (the decoder reports the
/// magic's bytes missing), as `verify` says it.
pub(crate) fn described(error: &ReadError) -> String {
    match error {
        ReadError::Decode(DecodeError::Truncated { got: 0, .. }) => {
            "not a bloom snapshot: the file is empty".to_owned()
        }
        other => other.to_string(),
    }
}

/// How a snapshot path is shown: `-` as standard input.
pub(crate) fn shown(path: &Path) -> String {
    if is_stdio(path) {
        "standard input".to_owned()
    } else {
        path.display().to_string()
    }
}

/// Standard input can be read once: a snapshot and a key file cannot both be `-`.
pub(crate) fn one_standard_input(snapshot: &Path, keys: Option<&Path>) -> CmdResult {
    let stdin = |p: &Path| is_stdio(p) || p == Path::new("/dev/stdin") || is_standard_input(p);
    if stdin(snapshot) && keys.is_some_and(stdin) {
        return Err(Failure::usage(
            "the snapshot and --keys cannot both be standard input (-): give one of them as a file",
        ));
    }
    Ok(())
}

/// Whether `path` names what standard input is (`/dev/fd/0`, `/proc/self/fd/0`, or the file
/// redirected into it): the same device and inode.
fn is_standard_input(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let (Ok(named), Ok(stdin)) = (std::fs::metadata(path), std::fs::metadata("/dev/stdin"))
        else {
            return false;
        };
        named.dev() == stdin.dev() && named.ino() == stdin.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

/// A snapshot being read: from a file, or from standard input (`-`).
pub(crate) type Input = SnapshotReader<Box<dyn Read + 'static>>;

/// Opens the snapshot at `path` (`-` for standard input) and checks its header with
/// `options`. A file must be a regular file (a pipe or device is refused unread); standard
/// input is read as a stream, whatever it is.
pub(crate) fn open_input(path: &Path, options: &DecodeOptions) -> Result<Input, ReadError> {
    if is_stdio(path) {
        return SnapshotReader::new(std::io::stdin().lock(), options).map(SnapshotReader::boxed);
    }
    SnapshotReader::open(path, options).map(SnapshotReader::boxed)
}

/// The configurations a snapshot's header gives: one filter's, or a scalable chain's
/// stages', oldest first (their payloads follow one another in that order).
pub(crate) enum Configs {
    One(FilterConfig),
    Stages(Vec<FilterConfig>),
}

impl Configs {
    /// The configurations, in payload order.
    pub(crate) fn all(&self) -> &[FilterConfig] {
        match self {
            Self::One(config) => std::slice::from_ref(config),
            Self::Stages(stages) => stages,
        }
    }

    /// A key's positions in every part: what answering it from the payload holds.
    pub(crate) fn positions_per_key(&self) -> u64 {
        self.all().iter().map(|c| u64::from(c.hashes())).sum()
    }
}

/// Opens a snapshot and checks its header: the format's checks, the size limit (before any
/// payload is read), and that this build implements its rules.
pub(crate) fn open(path: &Path, max_bytes: Option<u64>) -> CmdResult<(Input, Configs)> {
    let options = match max_bytes {
        Some(limit) => DecodeOptions::with_max_payload_len(limit),
        None => DecodeOptions::unlimited(),
    };
    let reader = open_input(path, &options).map_err(|e| read_failure(path, &e))?;
    let header = reader.header();
    let configs = if header.layout == bloom_format::LayoutId::Scalable {
        ScalableBloomFilter::stage_configs(header)
            .map(Configs::Stages)
            .map_err(|e| e.to_string())
    } else {
        FilterConfig::from_any_header(header)
            .map(Configs::One)
            .map_err(|e| e.to_string())
    };
    match configs {
        Ok(configs) => Ok((reader, configs)),
        // The checks after decoding are for a valid snapshot (docs/format.md): a damaged
        // payload is reported as that, before any parameter this build cannot use.
        Err(e) => {
            reader
                .read_payload_with(|_| Ok::<(), bloom_format::ReadError>(()))
                .map_err(|e| read_failure(path, &e))?;
            Err(Failure::input(format!("{}: {e}", shown(path))))
        }
    }
}

/// Either a read failure or the filter's refusal of the payload.
enum LoadError {
    Read(ReadError),
    Snapshot(SnapshotError),
    Scalable(ScalableError),
}

impl From<ScalableError> for LoadError {
    fn from(e: ScalableError) -> Self {
        Self::Scalable(e)
    }
}

impl From<ReadError> for LoadError {
    fn from(e: ReadError) -> Self {
        Self::Read(e)
    }
}

/// A loaded snapshot: its header, and the filter (one copy of the payload).
pub(crate) struct Loaded {
    pub(crate) header: Header,
    pub(crate) filter: AnyFilter,
}

/// Loads a snapshot into a filter, holding one copy of the payload. A chain may grow to
/// `max_bytes`, the limit it is read with, so that what is written can be read back.
pub(crate) fn load(path: &Path, max_bytes: u64) -> CmdResult<Loaded> {
    let (reader, _) = open(path, Some(max_bytes))?;
    load_opened(path, reader, max_bytes)
}

/// [`load`] of a snapshot [`open`] opened.
pub(crate) fn load_opened(path: &Path, reader: Input, max_bytes: u64) -> CmdResult<Loaded> {
    let header = reader.header().clone();
    // Plain and counting filters: one copy, the payload read straight into the words and
    // checksummed on the way. A chain may grow to the limit it was read with.
    AnyFilter::read_snapshot(reader)
        .map(|filter| match filter {
            AnyFilter::Scalable(mut chain) => {
                chain.set_growth_limit(Some(max_bytes));
                AnyFilter::Scalable(chain)
            }
            other => other,
        })
        .map_err(|e| match e {
            ReadSnapshotError::Read(e) => LoadError::Read(e),
            ReadSnapshotError::Load(ScalableError::Snapshot(e)) => LoadError::Snapshot(e),
            ReadSnapshotError::Load(e) => LoadError::Scalable(e),
        })
        .map(|filter| Loaded { header, filter })
        .map_err(|e| load_failure(path, e))
}

/// The answers for `keys` of the snapshot [`open`] opened, read from its payload as it
/// streams past, without loading the filter: memory for the keys' positions only, and one
/// pass over the file (what checking its checksum takes anyway). An answer is returned
/// only once the whole payload passed its checks.
pub(crate) fn contains_streamed<'k>(
    path: &Path,
    reader: Input,
    keys: impl IntoIterator<Item = &'k [u8]>,
) -> CmdResult<Vec<Result<bool, KeyError>>> {
    let header = reader.header().clone();
    bloom_core::AnyFilter::contains_in_payload(&header, keys, chunks(reader))
        .map_err(|e| load_failure(path, e))
}

/// Where a loader takes a payload's chunks.
type Sink<'a> = &'a mut dyn FnMut(&[u8]);

/// The payload of `reader` as it is read, a chunk at a time, then checked.
fn chunks(reader: Input) -> impl FnOnce(Sink<'_>) -> Result<(), LoadError> {
    move |sink| {
        reader
            .read_payload_with(|chunk| {
                sink(chunk);
                Ok::<(), LoadError>(())
            })
            .map(|_| ())
    }
}

/// Why a snapshot could not be loaded, as a [`Failure`]: the system's (allocation) or the
/// input's.
fn load_failure(path: &Path, error: LoadError) -> Failure {
    match error {
        LoadError::Read(e) => read_failure(path, &e),
        LoadError::Snapshot(SnapshotError::Bits(BitsError::Alloc(e)))
        | LoadError::Scalable(ScalableError::Build(bloom_core::BuildError::Alloc(e))) => {
            Failure::environment(format!("{}: {e}", shown(path)))
        }
        LoadError::Snapshot(e) => Failure::input(format!("{}: {e}", shown(path))),
        LoadError::Scalable(e) => Failure::input(format!("{}: {e}", shown(path))),
    }
}

/// Where a command writes a snapshot.
pub(crate) enum Output {
    /// Standard output (`-o -`, or `-o /dev/stdout`).
    Stdout,
    /// A file: the path with links followed once, under the writers' lock.
    File(SnapshotLock),
}

impl Output {
    /// How summaries name it.
    pub(crate) fn name(&self) -> String {
        match self {
            Self::Stdout => "standard output".to_owned(),
            Self::File(lock) => lock.target().display().to_string(),
        }
    }

    /// The file to read and write: the lock's target, so that a link changed while the
    /// command runs cannot redirect it.
    pub(crate) fn path(&self) -> &Path {
        match self {
            Self::Stdout => Path::new("-"),
            Self::File(lock) => lock.target(),
        }
    }
}

/// Resolves and locks the snapshot `path` for writing (nothing for standard output). The
/// target is checked before the lock file is made; while another process holds the lock,
/// this says so on standard error and waits (or fails with `--no-wait`).
pub(crate) fn output(path: &Path, wait: bool) -> CmdResult<Output> {
    if is_stdio(path) || path == Path::new("/dev/stdout") {
        if let Some(why) = crate::stdio::stdout_loses_writes() {
            return Err(Failure::environment(format!(
                "{why}: what would be written there would be lost; redirect it to a file or a pipe, or give -o PATH"
            )));
        }
        // A snapshot is binary: written to a terminal it is noise, and the terminal may act
        // on some of its bytes.
        if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            return Err(Failure::usage(
                "standard output is a terminal: redirect it to a file or a pipe to write a snapshot there",
            ));
        }
        return Ok(Output::Stdout);
    }
    let failure = |e: LockError| match e {
        LockError::Busy { .. } => Failure::environment(format!(
            "{e}; try again later, or leave out --no-wait to wait for it"
        )),
        LockError::NotARegularFile { .. } => Failure::usage(e),
        other => Failure::environment(other),
    };
    match SnapshotLock::acquire(path, false) {
        Ok(lock) => Ok(Output::File(lock)),
        Err(LockError::Busy { target, .. }) if wait => {
            crate::warn(&format!(
                "waiting for another bloom process to finish updating {}",
                target.display()
            ));
            SnapshotLock::acquire(path, true)
                .map(Output::File)
                .map_err(failure)
        }
        Err(e) => Err(failure(e)),
    }
}

pub(crate) fn write_failure(error: WriteError) -> Failure {
    match &error {
        WriteError::NotARegularFile { .. } | WriteError::NotASnapshot { .. } => {
            Failure::usage(error)
        }
        WriteError::Io { cause, .. } if cause.kind() == std::io::ErrorKind::InvalidInput => {
            Failure::usage(error)
        }
        _ => Failure::environment(error),
    }
}

/// Writes `filter` with `header` to `path` (or standard output for `-`), streaming the bits
/// without a copy. A file is written atomically; SIGINT or SIGTERM during the write leave the
/// previous file unchanged and no temporary file behind.
pub(crate) fn write(
    output: &Output,
    filter: &AnyFilter,
    header: Header,
    signals: &Signals,
) -> CmdResult {
    let path = output.path();
    if matches!(output, Output::Stdout) {
        // Standard output cannot seek: the payload CRC goes first, in its own pass.
        let mut crc = crc32fast::Hasher::new();
        filter
            .for_each_payload_chunk(|chunk| {
                crc.update(chunk);
                Ok::<(), ()>(())
            })
            .map_err(|()| Failure::environment("cannot compute the payload checksum"))?;
        let stdout = std::io::stdout().lock();
        let mut writer =
            SnapshotWriter::streaming(std::io::BufWriter::new(stdout), header, crc.finalize())
                .map_err(|e| stream_failure(&e))?;
        filter
            .for_each_payload_chunk(|chunk| writer.write_payload(chunk))
            .map_err(|e| stream_failure(&e))?;
        writer.finish_stream().map_err(|e| stream_failure(&e))?;
        return Ok(());
    }
    // Signals are recorded from before the temporary file exists: one that arrives while it is
    // being created stops the write at its first chunk, and the file is removed.
    let guard = signals.writing();
    let file = AtomicFile::create_with(path, WriteOptions::for_snapshot(&header))
        .map_err(write_failure)?;
    let target = file.target().to_path_buf();
    // A write that failed because a signal arrived is an interruption, not an I/O error.
    let failure = |e: std::io::Error| match guard.interrupted() {
        Some(signal) => Failure::Interrupted(signal),
        None => Failure::environment(format!("cannot write snapshot {}: {e}", target.display())),
    };
    let out = Interruptible {
        inner: file,
        guard: &guard,
    };
    let mut writer = SnapshotWriter::new(out, header).map_err(|e| failure(e.into()))?;
    filter
        .for_each_payload_chunk(|chunk| writer.write_payload(chunk).map_err(std::io::Error::from))
        .map_err(failure)?;
    let out = writer.finish().map_err(|e| failure(e.into()))?;
    if let Some(signal) = guard.interrupted() {
        // Dropping the file removes the temporary file; the target is untouched.
        drop(out);
        return Err(Failure::Interrupted(signal));
    }
    out.inner.commit().map_err(write_failure)
}

fn stream_failure(error: &bloom_format::StreamWriteError) -> Failure {
    match error {
        bloom_format::StreamWriteError::Io(e) => Failure::file_to_stdout(e),
        other => Failure::environment(format!("cannot write the snapshot: {other}")),
    }
}

/// Writes a snapshot that is already in memory (imports): its header, then its payload in
/// chunks, never a second copy; a file atomically and interruptibly, as [`write()`].
pub(crate) fn write_snapshot_bytes(
    output: &Output,
    snapshot: &bloom_format::Snapshot,
    signals: &Signals,
) -> CmdResult {
    let options = WriteOptions::for_snapshot(snapshot.header());
    write_file_bytes(output, Some(options), None, signals, |out| {
        out.write_all(&snapshot.encode_header())?;
        for chunk in snapshot.payload().chunks(1 << 20) {
            out.write_all(chunk)?;
        }
        Ok(())
    })
}

/// A writer that fails as soon as a signal arrived, so that every file write (snapshots,
/// imports, exports) stops between chunks and its temporary file is removed.
struct Interruptible<'a, W> {
    inner: W,
    guard: &'a crate::signals::WriteGuard<'a>,
}

impl<W: Write> Write for Interruptible<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.guard.interrupted().is_some() {
            return Err(std::io::Error::other("interrupted by a signal"));
        }
        self.inner.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<W: std::io::Seek> std::io::Seek for Interruptible<'_, W> {
    fn seek(&mut self, position: std::io::SeekFrom) -> std::io::Result<u64> {
        self.inner.seek(position)
    }
}

/// Writes a file's bytes, produced by `produce`, to `output`: standard output, or a file
/// replaced atomically (with `options`, and only where `replaceable` allows), stopping on
/// SIGINT, SIGTERM or SIGHUP with the temporary file removed.
fn write_file_bytes(
    output: &Output,
    options: Option<WriteOptions>,
    replaceable: Option<Replaceable>,
    signals: &Signals,
    produce: impl FnOnce(&mut dyn Write) -> Result<(), bloom_format::GuavaError>,
) -> CmdResult {
    let Output::File(lock) = output else {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        return match produce(&mut out).and_then(|()| out.flush().map_err(Into::into)) {
            Ok(()) => Ok(()),
            Err(bloom_format::GuavaError::Io(e)) => Err(Failure::file_to_stdout(&e)),
            Err(e) => Err(Failure::input(e)),
        };
    };
    let target = lock.target();
    if let Some(replaceable) = replaceable
        && let Ok(meta) = std::fs::metadata(target)
        && meta.is_file()
        && meta.len() != 0
        && !replaceable.allows(target, meta.len())
    {
        return Err(Failure::usage(format!(
            "refusing to replace {}: it is not {} (it is {} bytes long); remove it first or write elsewhere",
            target.display(),
            replaceable.name(),
            meta.len(),
        )));
    }
    // As in [`write()`]: recording starts before the temporary file exists.
    let guard = signals.writing();
    let file = match options {
        Some(options) => AtomicFile::create_with(target, options),
        None => AtomicFile::create(target),
    }
    .map_err(write_failure)?;
    let mut out = Interruptible {
        inner: std::io::BufWriter::new(file),
        guard: &guard,
    };
    let io_failure = |e: &dyn std::fmt::Display| {
        Failure::environment(format!("cannot write {}: {e}", target.display()))
    };
    let produced = produce(&mut out).and_then(|()| out.flush().map_err(Into::into));
    if let Some(signal) = guard.interrupted() {
        // Dropping the writer removes the temporary file; the target is unchanged.
        drop(out);
        return Err(Failure::Interrupted(signal));
    }
    match produced {
        Ok(()) => {}
        Err(bloom_format::GuavaError::Io(e)) => return Err(io_failure(&e)),
        Err(e) => return Err(Failure::input(e)),
    }
    let file = out.inner.into_inner().map_err(|e| io_failure(e.error()))?;
    file.commit().map_err(write_failure)
}

/// A file in a foreign form that an export may replace: an export never overwrites a
/// database, a bloom snapshot or a document by mistake, only an empty file or one that is
/// already in the form written.
#[derive(Clone, Copy)]
pub(crate) enum Replaceable {
    /// Exactly 128 bytes.
    SeedRaw,
    /// A Guava stream: strategy 0 or 1, k at least 1, and a length that agrees with its
    /// word count.
    GuavaStream,
}

impl Replaceable {
    fn allows(self, target: &Path, len: u64) -> bool {
        match self {
            Self::SeedRaw => len == bloom_format::SEED_RAW_LEN as u64,
            Self::GuavaStream => {
                let mut prefix = [0u8; 6];
                let read = File::open(target)
                    .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut prefix));
                read.is_ok() && bloom_format::guava_announced_len(prefix) == Some(len)
            }
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::SeedRaw => "a 128-byte seed raw file",
            Self::GuavaStream => "a Guava stream",
        }
    }
}

/// Writes a file in a foreign form, produced by `produce` (atomically and interruptibly, or to
/// standard output). An existing file is replaced only if [`Replaceable`] allows it.
pub(crate) fn write_foreign(
    output: &Output,
    replaceable: Replaceable,
    signals: &Signals,
    produce: impl FnOnce(&mut dyn Write) -> Result<(), bloom_format::GuavaError>,
) -> CmdResult {
    write_file_bytes(output, None, Some(replaceable), signals, produce)
}
