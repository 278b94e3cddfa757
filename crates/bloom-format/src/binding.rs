//! What ties a snapshot to one primary store's history: the dataset generation, the store's
//! identity and the digest of its history up to that generation.
//!
//! bloom-format only carries these values; `bloom-store` creates and compares them.

use std::fmt;

use crate::hex::hex;

/// A point in a primary store's history: the number of committed changes it has seen.
///
/// A snapshot records the generation its bits fully cover. Generations only grow, by one for
/// every committed new key; 0 is the empty store (and the value for filters not tied to a
/// store).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DatasetGeneration(u64);

impl DatasetGeneration {
    /// The empty store; also the generation of filters not tied to a store.
    pub const ZERO: Self = Self(0);

    /// The generation with this number.
    #[must_use]
    pub const fn new(value: u64) -> Self {
        Self(value)
    }

    /// The number.
    #[must_use]
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The next generation, or `None` at `u64::MAX`.
    #[must_use]
    pub const fn next(self) -> Option<Self> {
        match self.0.checked_add(1) {
            Some(v) => Some(Self(v)),
            None => None,
        }
    }
}

impl From<u64> for DatasetGeneration {
    fn from(value: u64) -> Self {
        Self(value)
    }
}

impl From<DatasetGeneration> for u64 {
    fn from(generation: DatasetGeneration) -> Self {
        generation.0
    }
}

impl fmt::Display for DatasetGeneration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

macro_rules! opaque_bytes {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name([u8; 16]);

        impl $name {
            /// The length in bytes.
            pub const LEN: usize = 16;

            /// The value with these bytes.
            #[must_use]
            pub const fn from_bytes(bytes: [u8; 16]) -> Self {
                Self(bytes)
            }

            /// The bytes.
            #[must_use]
            pub const fn to_bytes(self) -> [u8; 16] {
                self.0
            }

            /// Whether every byte is zero.
            #[must_use]
            pub fn is_zero(&self) -> bool {
                self.0 == [0; 16]
            }
        }

        impl fmt::Display for $name {
            /// 32 lower-case hex digits.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&hex(&self.0))
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self)
            }
        }
    };
}

opaque_bytes! {
    /// The identity of a primary store: 16 random bytes created with the store and kept in
    /// it. A database restored from a backup keeps its identity; a recreated one gets a new
    /// one. Never all zero.
    StoreIdentity
}

opaque_bytes! {
    /// A digest of a primary store's history up to a generation: every committed change, in
    /// order. Two stores agree on it at a generation only if their histories up to it are the
    /// same (bloom-store defines how it is computed).
    HistoryDigest
}

/// The store a snapshot's bits were taken from, and the point of its history they cover.
///
/// A store-bound reader trusts the snapshot only if the store has this identity and the same
/// history digest at the snapshot's dataset generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StoreBinding {
    /// The store's identity; never all zero.
    pub identity: StoreIdentity,
    /// The store's history digest at the snapshot's dataset generation.
    pub history: HistoryDigest,
}

impl StoreBinding {
    /// A binding to `identity` at the history point `history`.
    #[must_use]
    pub const fn new(identity: StoreIdentity, history: HistoryDigest) -> Self {
        Self { identity, history }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_hex_and_debug_names_the_type() {
        let id = StoreIdentity::from_bytes([0xab; 16]);
        assert_eq!(id.to_string(), "ab".repeat(16));
        assert_eq!(
            format!("{id:?}"),
            format!("StoreIdentity({})", "ab".repeat(16))
        );
        assert!(HistoryDigest::from_bytes([0; 16]).is_zero());
        assert!(!id.is_zero());
        assert_eq!(
            DatasetGeneration::new(7).next(),
            Some(DatasetGeneration::new(8))
        );
        assert_eq!(DatasetGeneration::new(u64::MAX).next(), None);
        assert_eq!(DatasetGeneration::from(3).to_string(), "3");
    }
}
