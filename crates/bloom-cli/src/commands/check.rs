//! `bloom check`: maybe or absent for each key, streamed out as answered.

use serde_json::{Map, Value};

use crate::cli::CheckArgs;
use crate::commands::foreign_tables_warning;
use crate::error::{CmdResult, Exit, Failure};
use crate::files;
use crate::output::{Out, escape_key, json_key};

/// Returns the exit code: 0, or 4 with `--exit-status` when a key is absent.
pub(crate) fn run(args: &CheckArgs) -> CmdResult<u8> {
    let loaded = files::load(&args.snapshot, args.limit.max_bytes)?;
    let filter = &loaded.filter;
    if let Some(warning) = foreign_tables_warning(&args.snapshot, filter) {
        crate::warn(&warning);
    }
    let mut out = Out::new();
    let mut any_absent = false;
    let mut answer = |key: &[u8], line: Option<u64>| -> CmdResult {
        let maybe = filter.contains_bytes(key).map_err(|e| match line {
            Some(n) => Failure::input(format!("key on line {n}: {e}")),
            None => Failure::input(format!("key {}: {e}", escape_key(key))),
        })?;
        any_absent |= !maybe;
        let verdict = if maybe { "maybe" } else { "absent" };
        if args.json {
            let mut object = Map::new();
            json_key(key, &mut object);
            object.insert("answer".into(), Value::from(verdict));
            out.json_line(&Value::Object(object))
        } else {
            out.text(&format!("{verdict}\t{}\n", escape_key(key)))
        }
    };
    for key in &args.keys {
        answer(key.as_bytes(), None)?;
    }
    if let Some(source) = args.input.source() {
        source.for_each(|key, line| answer(key, Some(line)))?;
    }
    out.flush()?;
    Ok(if args.exit_status && any_absent {
        Exit::Absent as u8
    } else {
        0
    })
}
