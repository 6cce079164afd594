//! SHA-256 digests as the lowercase hex the domain stores and shows
//! (arguments, fingerprints, pinned definitions, approvals' arguments,
//! new webhook secrets).
//!
//! One function so that every such digest is written the same way, and
//! written fast: it runs on every tool call (the audit record's
//! `arguments_hash`). Written here rather than with the `hex` crate, which
//! the rest of the code still uses: `hex::encode` builds its string a
//! `char` at a time, a third of the whole hash's instructions on a small
//! argument object in the release build (counted with SHA-256 in
//! software), and `hex::encode_to_slice`, an iterator chain instantiated
//! in this crate, cost twice that in the unoptimised build the CI's
//! instruction guard counts (`services/bench/FINDINGS.md`). A nibble table
//! does neither.

use sha2::{Digest, Sha256};

/// Bytes of a SHA-256 digest.
const DIGEST: usize = 32;

/// The lowercase hex of SHA-256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex_of(&Sha256::digest(bytes).into())
}

/// The lowercase hex of a finished SHA-256 `digest`.
pub(crate) fn hex_of(digest: &[u8; DIGEST]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = Vec::with_capacity(2 * DIGEST);
    for byte in digest {
        text.push(DIGITS[usize::from(byte >> 4)]);
        text.push(DIGITS[usize::from(byte & 0x0f)]);
    }
    // Cannot fail: every byte is an ASCII digit or letter.
    String::from_utf8(text).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_the_lowercase_hex_of_the_digest() {
        // SHA-256 of "abc", FIPS 180-2 appendix B.1.
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        for input in [&b""[..], b"{\"id\":\"cb-1\"}", &[0xff; 200]] {
            assert_eq!(sha256_hex(input), hex::encode(Sha256::digest(input)));
        }
    }
}
