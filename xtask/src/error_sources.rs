//! The tidy rule that an error shows its cause once: in its message or as its `source()`,
//! never both (a report that prints the message and then walks the chain, as anyhow and the
//! CLI do, would print the cause twice).
//!
//! thiserror returns a field from `source()` when it is named `source` or marked `#[source]`
//! or `#[from]`. This is a text scan of every `#[derive(thiserror::Error)]` item: a variant
//! (or struct) whose `#[error("...")]` message prints such a field, by a placeholder
//! (`{source}`, `{0:?}`) or in an argument after the string (`describe(.0)`), is reported.
//! `#[error(transparent)]` forwards both the message and the source to the inner error, so it
//! shows the cause once and is not reported.

/// Every message in `text` (the file shown as `file`) that prints a field thiserror also
/// returns as its source, one line each.
pub(crate) fn problems(file: &str, text: &str) -> Vec<String> {
    if !text.contains("thiserror") {
        return Vec::new();
    }
    let code = mask(text);
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = find(&code, b"#[derive(", from) {
        from = at + 1;
        let open = at + "#[derive".len();
        let Some(close) = matching(&code, open) else {
            continue;
        };
        let list = &code[open + 1..close];
        let derives_error = list
            .split(|&b| b == b',')
            .map(|d| String::from_utf8_lossy(d).trim().to_owned())
            .any(|d| d == "thiserror::Error" || d == "Error");
        if derives_error {
            for leak in item(text, &code, close + 2) {
                found.push(format!(
                    "{file}:{}: {} prints `{}` in its #[error] message, and thiserror also \
                     returns it from source(), so a report shows the cause twice: keep it in \
                     the message and make it a plain field (rename a field named `source`, \
                     e.g. to `cause`; drop #[source]; write `impl From` out instead of \
                     #[from]), or stop printing it (#[error(transparent)] when the message is \
                     the cause alone)",
                    line_of(text, leak.at),
                    leak.name,
                    leak.field
                ));
            }
        }
    }
    found
}

/// A message that prints its source field.
struct Leak {
    /// Where its `#[error]` attribute is (a byte offset).
    at: usize,
    /// `Item::Variant`, or `Item` for a struct.
    name: String,
    /// The field, by name or tuple index.
    field: String,
}

/// An attribute: its path (`error`, `source`, `doc`...) and where its parenthesized
/// arguments are, if it has any.
struct Attr {
    at: usize,
    path: String,
    args: Option<(usize, usize)>,
}

/// The leaks of the enum or struct whose attributes and keyword start at `at`, after its
/// derive.
fn item(text: &str, code: &[u8], mut at: usize) -> Vec<Leak> {
    let mut item_attrs = Vec::new();
    let name;
    loop {
        at = skip_space(code, at);
        if code[at..].starts_with(b"#[") {
            let Some(end) = matching(code, at + 1) else {
                return Vec::new();
            };
            item_attrs.push(attr(code, at, end));
            at = end + 1;
            continue;
        }
        let word = ident(code, at);
        at += word.len();
        match word.as_str() {
            "pub" if code.get(at) == Some(&b'(') => {
                at = matching(code, at).map_or(code.len(), |c| c + 1);
            }
            "enum" | "struct" => {
                name = ident(code, skip_space(code, at));
                let kind = word;
                let Some(open) = code[at..]
                    .iter()
                    .position(|b| matches!(b, b'{' | b'(' | b';'))
                    .map(|p| at + p)
                else {
                    return Vec::new();
                };
                if code[open] == b';' {
                    return Vec::new();
                }
                let Some(close) = matching(code, open) else {
                    return Vec::new();
                };
                let item_message = item_attrs.iter().find(|a| a.path == "error");
                if kind == "struct" {
                    return leaks(text, code, &name, item_message, (open, close))
                        .into_iter()
                        .collect();
                }
                return variants(text, code, &name, item_message, (open, close));
            }
            "" => return Vec::new(),
            _ => {}
        }
    }
}

