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
/// session ids. Never printed.
#[derive(Clone)]
pub struct SessionKey(Arc<[u8]>);

impl SessionKey {
    /// At least 32 bytes of secret material.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<Self, McpError> {
        let bytes = bytes.into();
        if bytes.len() < 32 {
            return Err(McpError::SessionKeyTooShort(bytes.len()));
        }
        Ok(Self(bytes.into()))
    }

    /// A random key, for a single process that shares ids with no replica.
    pub fn generate() -> Self {
        Self(rand::random::<[u8; 32]>().to_vec().into())
    }

    /// HMAC accepts keys of any length, so this is `None` only if the
    /// crate's contract changed; callers then refuse rather than panic.
    pub(crate) fn mac(&self) -> Option<HmacSha256> {
        HmacSha256::new_from_slice(&self.0).ok()
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
        mac.update(DOMAIN);
        mac.update(payload);
        // Length-prefixed so no (payload, binding) pair can collide.
        mac.update(&(binding.len() as u64).to_be_bytes());
        mac.update(binding.as_bytes());
        Some(mac)
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
        self.tag(payload, binding)
            .ok_or(SessionRejection::Forged)?
            .verify_slice(tag)
            .map_err(|_| SessionRejection::Forged)?;
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
    fn short_keys_refused() {
        assert!(matches!(
            SessionKey::new(vec![0; 31]),
            Err(McpError::SessionKeyTooShort(31))
        ));
        assert_eq!(format!("{:?}", key(7)), "SessionKey(<redacted>)");
    }
}
