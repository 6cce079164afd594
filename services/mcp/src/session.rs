//! Self-contained, tamper-proof legacy session ids.
//!
//! A 2025-era session id carries everything a replica needs to serve the
//! next request: the negotiated revision, the client capabilities the
//! agent declared in `initialize` (one byte, so any replica relays an
//! upstream's requests within what the agent can answer), issue and
//! expiry times and a random nonce, authenticated by HMAC-SHA256 under a key the replicas
//! share. The principal's binding (e.g. the grant id) is part of the MAC
//! input but not of the id, so an id minted for one grant is refused for
//! any other, and the id reveals nothing about the grant.
//!
//! Ending a session (HTTP DELETE) is the only server-side state: the
//! nonce goes into a [`SessionEnds`] store until the id would have expired
//! anyway.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::McpError;
use crate::relay::AgentCapabilities;
use crate::revision::Revision;

pub(crate) type HmacSha256 = Hmac<Sha256>;

/// 2: the declared client capabilities joined the payload.
const FORMAT_VERSION: u8 = 2;
const NONCE_LEN: usize = 16;
/// version, revision, capabilities, issued, expires, nonce.
const PAYLOAD_LEN: usize = 1 + 1 + 1 + 8 + 8 + NONCE_LEN;
const TAG_LEN: usize = 32;
const TOKEN_LEN: usize = PAYLOAD_LEN + TAG_LEN;
/// Separates this MAC from any other use of the same key.
const DOMAIN: &[u8] = b"corkboard-mcp/session/v1";

/// The secret shared by every replica that must accept each other's
/// session ids, with the keys it replaced: the newest signs, every listed
/// key verifies, so a key rotates without ending live sessions (list the
/// old one as previous until what it signed has expired). Never printed.
#[derive(Clone)]
pub struct SessionKey(Arc<[Arc<[u8]>]>);

impl SessionKey {
    /// At least 32 bytes of secret material.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<Self, McpError> {
        Ok(Self(vec![checked(bytes.into())?].into()))
    }

    /// This key, still accepting what `previous` keys signed (each also at
    /// least 32 bytes), newest first after this one.
    pub fn with_previous<I, B>(self, previous: I) -> Result<Self, McpError>
    where
        I: IntoIterator<Item = B>,
        B: Into<Vec<u8>>,
    {
        let mut keys: Vec<Arc<[u8]>> = self.0.iter().cloned().collect();
        for bytes in previous {
            keys.push(checked(bytes.into())?);
        }
        Ok(Self(keys.into()))
    }

    /// A random key, for a single process that shares ids with no replica.
    pub fn generate() -> Self {
        Self(vec![Arc::from(rand::random::<[u8; 32]>().to_vec())].into())
    }

    /// How many keys verify (the signing key and the previous ones).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Never true: there is always a signing key.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// HMAC accepts keys of any length, so this is `None` only if the
    /// crate's contract changed; callers then refuse rather than panic.
    pub(crate) fn mac(&self) -> Option<HmacSha256> {
        HmacSha256::new_from_slice(self.0.first()?).ok()
    }

    /// A MAC under each key that verifies, the signing key first.
    pub(crate) fn macs(&self) -> impl Iterator<Item = HmacSha256> + '_ {
        self.0
            .iter()
            .filter_map(|key| HmacSha256::new_from_slice(key).ok())
    }

    /// HMAC-SHA256 of `domain` then each part (length-prefixed, so no two
    /// lists of parts collide) under the signing key, for other crates'
    /// records that replicas must trust (the token registry's grants).
    pub fn sign(&self, domain: &[u8], parts: &[&[u8]]) -> Option<[u8; 32]> {
        let mut mac = self.mac()?;
        feed(&mut mac, domain, parts);
        Some(mac.finalize().into_bytes().into())
    }

    /// Whether `tag` is [`Self::sign`] of `domain` and `parts` under any
    /// listed key, compared in constant time.
    pub fn verify(&self, domain: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
        self.macs().any(|mut mac| {
            feed(&mut mac, domain, parts);
            mac.verify_slice(tag).is_ok()
        })
    }
}

fn checked(bytes: Vec<u8>) -> Result<Arc<[u8]>, McpError> {
    if bytes.len() < 32 {
        return Err(McpError::SessionKeyTooShort(bytes.len()));
    }
    Ok(bytes.into())
}

fn feed(mac: &mut HmacSha256, domain: &[u8], parts: &[&[u8]]) {
    mac.update(domain);
    for part in parts {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part);
    }
}

impl fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionKey(<redacted>)")
    }
}

/// The random part of a session id; what [`SessionEnds`] remembers.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionNonce(pub [u8; NONCE_LEN]);

impl fmt::Debug for SessionNonce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionNonce(..)")
    }
}

/// Why a presented session id was not accepted (all answered with 404).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionRejection {
    /// Not a session id this server mints.
    Malformed,
    /// Wrong MAC: tampered, minted under another key, or for another
    /// principal.
    Forged,
    Expired,
    /// Ended by DELETE.
    Ended,
}

