//! The README's first example, compiled and run as it stands there (`cargo xtask tidy`
//! checks that the two agree): new records found by a `FilteredStore` over SQLite, with the
//! filter's snapshot saved beside the database.

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    // The README's paths are relative: run in a directory of our own.
    let dir = tempfile::tempdir()?;
    std::env::set_current_dir(dir.path())?;
    readme()
}

fn readme() -> Result<(), Box<dyn Error>> {
    // README begin
    use bloom_store::{FilterOptions, FilteredStore, SqliteStore};

    let store = SqliteStore::open("records.db")?;
    let options = FilterOptions::new(1_000_000, 0.01).with_snapshot("records.bloom");
    let (seen, _) = FilteredStore::open_and_recover(store, options)?; // trusted, or rebuilt
    for record in ["r-1", "r-2", "r-1"] {
        // Bits first, then the commit: true when the database did not have it.
        if seen.insert(record)? {
            println!("new: {record}");
        }
    }
    seen.save_snapshot("records.bloom")?; // bound to the database's history
    // README end
    Ok(())
}