/// The leaks of an enum's variants, its body between the braces at `open` and `close`.
fn variants(
    text: &str,
    code: &[u8],
    name: &str,
    item_message: Option<&Attr>,
    (open, close): (usize, usize),
) -> Vec<Leak> {
    let mut found = Vec::new();
    let mut at = open + 1;
    while at < close {
        at = skip_space(code, at);
        let mut attrs = Vec::new();
        while code[at..].starts_with(b"#[") {
            let Some(end) = matching(code, at + 1) else {
                return found;
            };
            attrs.push(attr(code, at, end));
            at = skip_space(code, end + 1);
        }
        let variant = ident(code, at);
        if variant.is_empty() {
            break;
        }
        at = skip_space(code, at + variant.len());
        let message = attrs.iter().find(|a| a.path == "error").or(item_message);
        if matches!(code[at], b'(' | b'{')
            && let Some(end) = matching(code, at)
        {
            let full = format!("{name}::{variant}");
            found.extend(leaks(text, code, &full, message, (at, end)));
            at = end + 1;
        }
        // Past a discriminant, to the comma that ends the variant.
        while at < close && code[at] != b',' {
            at = if matches!(code[at], b'(' | b'[' | b'{') {
                matching(code, at).map_or(close, |e| e + 1)
            } else {
                at + 1
            };
        }
        at += 1;
    }
    found
}

/// The leak of one variant or struct, its fields between the brackets at `open` and `close`
/// (parentheses for a tuple, braces for named fields).
fn leaks(
    text: &str,
    code: &[u8],
    name: &str,
    message: Option<&Attr>,
    (open, close): (usize, usize),
) -> Option<Leak> {
    let (message_at, (args_open, args_close)) = message.and_then(|m| Some((m.at, m.args?)))?;
    let named = code[open] == b'{';
    // The fields thiserror returns as source: those marked, else one named `source`.
    let mut marked = Vec::new();
    let mut by_name = Vec::new();
    for (index, (start, end)) in split_top(code, open + 1, close).into_iter().enumerate() {
        let mut at = skip_space(code, start);
        let mut is_marked = false;
        while code[at..end].starts_with(b"#[") {
            let Some(attr_end) = matching(code, at + 1) else {
                break;
            };
            let a = attr(code, at, attr_end);
            is_marked |= a.path == "source" || a.path == "from";
            at = skip_space(code, attr_end + 1);
        }
        let field = if named {
            let mut word = ident(code, at);
            if word == "pub" {
                at += word.len();
                if code.get(at) == Some(&b'(') {
                    at = matching(code, at).map_or(end, |c| c + 1);
                }
                word = ident(code, skip_space(code, at));
            }
            word
        } else {
            index.to_string()
        };
        if is_marked {
            marked.push(field);
        } else if named && field == "source" {
            by_name.push(field);
        }
    }
    let sources = if marked.is_empty() { by_name } else { marked };
    let content = &code[args_open + 1..args_close];
    let trimmed = String::from_utf8_lossy(content);
    if trimmed.trim() == "transparent" {
        return None;
    }
    let quote = args_open + 1 + content.iter().position(|&b| b == b'"')?;
    let end_quote = quote
        + 1
        + code[quote + 1..args_close]
            .iter()
            .position(|&b| b == b'"')?;
    let format = &text[quote + 1..end_quote];
    let args: Vec<String> = split_top(code, end_quote + 1, args_close)
        .into_iter()
        .map(|(s, e)| String::from_utf8_lossy(&code[s..e]).trim().to_owned())
        .filter(|a| !a.is_empty())
        .collect();
    let placeholders = placeholders(format);
    let field = sources.into_iter().find(|field| {
        let overridden = args
            .iter()
            .any(|a| a.split_once('=').is_some_and(|(n, _)| n.trim() == field));
        (placeholders.iter().any(|p| p == field) && !overridden)
            || args.iter().any(|a| refers_to(a, field, named))
    })?;
    Some(Leak {
        at: message_at,
        name: name.to_owned(),
        field,
    })
}

