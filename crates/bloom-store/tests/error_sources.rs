//! Errors show their cause once: in their message or as their `source()`, never both (a
//! report that walks the chain would print it twice).

use std::error::Error;

use bloom_core::ParamsError;
use bloom_store::{OptionsError, StoreError};

/// The cause is not printed twice by a report that prints the message, then each source.
fn shown_once(e: &dyn Error) {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let shown = inner.to_string();
        assert!(
            !text.contains(&shown),
            "{text:?} shows its source {shown:?} already"
        );
        text = shown;
        source = inner.source();
    }
}

#[test]
fn wrapped_errors_show_their_cause_once() {
    let io = || std::io::Error::other("the disk is gone");
    let options = OptionsError::from(ParamsError::ZeroItems);
    assert!(
        options
            .to_string()
            .contains(&ParamsError::ZeroItems.to_string())
    );
    shown_once(&options);
    let store: StoreError<std::io::Error> = StoreError::Store(io());
    assert!(store.to_string().contains("the disk is gone"));
    shown_once(&store);
    let wrapped: StoreError<std::io::Error> = StoreError::Options(options);
    shown_once(&wrapped);
    let written = bloom_format::StreamWriteError::from(io());
    assert!(written.to_string().contains("the disk is gone"));
    shown_once(&written);
}
