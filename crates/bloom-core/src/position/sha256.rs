//! SHA-256's compression from a saved state: a salted digest resumes after the salt's block.

/// SHA-256's initial hash value (FIPS 180-4, 5.3.3).
pub(super) const SHA256_H0: [u32; 8] = [
    0x6a09_e667,
    0xbb67_ae85,
    0x3c6e_f372,
    0xa54f_f53a,
    0x510e_527f,
    0x9b05_688c,
    0x1f83_d9ab,
    0x5be0_cd19,
];

/// Finishes SHA-256 over `key`, starting from `state` after `absorbed` bytes (0, or 64 for the
/// salt block), and returns the final state words: the digest is their big-endian bytes.
///
/// This is `Sha256::digest` without its streaming buffer and output byte array: the key's
/// full blocks go straight to sha2's compression function (hardware SHA where the CPU has
/// it), and the padding (FIPS 180-4, 5.1.1) is built on the stack. Positions are then read
/// from the state words in registers. Tests compare it with `Sha256::digest` for every length
/// across the padding boundaries, salted and unsalted.
#[inline]
pub(super) fn sha256_state(mut state: [u32; 8], absorbed: u64, key: &[u8]) -> [u32; 8] {
    let (blocks, tail) = key.as_chunks::<64>();
    if !blocks.is_empty() {
        sha2::block_api::compress256(&mut state, blocks);
    }
    let bit_len = (absorbed + key.len() as u64).wrapping_mul(8);
    #[expect(
        clippy::big_endian_bytes,
        reason = "SHA-256 appends the message length big-endian"
    )]
    let length = bit_len.to_be_bytes();
    if tail.len() < 56 {
        // The common case for short keys: tail, 0x80 and the length fit in one block.
        let mut block = [0u8; 64];
        block[..tail.len()].copy_from_slice(tail);
        block[tail.len()] = 0x80;
        block[56..].copy_from_slice(&length);
        sha2::block_api::compress256(&mut state, std::slice::from_ref(&block));
    } else {
        let mut last = [[0u8; 64]; 2];
        let buffer = last.as_flattened_mut();
        buffer[..tail.len()].copy_from_slice(tail);
        buffer[tail.len()] = 0x80;
        buffer[120..].copy_from_slice(&length);
        sha2::block_api::compress256(&mut state, &last);
    }
    state
}