/// What a verified session id says.
#[derive(Debug, Clone, Copy)]
pub struct SessionClaims {
    pub revision: Revision,
    /// What the agent declared it can answer (relayed requests).
    pub capabilities: AgentCapabilities,
    pub nonce: SessionNonce,
    /// Unix seconds.
    pub expires_at: u64,
}

pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Mints and verifies session ids.
#[derive(Debug, Clone)]
pub struct SessionCodec {
    key: SessionKey,
    ttl: Duration,
}

impl SessionCodec {
    pub fn new(key: SessionKey, ttl: Duration) -> Self {
        Self { key, ttl }
    }

    fn tag(&self, payload: &[u8], binding: &str) -> Option<HmacSha256> {
        let mut mac = self.key.mac()?;
        Self::feed(&mut mac, payload, binding);
        Some(mac)
    }

    fn feed(mac: &mut HmacSha256, payload: &[u8], binding: &str) {
        mac.update(DOMAIN);
        mac.update(payload);
        // Length-prefixed so no (payload, binding) pair can collide.
        mac.update(&(binding.len() as u64).to_be_bytes());
        mac.update(binding.as_bytes());
    }

    /// A new id for `revision`, bound to `binding`: base64url, so visible
    /// ASCII only (transports spec).
    pub fn mint(
        &self,
        revision: Revision,
        capabilities: AgentCapabilities,
        binding: &str,
        now: u64,
    ) -> Option<String> {
        let expires = now.saturating_add(self.ttl.as_secs());
        let mut token = [0u8; TOKEN_LEN];
        token[0] = FORMAT_VERSION;
        token[1] = revision.code();
        token[2] = capabilities.to_bits();
        token[3..11].copy_from_slice(&now.to_be_bytes());
        token[11..19].copy_from_slice(&expires.to_be_bytes());
        token[19..PAYLOAD_LEN].copy_from_slice(&rand::random::<[u8; NONCE_LEN]>());
        let tag = self
            .tag(&token[..PAYLOAD_LEN], binding)?
            .finalize()
            .into_bytes();
        token[PAYLOAD_LEN..].copy_from_slice(&tag);
        Some(URL_SAFE_NO_PAD.encode(token))
    }

    /// Verifies an id presented by the principal with `binding`.
    pub fn open(
        &self,
        id: &str,
        binding: &str,
        now: u64,
    ) -> Result<SessionClaims, SessionRejection> {
        // Reject by length before decoding: ids are a fixed size.
        if id.len() != (TOKEN_LEN * 4).div_ceil(3) {
            return Err(SessionRejection::Malformed);
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(id)
            .map_err(|_| SessionRejection::Malformed)?;
        if bytes.len() != TOKEN_LEN || bytes[0] != FORMAT_VERSION {
            return Err(SessionRejection::Malformed);
        }
        let (payload, tag) = bytes.split_at(PAYLOAD_LEN);
        // Any listed key: ids minted before a rotation stay good.
        let verified = self.key.macs().any(|mut mac| {
            Self::feed(&mut mac, payload, binding);
            mac.verify_slice(tag).is_ok()
        });
        if !verified {
            return Err(SessionRejection::Forged);
        }
        let revision = Revision::from_code(payload[1]).ok_or(SessionRejection::Malformed)?;
        let mut expires = [0u8; 8];
        expires.copy_from_slice(&payload[11..19]);
        let expires_at = u64::from_be_bytes(expires);
        if now >= expires_at {
            return Err(SessionRejection::Expired);
        }
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&payload[19..PAYLOAD_LEN]);
        Ok(SessionClaims {
            revision,
            capabilities: AgentCapabilities::from_bits(payload[2]),
            nonce: SessionNonce(nonce),
            expires_at,
        })
    }
}

/// Where ended sessions are remembered until they would have expired.
/// The in-memory default is per process; a shared implementation (e.g.
/// Redis with a TTL per nonce) makes a DELETE seen by one replica
/// effective on all.
#[async_trait]
pub trait SessionEnds: Send + Sync + 'static {
    /// Records that the session with `nonce` ended; `expires_at` (Unix
    /// seconds) is when it may be forgotten.
    async fn end(&self, nonce: SessionNonce, expires_at: u64) -> Result<(), McpError>;

    async fn is_ended(&self, nonce: &SessionNonce) -> Result<bool, McpError>;
}

/// Bounded in-process [`SessionEnds`].
#[derive(Debug)]
pub struct MemorySessionEnds {
    ended: Mutex<HashMap<SessionNonce, u64>>,
    capacity: usize,
}

impl MemorySessionEnds {
    pub const DEFAULT_CAPACITY: usize = 65_536;

    pub fn new(capacity: usize) -> Self {
        Self {
            ended: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
        }
    }

