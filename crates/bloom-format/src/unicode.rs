//! [`UnicodeVersion`]: the version of the Unicode tables a text key encoding used.

/// A Unicode version, as recorded next to a text key encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UnicodeVersion {
    /// Major version.
    pub major: u8,
    /// Minor version.
    pub minor: u8,
    /// Update version.
    pub update: u8,
}

impl UnicodeVersion {
    /// The version `major.minor.update`.
    #[must_use]
    pub const fn new(major: u8, minor: u8, update: u8) -> Self {
        Self {
            major,
            minor,
            update,
        }
    }

    pub(crate) fn from_bytes([major, minor, update]: [u8; 3]) -> Option<Self> {
        let v = Self::new(major, minor, update);
        (v != Self::new(0, 0, 0)).then_some(v)
    }

    pub(crate) fn to_bytes(version: Option<Self>) -> [u8; 3] {
        version.map_or([0; 3], |v| [v.major, v.minor, v.update])
    }
}

impl std::fmt::Display for UnicodeVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.update)
    }
}
