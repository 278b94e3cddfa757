//! `bloom import`: a legacy raw snapshot into the checked format.

use std::io::Read;

use bloom_format::{SEED_RAW_LEN, import_seed_raw};

use crate::cli::{ImportArgs, Legacy};
use crate::error::{CmdResult, Failure};
use crate::files;

pub(crate) fn run(args: &ImportArgs) -> CmdResult {
    let Legacy::SeedRaw = args.from;
    let name = args.input.display();
    let source: Box<dyn Read> = if files::is_stdio(&args.input) {
        Box::new(std::io::stdin())
    } else {
        Box::new(
            std::fs::File::open(&args.input)
                .map_err(|e| Failure::input(format!("cannot read {name}: {e}")))?,
        )
    };
    // One byte more than the layout holds tells "too long" without reading the rest.
    let mut raw = Vec::with_capacity(SEED_RAW_LEN + 1);
    source
        .take(SEED_RAW_LEN as u64 + 1)
        .read_to_end(&mut raw)
        .map_err(|e| Failure::input(format!("cannot read {name}: {e}")))?;
    if raw.len() > SEED_RAW_LEN {
        return Err(Failure::input(format!(
            "{name}: a seed raw snapshot is exactly {SEED_RAW_LEN} bytes (1024 bits); this input is longer"
        )));
    }
    let snapshot = import_seed_raw(&raw).map_err(|e| Failure::input(format!("{name}: {e}")))?;
    let output = files::output(&args.output, !args.lock.no_wait)?;
    files::write_snapshot_bytes(&output, &snapshot)
}