    pub fn len(&self) -> usize {
        self.ended.lock().map(|m| m.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for MemorySessionEnds {
    fn default() -> Self {
        Self::new(Self::DEFAULT_CAPACITY)
    }
}

#[async_trait]
impl SessionEnds for MemorySessionEnds {
    async fn end(&self, nonce: SessionNonce, expires_at: u64) -> Result<(), McpError> {
        let mut ended = self
            .ended
            .lock()
            .map_err(|_| McpError::SessionStore("session-end table poisoned".into()))?;
        if ended.len() >= self.capacity && !ended.contains_key(&nonce) {
            let now = now_secs();
            ended.retain(|_, expiry| *expiry > now);
            if ended.len() >= self.capacity {
                // Still full of live entries: forget the one closest to its
                // natural expiry, the least harmful to resurrect.
                if let Some(soonest) = ended.iter().min_by_key(|(_, e)| **e).map(|(n, _)| *n) {
                    ended.remove(&soonest);
                }
            }
        }
        ended.insert(nonce, expires_at);
        Ok(())
    }

    async fn is_ended(&self, nonce: &SessionNonce) -> Result<bool, McpError> {
        let ended = self
            .ended
            .lock()
            .map_err(|_| McpError::SessionStore("session-end table poisoned".into()))?;
        Ok(ended.contains_key(nonce))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> SessionKey {
        SessionKey::new(vec![byte; 32]).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn round_trip_and_refusals() {
        let codec = SessionCodec::new(key(1), Duration::from_secs(60));
        let id = codec
            .mint(
                Revision::V2025_06_18,
                AgentCapabilities::from_bits(0b10101),
                "grant-a",
                1_000,
            )
            .unwrap_or_default();
        assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)));
        let claims = codec
            .open(&id, "grant-a", 1_001)
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(claims.revision, Revision::V2025_06_18);
        assert_eq!(claims.capabilities.to_bits(), 0b10101);
        assert_eq!(claims.expires_at, 1_060);
        assert_eq!(
            codec.open(&id, "grant-b", 1_001).err(),
            Some(SessionRejection::Forged)
        );
        assert_eq!(
            codec.open(&id, "grant-a", 1_060).err(),
            Some(SessionRejection::Expired)
        );
        let other = SessionCodec::new(key(2), Duration::from_secs(60));
        assert_eq!(
            other.open(&id, "grant-a", 1_001).err(),
            Some(SessionRejection::Forged)
        );
        assert_eq!(
            codec.open("abc", "grant-a", 1_001).err(),
            Some(SessionRejection::Malformed)
        );
        let mut tampered = id.into_bytes();
        tampered[5] = if tampered[5] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap_or_default();
        assert!(codec.open(&tampered, "grant-a", 1_001).is_err());
    }

    #[test]
    fn a_rotated_key_signs_new_ids_and_still_accepts_the_previous_keys_ids() {
        let old = SessionCodec::new(key(1), Duration::from_secs(60));
        let before = old
            .mint(
                Revision::V2025_06_18,
                AgentCapabilities::from_bits(0),
                "g",
                1_000,
            )
            .unwrap_or_default();
        let rotated = key(2)
            .with_previous([vec![1u8; 32]])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rotated.len(), 2);
        let codec = SessionCodec::new(rotated, Duration::from_secs(60));
        codec
            .open(&before, "g", 1_001)
            .unwrap_or_else(|e| panic!("previous key's id refused: {e:?}"));
        let after = codec
            .mint(
                Revision::V2025_06_18,
                AgentCapabilities::from_bits(0),
                "g",
                1_000,
            )
            .unwrap_or_default();
        // Signed with the newest: a replica that only has the new key
        // accepts it, one that only has the old key does not.
        SessionCodec::new(key(2), Duration::from_secs(60))
            .open(&after, "g", 1_001)
            .unwrap_or_else(|e| panic!("new id not signed with the newest key: {e:?}"));
        assert_eq!(
            old.open(&after, "g", 1_001).err(),
            Some(SessionRejection::Forged)
        );
        assert!(matches!(
            key(2).with_previous([vec![0u8; 31]]),
            Err(McpError::SessionKeyTooShort(31))
        ));
    }

    #[test]
    fn signed_parts_verify_under_any_listed_key_and_nothing_else() {
        let old = key(1);
        let tag = old.sign(b"d", &[b"a", b"bc"]).unwrap_or_default();
        let rotated = key(2)
            .with_previous([vec![1u8; 32]])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(rotated.verify(b"d", &[b"a", b"bc"], &tag));
        assert!(
            !rotated.verify(b"d", &[b"ab", b"c"], &tag),
            "parts are framed"
        );
        assert!(
            !rotated.verify(b"e", &[b"a", b"bc"], &tag),
            "domains differ"
        );
        assert!(!key(3).verify(b"d", &[b"a", b"bc"], &tag));
        let new = rotated.sign(b"d", &[b"x"]).unwrap_or_default();
        assert!(key(2).verify(b"d", &[b"x"], &new));
        assert!(!old.verify(b"d", &[b"x"], &new));
    }

    #[test]
    fn short_keys_refused() {
        assert!(matches!(
            SessionKey::new(vec![0; 31]),
            Err(McpError::SessionKeyTooShort(31))
        ));
        assert_eq!(format!("{:?}", key(7)), "SessionKey(<redacted>)");
    }
}
