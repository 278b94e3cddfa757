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
    let streamed = args.input.path.is_none()
        && (args.keys.len() as u64).saturating_mul(configs.positions_per_key())
            <= STREAMED_POSITIONS;
    if streamed {
        answer_streamed(args, reader, &configs, &mut answers)?;
    } else {
        let loaded = files::load_opened(&args.snapshot, reader, &configs, args.limit.max_bytes)?;
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
/// each, 2 MiB in all):
/// keys given as arguments, up to this many positions, cost one pass over the file and
/// memory for their positions only, whatever the snapshot's size. More keys, or keys from
/// `--keys`, are answered by the loaded filter.
const STREAMED_POSITIONS: u64 = 1 << 16;

/// Answers the argument keys from the snapshot's payload as it streams past.
fn answer_streamed(
    args: &CheckArgs,
    reader: files::Input,
    configs: &files::Configs,
    answers: &mut Answers,
) -> CmdResult {
    let found = files::contains_streamed(&args.snapshot, reader, &args.keys)?;
    // Once the snapshot passed its checks, as the loaded path warns.
    if let Some(config) = configs.all().iter().find(|c| c.has_foreign_tables()) {
        warn_foreign_tables(&args.snapshot, config);
    }
    for (key, answer) in args.keys.iter().zip(found) {
        let key = key.as_bytes();
        let maybe = answer.map_err(|e| Failure::input(format!("key {}: {e}", escape_key(key))))?;
        answers.answer(key, maybe)?;
    }
    Ok(())
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
