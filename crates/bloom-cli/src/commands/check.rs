//! `bloom check`: maybe or absent for each key, streamed out as answered.

use bloom_core::{BloomFilter, Filter, ScalableBloomFilter};

use crate::cli::CheckArgs;
use crate::commands::{key_batches, require_keys, warn_foreign_tables};
use crate::error::{CmdResult, Exit, Failure};
use crate::files::{self, Answering, Reported as _};
use crate::output::{Answers, escape_key};

/// Returns the exit code: 0, or 4 with `--exit-status` when a key is absent.
pub(crate) fn run(args: &CheckArgs) -> CmdResult<u8> {
    require_keys(&args.keys, &args.input)?;
    crate::progress::reports_on_stdout();
    files::one_standard_input(&args.snapshot, args.input.path.as_deref())?;
    let (reader, configs) = files::open(&args.snapshot, Some(args.limit.max_bytes))?;
    let mut answers = Answers::new(args.json).every_key(args.exit_status);
    if let Some(keys) = few_keys(args, configs.positions_per_key()) {
        answer_streamed(args, reader, &configs, keys, &mut answers)?;
    } else {
        let loaded = files::load_opened(&args.snapshot, reader, args.limit.max_bytes)?;
        match loaded.filter.into_answering()? {
            Answering::One(filter) => answer_one(args, &filter, &mut answers)?,
            Answering::Chain(chain) => answer_chain(args, &chain, &mut answers)?,
        }
    }
    let any_absent = answers.finish()?;
    Ok(if args.exit_status && any_absent {
        Exit::Absent as u8
    } else {
        0
    })
}

/// The most key positions answered from the snapshot as it streams past (about 33 bytes
/// each, 2 MiB in all): up to this many positions cost one pass over the file and memory
/// for the keys and their positions only, whatever the snapshot's size. More keys are
/// answered by the loaded filter.
const STREAMED_POSITIONS: u64 = 1 << 16;

/// The largest key file read whole to see whether its keys are few enough to stream: a
/// larger one is answered by the loaded filter as it is read.
const STREAMED_KEY_FILE_BYTES: u64 = 1 << 20;

/// A key to answer from the streamed snapshot: as given, and the line of the key file it
/// came from (none for an argument).
struct FewKey {
    key: Vec<u8>,
    line: Option<u64>,
}

/// Few keys to answer from the snapshot as it streams past, and why reading them stopped
/// early (a bad line, a file that cannot be read), reported after the keys before it are
/// answered, as the loaded path reports it.
struct FewKeys {
    keys: Vec<FewKey>,
    failed: Option<Failure>,
}

/// The keys to answer from the snapshot as it streams past, when they are few: the argument
/// keys, then those of a `--keys` file (a regular file of at most
/// [`STREAMED_KEY_FILE_BYTES`], or one that cannot be opened or read, whose error is then
/// reported without loading), in all at most [`STREAMED_POSITIONS`] positions. `None` when
/// there are more, or the keys come from standard input, a pipe or a device (answered as
/// they are read, by the loaded filter).
fn few_keys(args: &CheckArgs, positions_per_key: u64) -> Option<FewKeys> {
    let max_keys = STREAMED_POSITIONS / positions_per_key.max(1);
    if args.keys.len() as u64 > max_keys {
        return None;
    }
    let mut keys: Vec<FewKey> = args
        .keys
        .iter()
        .map(|k| FewKey {
            key: k.as_bytes().to_vec(),
            line: None,
        })
        .collect();
    let Some(source) = args.input.source() else {
        return Some(FewKeys { keys, failed: None });
    };
    if files::is_stdio(&source.path) {
        return None;
    }
    // A missing or unreadable file, or a directory, fails when it is read below.
    if let Ok(meta) = std::fs::metadata(&source.path)
        && !meta.is_dir()
        && !(meta.is_file() && meta.len() <= STREAMED_KEY_FILE_BYTES)
    {
        return None;
    }
    // Bounded whatever the file has become since: reading stops past either limit (a line
    // holds a key and its end, and the last line may have none).
    let (mut bytes, mut too_many) = (0u64, false);
    let read = source.for_each(|key, line| {
        bytes += key.len() as u64 + 1;
        too_many = keys.len() as u64 >= max_keys || bytes > STREAMED_KEY_FILE_BYTES + 1;
        if too_many {
            return Err(Failure::input("too many keys to stream"));
        }
        keys.push(FewKey {
            key: key.to_vec(),
            line: Some(line),
        });
        Ok(())
    });
    (!too_many).then(|| FewKeys {
        keys,
        failed: read.err(),
    })
}

/// Answers `keys` from the snapshot's payload as it streams past.
fn answer_streamed(
    args: &CheckArgs,
    reader: files::Input,
    configs: &files::Configs,
    FewKeys { keys, failed }: FewKeys,
    answers: &mut Answers,
) -> CmdResult {
    let found = files::contains_streamed(&args.snapshot, reader, keys.iter().map(|k| &k.key[..]))?;
    // Once the snapshot passed its checks, as the loaded path warns.
    if let Some(config) = configs.all().iter().find(|c| c.has_foreign_tables()) {
        warn_foreign_tables(&args.snapshot, config);
    }
    let source = args.input.source().map(|s| s.name()).unwrap_or_default();
    for (FewKey { key, line }, answer) in keys.iter().zip(found) {
        let maybe = answer.map_err(|e| match line {
            Some(n) => Failure::input(format!("{source} line {n}: {e}")),
            None => Failure::input(format!("key {}: {e}", escape_key(key))),
        })?;
        answers.answer(key, maybe)?;
    }
    failed.map_or(Ok(()), Err)
}

/// Answers from one filter (a counting filter answers as its projection).
fn answer_one(args: &CheckArgs, filter: &BloomFilter, answers: &mut Answers) -> CmdResult {
    warn_foreign_tables(&args.snapshot, filter.config());
    // With foreign Unicode tables the answer depends on the raw key, not its encoding here.
    let foreign = filter.config().has_foreign_tables();
    key_batches(filter.config(), &args.keys, &args.input, |keys| {
        if foreign {
            for key in keys.given() {
                let maybe = filter
                    .contains(key)
                    .map_err(|e| Failure::input(format!("key {}: {e}", escape_key(key))))?;
                answers.answer(key, maybe)?;
            }
        } else {
            answers.answer_all(keys.given(), filter.contains_each(keys.encoded()))?;
        }
        Ok(())
    })
}

/// Answers from a scalable chain: maybe when any stage says maybe.
fn answer_chain(args: &CheckArgs, chain: &ScalableBloomFilter, answers: &mut Answers) -> CmdResult {
    warn_foreign_tables(&args.snapshot, chain.config());
    let foreign = chain
        .stages()
        .iter()
        .any(|s| s.config().has_foreign_tables());
    key_batches(chain.config(), &args.keys, &args.input, |keys| {
        for (key, encoded) in keys.given().zip(keys.encoded()) {
            let maybe = if foreign {
                chain
                    .contains(key)
                    .map_err(|e| Failure::input(format!("key {}: {e}", escape_key(key))))?
            } else {
                chain.contains(&encoded)
            };
            answers.answer(key, maybe)?;
        }
        Ok(())
    })
}
