//! Run tokens: `cbr_` + 43 base64url characters (256 random bits).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use sha2::{Digest, Sha256};
use std::fmt;

/// Prefix that makes a leaked token recognisable to secret scanners.
pub const TOKEN_PREFIX: &str = "cbr_";

/// A run token. Shown once to whoever creates the grant; never logged
/// (its `Debug` is redacted) and never stored (only [`TokenHash`] is).
#[derive(Clone, PartialEq, Eq)]
pub struct RunToken(String);

impl RunToken {
    pub fn generate() -> Self {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        Self(format!("{TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes)))
    }

    /// Accepts what a client presented, without checking it is known.
    /// Anything not shaped like a token is refused before any lookup.
    pub fn from_presented(text: &str) -> Option<Self> {
        let body = text.strip_prefix(TOKEN_PREFIX)?;
        (body.len() == 43
            && body
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
        .then(|| Self(text.to_owned()))
    }

    /// The secret itself, for the one response that hands it out.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn hash(&self) -> TokenHash {
        TokenHash(Sha256::digest(self.0.as_bytes()).into())
    }
}

impl fmt::Debug for RunToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RunToken(<redacted>)")
    }
}

/// SHA-256 of a run token: the only form in which tokens are stored.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenHash([u8; 32]);

impl TokenHash {
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    pub fn from_hex(text: &str) -> Option<Self> {
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(text, &mut bytes).ok()?;
        Some(Self(bytes))
    }
}

impl fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A prefix is enough to correlate in diagnostics.
        write!(f, "TokenHash({}…)", &self.to_hex()[..8])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_prefixed_random_and_redacted() {
        let a = RunToken::generate();
        let b = RunToken::generate();
        assert_ne!(a, b);
        assert!(a.expose().starts_with("cbr_"));
        assert_eq!(a.expose().len(), 4 + 43);
        assert!(!format!("{a:?}").contains(&a.expose()[4..]));
        assert_eq!(RunToken::from_presented(a.expose()), Some(a.clone()));
        assert_eq!(TokenHash::from_hex(&a.hash().to_hex()), Some(a.hash()));
        assert!(RunToken::from_presented("cbr_short").is_none());
        assert!(RunToken::from_presented("Bearer x").is_none());
    }
}