/// The names in the `{...}` placeholders of a format string (`{0:?}` gives `0`; `{}` gives
/// nothing, its argument is read instead).
fn placeholders(format: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = format;
    while let Some(at) = rest.find(['{', '}']) {
        let after = &rest[at + 1..];
        if after.starts_with(&rest[at..=at]) {
            rest = &after[1..];
            continue;
        }
        if rest.as_bytes()[at] == b'}' {
            rest = after;
            continue;
        }
        let Some(end) = after.find('}') else {
            break;
        };
        let name = after[..end].split(':').next().unwrap_or_default().trim();
        if !name.is_empty() {
            names.push(name.to_owned());
        }
        rest = &after[end + 1..];
    }
    names
}

/// Whether a format argument uses the field: `.0` of a tuple, `.source` or `source` of named
/// fields (and not `other.source` or `path::source`, another value's).
fn refers_to(arg: &str, field: &str, named: bool) -> bool {
    let bytes = arg.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let pattern = if named {
        field.to_owned()
    } else {
        format!(".{field}")
    };
    let mut from = 0;
    while let Some(p) = arg[from..].find(&pattern) {
        let at = from + p;
        from = at + 1;
        if bytes.get(at + pattern.len()).is_some_and(|&b| is_ident(b)) {
            continue;
        }
        // The start of the reference, with its leading `.` if it has one.
        let start = if named && at > 0 && bytes[at - 1] == b'.' {
            at - 1
        } else {
            at
        };
        let before = start.checked_sub(1).map(|b| bytes[b]);
        let whole = !(named && start == at && before.is_some_and(is_ident));
        let of_another = before.is_some_and(|b| {
            (start < at || !named) && (is_ident(b) || matches!(b, b')' | b']'))
                || (start == at && b == b':')
        });
        if whole && !of_another {
            return true;
        }
    }
    false
}

