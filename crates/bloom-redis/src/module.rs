//! The `bloom` Redis module (the crate `bloom-redis-module`): whether a filter uses it, and
//! what its replies mean. Its commands do on one shard, inside the server, what a `BITFIELD`
//! of the plain path does (`docs/format.md`, "The Redis module"): the same bits of the same
//! keys, the markers checked first, so a filter answers the same whichever path wrote it.

use std::str::FromStr;

use bloom_redis_protocol::module::{MIN_COUNTED_VERSION, MIN_VERSION, NAME};
use redis::Value;

use crate::error::RedisFilterError;

/// Whether filters use the `bloom` Redis module's commands (`BLOOM.MADD`, `BLOOM.MEXISTS`,
/// `BLOOM.RESERVE`), which hash keys inside the server, instead of plain `BITFIELD`s. Both
/// write the same bits in the same keys: a filter written one way answers identically the
/// other way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ModuleUse {
    /// The module's commands when every node reached when the filter was opened or created
    /// lists the module (`MODULE LIST`, version 1 or later), plain commands otherwise. A
    /// shard found later on a node without it (a reshard, a failover to a server without
    /// it, an ACL that refuses the module's commands) is sent plain commands, and the
    /// handle uses plain commands from then on.
    #[default]
    Auto,
    /// Plain commands only.
    Never,
    /// The module's commands only: a filter whose nodes do not list the module is refused
    /// ([`RedisFilterError::ModuleMissing`]), and so is a shard whose node refuses them.
    Required,
}

impl FromStr for ModuleUse {
    type Err = String;

    /// `auto`, `never` or `required`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "never" => Ok(Self::Never),
            "required" => Ok(Self::Required),
            other => Err(format!(
                "{other:?} is not a module use: auto, never or required"
            )),
        }
    }
}

/// The version of the module `bloom` in a `MODULE LIST` reply: an array of modules, each an
/// array (RESP2) or a map (RESP3) of `name`, `ver`, `path`, `args`.
pub(crate) fn version_in(reply: &Value) -> Option<i64> {
    let Value::Array(modules) = reply else {
        return None;
    };
    modules.iter().find_map(|module| {
        let pairs: Vec<(&Value, &Value)> = match module {
            Value::Array(items) => items
                .chunks(2)
                .filter_map(|p| Some((p.first()?, p.get(1)?)))
                .collect(),
            Value::Map(items) => items.iter().map(|(k, v)| (k, v)).collect(),
            _ => return None,
        };
        let field = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| text(k) == Some(name))
                .map(|&(_, v)| v)
        };
        (field("name").and_then(text) == Some(NAME))
            .then(|| match field("ver") {
                Some(Value::Int(v)) => Some(*v),
                _ => None,
            })
            .flatten()
    })
}

/// A reply's text, if it is one.
fn text(value: &Value) -> Option<&str> {
    match value {
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok(),
        Value::SimpleString(s) => Some(s),
        _ => None,
    }
}

/// Whether a filter uses the module, given the module version of every node it reached.
pub(crate) fn decide(
    policy: ModuleUse,
    versions: impl IntoIterator<Item = Option<i64>>,
    counted: bool,
) -> Result<bool, RedisFilterError> {
    let least = if counted {
        MIN_COUNTED_VERSION
    } else {
        MIN_VERSION
    };
    let mut versions = versions.into_iter().peekable();
    let everywhere = versions.peek().is_some() && versions.all(|v| v.is_some_and(|v| v >= least));
    match policy {
        ModuleUse::Never => Ok(false),
        ModuleUse::Auto => Ok(everywhere),
        ModuleUse::Required if everywhere => Ok(true),
        ModuleUse::Required => Err(RedisFilterError::ModuleMissing),
    }
}

/// Whether an error reply to a module command says the node cannot run it: it does not know
/// it (the module is not loaded there), or the user may not run it on that key (an ACL
/// without `+bloom.…`, or one that allows the key read-only: Redis 7.0 takes every module
/// command for one that writes its key). The shard gets the plain command instead, which
/// Redis checks on its own.
pub(crate) fn refused_here(value: &Value) -> bool {
    let Value::ServerError(e) = value else {
        return false;
    };
    let detail = e.details().unwrap_or("").to_ascii_lowercase();
    match e.code() {
        "ERR" => detail.starts_with("unknown command"),
        "NOPERM" => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_uses_parse() {
        assert_eq!("auto".parse(), Ok(ModuleUse::Auto));
        assert_eq!("never".parse(), Ok(ModuleUse::Never));
        assert_eq!("required".parse(), Ok(ModuleUse::Required));
        assert!("Auto".parse::<ModuleUse>().is_err());
    }

    #[test]
    fn the_module_is_found_in_module_list_replies() {
        let reply = |wire: &str| redis::parse_redis_value(wire.as_bytes()).unwrap();
        let entry = |name: &str, ver: i64| {
            format!(
                "*8\r\n$4\r\nname\r\n${}\r\n{name}\r\n$3\r\nver\r\n:{ver}\r\n$4\r\npath\r\n$1\r\n/\r\n$4\r\nargs\r\n*0\r\n",
                name.len()
            )
        };
        let both = format!("*2\r\n{}{}", entry("bf", 20820), entry("bloom", 1));
        assert_eq!(version_in(&reply(&both)), Some(1));
        let other = format!("*1\r\n{}", entry("bf", 20820));
        assert_eq!(version_in(&reply(&other)), None);
        assert_eq!(version_in(&reply("*0\r\n")), None);
        assert_eq!(version_in(&reply("-NOPERM no\r\n")), None);
        assert!(decide(ModuleUse::Auto, [Some(1), Some(2)], false).unwrap());
        assert!(!decide(ModuleUse::Auto, [Some(1), None], false).unwrap());
        assert!(!decide(ModuleUse::Auto, [], false).unwrap());
        assert!(!decide(ModuleUse::Never, [Some(1)], false).unwrap());
        assert!(matches!(
            decide(ModuleUse::Required, [Some(0)], false),
            Err(RedisFilterError::ModuleMissing)
        ));
        // Counted shards need version 2: a version 1 module would take them for lost.
        assert!(decide(ModuleUse::Auto, [Some(2), Some(3)], true).unwrap());
        assert!(!decide(ModuleUse::Auto, [Some(2), Some(1)], true).unwrap());
        assert!(matches!(
            decide(ModuleUse::Required, [Some(1)], true),
            Err(RedisFilterError::ModuleMissing)
        ));
    }

    #[test]
    fn only_refusals_of_the_command_fall_back() {
        let reply = |wire: &str| redis::parse_redis_value(wire.as_bytes()).unwrap();
        let unknown = "-ERR unknown command 'BLOOM.MADD', with args beginning with: \r\n";
        assert!(refused_here(&reply(unknown)));
        let acl = "-NOPERM User x has no permissions to run the 'bloom.madd' command\r\n";
        assert!(refused_here(&reply(acl)));
        // A key the user may only read: Redis 7.0 refuses the module's read-only command,
        // whose key it takes as written; BITFIELD_RO is then checked on its own.
        let keys = "-NOPERM No permissions to access a key\r\n";
        assert!(refused_here(&reply(keys)));
        assert!(!refused_here(&reply(
            "-ERR bloom: key 3 belongs to shard 2\r\n"
        )));
        assert!(!refused_here(&reply(
            "-WRONGTYPE Operation against a key\r\n"
        )));
        assert!(!refused_here(&reply(":1\r\n")));
    }
}
