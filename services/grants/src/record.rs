//! Grant records as the Redis registry keeps them: signed by the control
//! plane with a key Redis never sees, so that write access to Redis can
//! deny service but never grant access.
//!
//! A record is `s1.<tag>.<grant JSON>`, the tag an HMAC-SHA256 (the
//! replicas' shared [`SessionKey`], under a domain string of its own, so
//! no session id or sealed relay value can pass for a record) over the
//! token hash the record is stored under and the JSON. A record copied
//! under another token's hash, or with any byte of the grant changed (its
//! tenant, its capabilities, its expiry), does not verify and resolves as
//! an unknown token; so does an unsigned record an older version wrote
//! (the read-through registry then rewrites it, signed, from the ledger).
//! Signed with the newest key, verified under every listed one, so the
//! key rotates like the session key.

use crate::token::TokenHash;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use corkboard_mcp::SessionKey;

/// Separates a record's MAC from every other use of the session key.
const DOMAIN: &[u8] = b"corkboard-grants/registry-record/v1";
const PREFIX: &str = "s1.";

/// `json` signed for the record of `hash`; `None` only if HMAC refused
/// the key (see [`SessionKey::sign`]).
pub(crate) fn seal(key: &SessionKey, hash: &TokenHash, json: &str) -> Option<String> {
    let tag = key.sign(DOMAIN, &[hash.to_hex().as_bytes(), json.as_bytes()])?;
    Some(format!("{PREFIX}{}.{json}", URL_SAFE_NO_PAD.encode(tag)))
}

/// The grant JSON of `stored` if it is a record signed for `hash` under a
/// listed key; `None` for anything else.
pub(crate) fn open<'a>(key: &SessionKey, hash: &TokenHash, stored: &'a str) -> Option<&'a str> {
    let (tag, json) = stored.strip_prefix(PREFIX)?.split_once('.')?;
    // A tag is 32 bytes: bound the decoding of what Redis handed us.
    if tag.len() != 43 {
        return None;
    }
    let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
    key.verify(DOMAIN, &[hash.to_hex().as_bytes(), json.as_bytes()], &tag)
        .then_some(json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::RunToken;

    fn key(byte: u8) -> SessionKey {
        SessionKey::new(vec![byte; 32]).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_record_opens_only_under_its_own_hash_unchanged_and_with_a_listed_key() {
        let (hash, other) = (RunToken::generate().hash(), RunToken::generate().hash());
        let json = r#"{"tenant":"acme"}"#;
        let stored = seal(&key(1), &hash, json).unwrap_or_default();
        assert_eq!(open(&key(1), &hash, &stored), Some(json));
        assert_eq!(
            open(&key(1), &other, &stored),
            None,
            "copied under another hash"
        );
        let changed = stored.replace("acme", "evil");
        assert_eq!(open(&key(1), &hash, &changed), None, "tenant changed");
        assert_eq!(open(&key(2), &hash, &stored), None, "another key");
        assert_eq!(open(&key(1), &hash, json), None, "unsigned");
        let rotated = key(2)
            .with_previous([vec![1u8; 32]])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(open(&rotated, &hash, &stored), Some(json), "previous key");
        let fresh = seal(&rotated, &hash, json).unwrap_or_default();
        assert_eq!(
            open(&key(2), &hash, &fresh),
            Some(json),
            "signed with the newest"
        );
    }
}