/// `text` with comments and the insides of string and character literals blanked (newlines
/// kept), so that brackets and quotes can be matched on what is left.
fn mask(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for b in &mut out[from..to.min(bytes.len())] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        if rest.starts_with(b"//") {
            let end = find(bytes, b"\n", i).unwrap_or(bytes.len());
            blank(&mut out, i, end);
            i = end;
        } else if rest.starts_with(b"/*") {
            let mut depth = 0;
            let mut j = i;
            while j < bytes.len() {
                if bytes[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if bytes[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if rest[0] == b'r'
            && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_'))
            && let Some(hashes) = rest[1..].iter().position(|&b| b != b'#')
            && rest[1 + hashes] == b'"'
        {
            // A raw string: `r"..."`, `r#"..."#`.
            let open = i + 1 + hashes;
            let mut closing = vec![b'"'];
            closing.extend(std::iter::repeat_n(b'#', hashes));
            let end = find(bytes, &closing, open + 1).unwrap_or(bytes.len());
            blank(&mut out, open + 1, end);
            i = end + closing.len();
        } else if rest[0] == b'"' {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, i + 1, j);
            i = j + 1;
        } else if rest[0] == b'\'' {
            // A character literal (`'{'`, `'\n'`), or a lifetime (`'static`), left as it is.
            let width = text[i + 1..].chars().next().map_or(1, char::len_utf8);
            let end = if rest.get(1) == Some(&b'\\') {
                find(bytes, b"'", i + 3)
            } else if rest.get(1 + width) == Some(&b'\'') {
                Some(i + 1 + width)
            } else {
                None
            };
            match end {
                Some(end) => {
                    blank(&mut out, i + 1, end);
                    i = end + 1;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The attribute `#[...]` from `at` to its `]` at `end`.
fn attr(code: &[u8], at: usize, end: usize) -> Attr {
    let start = skip_space(code, at + 2);
    let path = ident(code, start);
    let after = skip_space(code, start + path.len());
    let args = (after < end && code[after] == b'(')
        .then(|| matching(code, after).map(|close| (after, close)))
        .flatten();
    Attr { at, path, args }
}

/// The pieces between `from` and `to` separated by commas outside brackets (and outside
/// generics' angle brackets).
fn split_top(code: &[u8], from: usize, to: usize) -> Vec<(usize, usize)> {
    let mut pieces = Vec::new();
    let mut depth = 0i32;
    let mut start = from;
    for i in from..to {
        match code[i] {
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b'>' if i > 0 && code[i - 1] != b'-' && code[i - 1] != b'=' => depth -= 1,
            b',' if depth == 0 => {
                pieces.push((start, i));
                start = i + 1;
            }
            _ => {}
        }
    }
    if code[start..to].iter().any(|b| !b.is_ascii_whitespace()) {
        pieces.push((start, to));
    }
    pieces
}

/// The closing bracket of the one at `open` (in masked code).
fn matching(code: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, &b) in code.iter().enumerate().skip(open) {
        match b {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| from + p)
}

fn skip_space(code: &[u8], mut at: usize) -> usize {
    while at < code.len() && code[at].is_ascii_whitespace() {
        at += 1;
    }
    at
}

/// The identifier (or keyword) starting at `at`, empty if none.
fn ident(code: &[u8], at: usize) -> String {
    code[at.min(code.len())..]
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
        .map(|&b| char::from(b))
        .collect()
}

fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::problems;

    #[test]
    fn a_message_that_prints_its_source_is_found() {
        let sample = r##"
use std::io;
/// An error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// A step failed ("{source}" in a doc comment is not a message).
    #[error("cannot write {}: {action} failed: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        action: &'static str,
        source: io::Error,
    },
    #[error("bad key {0:?}")]
    Key(#[from] KeyError),
    #[error("PostgreSQL: {}", describe(.0))]
    Postgres(#[source] postgres::Error),
    #[error("rebuild failed")]
    Rebuild(#[source] io::Error),
}

#[derive(Debug, thiserror::Error)]
#[error("cannot lock {}: {cause}", path.display())]
pub struct LockError {
    path: std::path::PathBuf,
    #[source]
    cause: io::Error,
}
"##;
        let found = problems("src/sample.rs", sample);
        let lines: Vec<&str> = found
            .iter()
            .map(|p| p.split(" in its").next().unwrap_or_default())
            .collect();
        assert_eq!(
            lines,
            [
                "src/sample.rs:8: WriteError::Io prints `source`",
                "src/sample.rs:14: WriteError::Key prints `0`",
                "src/sample.rs:16: WriteError::Postgres prints `0`",
                "src/sample.rs:23: LockError prints `cause`",
            ]
        );
        assert!(found[0].contains("rename a field named `source`"));
    }

    #[test]
    fn a_cause_shown_once_passes() {
        let sample = r##"
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ReadError {
    /// Shown in the message, not the source.
    #[error("cannot read {}: {cause}", path.display())]
    Io { path: std::path::PathBuf, cause: std::io::Error },
    /// The source, not shown in the message.
    #[error("cannot read {}", path.display())]
    Open { path: std::path::PathBuf, source: std::io::Error },
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("snapshot payload is not usable: {0}")]
    Bits(BitsError),
    #[error("{kind} at {}; source {} is {len:?} bytes", "{source}", sources.len())]
    Other { kind: &'static str, len: Vec<u8>, sources: Vec<u8>, #[source] inner: Inner },
    #[error("'{' then {0}")]
    Char(u8, #[from] Inner),
    Unit,
}

#[derive(Debug, thiserror::Error)]
#[error("the map {0:?} failed")]
pub struct Wrapped(std::collections::HashMap<u8, u8>, #[source] Inner);
"##;
        assert_eq!(problems("src/sample.rs", sample), Vec::<String>::new());
    }
}
