//! Reading a node's redirects: whether an error reply (`MOVED`, `ASK`, or a node that is
//! busy) sends a command to another node, or asks for it to be sent again.

use redis::Value;

pub(super) enum Redirect {
    Moved,
    Ask(String),
    Busy,
}

pub(super) fn redirect(value: &Value) -> Option<Redirect> {
    let Value::ServerError(error) = value else {
        return None;
    };
    let target = || {
        error
            .details()
            .and_then(|d| d.split_whitespace().nth(1))
            .map(str::to_owned)
    };
    match error.code() {
        "MOVED" | "READONLY" => Some(Redirect::Moved),
        "ASK" => target().map(Redirect::Ask),
        "TRYAGAIN" | "CLUSTERDOWN" | "LOADING" | "MASTERDOWN" => Some(Redirect::Busy),
        _ => None,
    }
}
