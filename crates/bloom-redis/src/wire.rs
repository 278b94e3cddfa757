//! The Redis protocol as the filter speaks it: commands encoded (RESP) straight into one
//! reusable buffer, with no allocation per key, and the cluster slot of a key.

/// A buffer of encoded commands, each remembered by where it starts, so that a command can be
/// sent again (to another node, after a redirect) without encoding it again.
#[derive(Default)]
pub(crate) struct Commands {
    bytes: Vec<u8>,
    starts: Vec<usize>,
}

impl Commands {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// A buffer with room for `commands` commands of `bytes` bytes in all.
    pub(crate) fn with_capacity(commands: usize, bytes: usize) -> Self {
        Self {
            bytes: Vec::with_capacity(bytes),
            starts: Vec::with_capacity(commands),
        }
    }

    /// Begins a command of `args` arguments (the command name counts as one).
    pub(crate) fn begin(&mut self, args: usize) -> &mut Self {
        self.starts.push(self.bytes.len());
        self.bytes.push(b'*');
        push_decimal(&mut self.bytes, args as u64);
        self.bytes.extend_from_slice(b"\r\n");
        self
    }

    /// One argument.
    pub(crate) fn arg(&mut self, arg: &[u8]) -> &mut Self {
        let len = arg.len();
        self.bytes.reserve(len + 26);
        if len < 100 {
            // A key's usual length: its digits without a division loop.
            let (tens, ones) = ((len / 10) as u8, (len % 10) as u8);
            if tens > 0 {
                self.bytes
                    .extend_from_slice(&[b'$', b'0' + tens, b'0' + ones, b'\r', b'\n']);
            } else {
                self.bytes
                    .extend_from_slice(&[b'$', b'0' + ones, b'\r', b'\n']);
            }
        } else {
            self.bytes.push(b'$');
            push_decimal(&mut self.bytes, len as u64);
            self.bytes.extend_from_slice(b"\r\n");
        }
        self.bytes.extend_from_slice(arg);
        self.bytes.extend_from_slice(b"\r\n");
        self
    }

    /// One argument, a number in decimal.
    pub(crate) fn num(&mut self, n: u64) -> &mut Self {
        let mut digits = [0u8; 20];
        let text = decimal(n, &mut digits);
        self.arg(text)
    }

    /// How many commands the buffer holds.
    pub(crate) fn len(&self) -> usize {
        self.starts.len()
    }

    /// The bytes of command `i`.
    pub(crate) fn get(&self, i: usize) -> &[u8] {
        let start = self.starts.get(i).copied().unwrap_or(self.bytes.len());
        let end = self.starts.get(i + 1).copied().unwrap_or(self.bytes.len());
        self.bytes.get(start..end).unwrap_or_default()
    }

    /// Appends a whole command given as arguments (for the occasional command).
    pub(crate) fn push(&mut self, args: &[&[u8]]) {
        self.begin(args.len());
        for arg in args {
            self.arg(arg);
        }
    }
}

fn decimal(mut n: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &digits[at..]
}

fn push_decimal(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    out.extend_from_slice(decimal(n, &mut digits));
}

/// The Redis Cluster hash slot of `key`: CRC16 (XMODEM) of the key, or of its hash tag (the
/// part between the first `{` and the next `}`, when not empty), modulo 16384.
pub(crate) fn slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = key.get(open + 1..)?;
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| rest.get(..close)).flatten()
        })
        .unwrap_or(key);
    crc16(tagged) % 16384
}

fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_resp_arrays_of_bulk_strings() {
        let mut commands = Commands::new();
        commands.begin(3).arg(b"SET").arg(b"k").num(1234);
        commands.push(&[b"PING"]);
        assert_eq!(commands.len(), 2);
        assert_eq!(
            commands.get(0),
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\n1234\r\n"
        );
        assert_eq!(commands.get(1), b"*1\r\n$4\r\nPING\r\n");
        assert_eq!(commands.get(2), b"");
        let mut lengths = Commands::new();
        lengths
            .begin(4)
            .arg(b"")
            .arg(&[b'x'; 9])
            .arg(&[b'y'; 10])
            .arg(&[b'z'; 100]);
        let expected = format!(
            "*4\r\n$0\r\n\r\n$9\r\n{}\r\n$10\r\n{}\r\n$100\r\n{}\r\n",
            "x".repeat(9),
            "y".repeat(10),
            "z".repeat(100)
        );
        assert_eq!(lengths.get(0), expected.as_bytes());
        let mut zero = Commands::new();
        zero.begin(1).num(0);
        assert_eq!(zero.get(0), b"*1\r\n$1\r\n0\r\n");
        let mut max = Commands::new();
        max.begin(1).num(u64::MAX);
        assert_eq!(max.get(0), b"*1\r\n$20\r\n18446744073709551615\r\n");
    }

    /// Vectors from the Redis Cluster specification and `CLUSTER KEYSLOT`.
    #[test]
    fn slots_follow_the_cluster_specification() {
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
        assert_eq!(slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % 16384);
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
        assert_eq!(slot(b"foo{bar}{zap}"), slot(b"bar"));
        assert_eq!(slot(b"bloom:{seen:3}"), slot(b"seen:3"));
    }
}
