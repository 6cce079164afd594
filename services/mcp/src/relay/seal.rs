//! Sealing what a relay hands the agent and must get back unchanged: the
//! 2026-07-28 `requestState` of an `input_required` result, and the
//! JSON-RPC id of a server-to-client request relayed to a 2025 agent.
//!
//! What this module guarantees:
//!
//! - **Integrity.** Both are HMAC-SHA256 (the replicas' shared
//!   [`SessionKey`], under a domain string of their own, so a session id
//!   can never pass for either) over the whole payload, verified in
//!   constant time; a state and an id are told apart by a kind byte inside
//!   the MAC, so one cannot be presented as the other.
//! - **Binding.** A sealed state is bound to the call that caused it: run,
//!   grant, upstream, method, tool (or prompt/resource) name and a digest
//!   of the arguments ([`CallBinding`], [`ArgumentDigest`]); a relayed id
//!   to the run and grant ([`RunBinding`]). Presented by another run or
//!   for another call it is refused as [`SealRejection::Foreign`], so a
//!   state one run obtained cannot be replayed by another, although the
//!   upstream sees one credential for all of them.
//! - **Expiry.** Each carries its expiry; past it, [`SealRejection::Expired`].
//! - **Self-contained.** The state carries the upstream's own
//!   `requestState` (echoed to it exactly), the [`Expectation`] of every
//!   pending input request, the round number and, for a 2025 upstream,
//!   the upstream request id behind each input request; the id carries the
//!   upstream's name, its request id (restored byte for byte) and the
//!   request's [`Expectation`]. Any replica holding the key resumes the
//!   relay and checks the answer; nothing is kept per relay.
//! - **Bounded.** A state holds at most [`MAX_STATE_CHARS`], an id
//!   [`MAX_ID_CHARS`] (encoded), and a call at most [`MAX_ROUNDS`] rounds of
//!   input requests; over a bound sealing refuses.
//!
//! Not guaranteed here: single use. Each sealed value carries a random
//! nonce ([`OpenedState::nonce`], [`OpenedId::nonce`]) and its expiry; the
//! relay records a nonce as used when it acts on the value (in the
//! replicas' shared used-once record, `corkboard_grants::UsedOnce`), and
//! a second use is refused as [`SealRejection::Replayed`]. The
//! contents are signed, not encrypted: the agent may read the upstream's
//! state and the expectations (it saw the input requests anyway), never
//! the binding (a digest).

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::Mac;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use super::Expectation;
use crate::session::{HmacSha256, SessionKey};
use crate::wire::RpcError;

const FORMAT_VERSION: u8 = 1;
const KIND_STATE: u8 = 1;
const KIND_ID: u8 = 2;
const NONCE_LEN: usize = 16;
const DIGEST_LEN: usize = 32;
const TAG_LEN: usize = 32;
/// version, kind, expiry, nonce, binding digest.
const HEADER_LEN: usize = 1 + 1 + 8 + NONCE_LEN + DIGEST_LEN;
/// Separates these MACs from sessions' (same key).
const DOMAIN: &[u8] = b"corkboard-mcp/relay/v1";
const BINDING_DOMAIN: &[u8] = b"corkboard-mcp/relay-binding/v1";

/// The longest sealed `requestState`, in characters: it travels back in
/// the agent's retry, whose body is bounded (1 MiB by default).
pub const MAX_STATE_CHARS: usize = 256 * 1024;
/// The longest relayed JSON-RPC id, in characters.
pub const MAX_ID_CHARS: usize = 16 * 1024;
/// Rounds of input requests one call may go through (the SDKs cap theirs
/// at about 10).
pub const MAX_ROUNDS: u8 = 10;
/// How long a sealed state or relayed id stays valid by default: one leg
/// of a relay (the TypeScript SDK's legacy shim waits 10 minutes).
pub const DEFAULT_TTL: Duration = Duration::from_secs(600);
/// Every relayed id starts with this, so a response can be told to be an
/// answer to a relayed request before it is opened.
pub const RELAYED_ID_PREFIX: &str = "relay.";

/// Why a sealed value was not accepted, or could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SealRejection {
    /// Not a value this gateway seals (wrong length, encoding, version or
    /// kind).
    Malformed,
    /// Wrong MAC: altered, or sealed under another key.
    Forged,
    /// Genuine, but sealed for another run, grant, upstream or call.
    Foreign,
    Expired,
    /// Genuine and current, but already used once (a replay): each state
    /// and each relayed answer is acted on at most once.
    Replayed,
    /// Sealing: the value would exceed its bound ([`MAX_STATE_CHARS`],
    /// [`MAX_ID_CHARS`]).
    TooLarge,
    /// Sealing: the call is past [`MAX_ROUNDS`] rounds of input requests.
    TooManyRounds,
}

impl SealRejection {
    pub fn name(self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::Forged => "forged",
            Self::Foreign => "foreign",
            Self::Expired => "expired",
            Self::Replayed => "replayed",
            Self::TooLarge => "too_large",
            Self::TooManyRounds => "too_many_rounds",
        }
    }

    /// The `-32602` answer to the agent that presented a refused value
    /// (`what`: "requestState", "response id"), saying what to do.
    pub fn rpc_error(self, what: &str) -> RpcError {
        let why = match self {
            Self::Malformed => "is not one this gateway issued".to_owned(),
            Self::Forged => "was altered or issued by another gateway".to_owned(),
            Self::Foreign => {
                "was issued for another run or another call; retry with the state of this call"
                    .to_owned()
            }
            Self::Expired => "has expired; make the call again".to_owned(),
            Self::Replayed => {
                "was already used (each is single-use, on every replica); make the call again"
                    .to_owned()
            }
            Self::TooLarge => format!(
                "would exceed its size limit ({MAX_STATE_CHARS} characters for a requestState, {MAX_ID_CHARS} for a relayed id)"
            ),
            Self::TooManyRounds => format!(
                "would start round {} of input requests; the limit is {MAX_ROUNDS}",
                MAX_ROUNDS + 1
            ),
        };
        RpcError::invalid_params(format!("Invalid params: {what} {why}"))
    }
}

/// SHA-256 of a call's arguments in canonical form (object keys sorted,
/// compact), so an agent's retry with the same arguments matches however
/// its JSON library orders keys. Absent arguments digest as `{}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArgumentDigest(pub [u8; DIGEST_LEN]);

impl ArgumentDigest {
    /// `None` when `arguments` is not JSON.
    pub fn of(arguments: Option<&RawValue>) -> Option<Self> {
        let value = match arguments {
            None => Value::Object(serde_json::Map::new()),
            Some(raw) => serde_json::from_str(raw.get()).ok()?,
        };
        let mut text = Vec::new();
        canonical(&value, &mut text);
        Some(Self(Sha256::digest(&text).into()))
    }
}

/// Writes `value` with object keys sorted, whatever `serde_json`'s map
/// order is in this build (a `preserve_order` feature elsewhere in the
/// dependency graph would change it).
fn canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(members) => {
            let mut keys: Vec<&String> = members.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(Value::String(key.clone()).to_string().as_bytes());
                out.push(b':');
                canonical(&members[key.as_str()], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical(item, out);
            }
            out.push(b']');
        }
        scalar => out.extend_from_slice(scalar.to_string().as_bytes()),
    }
}

/// The call a sealed `requestState` belongs to.
#[derive(Debug, Clone, Copy)]
pub struct CallBinding<'a> {
    pub run: &'a str,
    pub grant: &'a str,
    /// The upstream's registered name.
    pub upstream: &'a str,
    /// `tools/call`, `prompts/get` or `resources/read`.
    pub method: &'a str,
    /// The tool (prompt, resource) as the agent named it.
    pub name: &'a str,
    pub arguments: ArgumentDigest,
}

impl CallBinding<'_> {
    fn digest(&self) -> [u8; DIGEST_LEN] {
        binding_digest(&[
            self.run.as_bytes(),
            self.grant.as_bytes(),
            self.upstream.as_bytes(),
            self.method.as_bytes(),
            self.name.as_bytes(),
            &self.arguments.0,
        ])
    }
}

/// The run a relayed id belongs to.
#[derive(Debug, Clone, Copy)]
pub struct RunBinding<'a> {
    pub run: &'a str,
    pub grant: &'a str,
}

impl RunBinding<'_> {
    fn digest(&self) -> [u8; DIGEST_LEN] {
        binding_digest(&[self.run.as_bytes(), self.grant.as_bytes()])
    }
}

/// Length-prefixed, so no two field lists collide.
fn binding_digest(fields: &[&[u8]]) -> [u8; DIGEST_LEN] {
    let mut hash = Sha256::new();
    hash.update(BINDING_DOMAIN);
    for field in fields {
        hash.update((field.len() as u64).to_be_bytes());
        hash.update(field);
    }
    hash.finalize().into()
}

/// What a sealed `requestState` carries.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RequestState {
    /// The upstream's own `requestState`, echoed to it exactly on retry.
    #[serde(rename = "u", default, skip_serializing_if = "Option::is_none")]
    pub upstream_state: Option<String>,
    /// Each pending input request's key and what its answer must satisfy
    /// ([`super::check_input_responses`]).
    #[serde(rename = "e", default)]
    pub expected: BTreeMap<String, Expectation>,
    /// Rounds of input requests so far in this call, this one included.
    #[serde(rename = "r")]
    pub round: u8,
    /// For a 2025 upstream relayed to a 2026-07-28 agent: each input
    /// request key's upstream request id (exactly as the upstream sent
    /// it), so the replica that receives the retry can answer the upstream
    /// under its own id.
    #[serde(rename = "p", default, skip_serializing_if = "BTreeMap::is_empty")]
    pub upstream_ids: BTreeMap<String, Box<RawValue>>,
}

impl PartialEq for RequestState {
    fn eq(&self, other: &Self) -> bool {
        self.upstream_state == other.upstream_state
            && self.expected == other.expected
            && self.round == other.round
            && self.upstream_ids.len() == other.upstream_ids.len()
            && self
                .upstream_ids
                .iter()
                .zip(&other.upstream_ids)
                .all(|((k, v), (l, w))| k == l && v.get() == w.get())
    }
}

/// A verified sealed state.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenedState {
    pub state: RequestState,
    /// Random per sealing: what a single-use check records.
    pub nonce: [u8; NONCE_LEN],
    /// Unix seconds.
    pub expires_at: u64,
}

/// A verified relayed id.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenedId {
    pub request: RelayedRequest,
    /// Random per minting: what a single-use check records.
    pub nonce: [u8; NONCE_LEN],
    /// Unix seconds.
    pub expires_at: u64,
}

/// A server-to-client request relayed to a 2025 agent under a gateway id.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RelayedRequest {
    /// The upstream's registered name.
    #[serde(rename = "u")]
    pub upstream: String,
    /// The upstream's own request id, exactly as it sent it.
    #[serde(rename = "i")]
    pub upstream_id: Box<RawValue>,
    #[serde(rename = "e")]
    pub expected: Expectation,
    /// The revision the gateway speaks with the upstream, so the replica
    /// that receives the answer checks it for both eras.
    #[serde(rename = "v", default, skip_serializing_if = "Option::is_none")]
    pub upstream_revision: Option<String>,
    /// The gateway's 2025 session with the upstream that sent the request
    /// (its `Mcp-Session-Id`), so any replica delivers the answer in that
    /// session. Signed, not encrypted: the agent can read it, but it is of
    /// no use without the upstream's credential, which the agent never
    /// sees.
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    pub upstream_session: Option<String>,
}

impl PartialEq for RelayedRequest {
    fn eq(&self, other: &Self) -> bool {
        self.upstream == other.upstream
            && self.upstream_id.get() == other.upstream_id.get()
            && self.expected == other.expected
            && self.upstream_revision == other.upstream_revision
            && self.upstream_session == other.upstream_session
    }
}

/// Seals and opens request states and relayed ids. Replicas sharing the
/// key accept each other's.
#[derive(Debug, Clone)]
pub struct RelaySealer {
    key: SessionKey,
    ttl: Duration,
}

impl RelaySealer {
    pub fn new(key: SessionKey, ttl: Duration) -> Self {
        Self { key, ttl }
    }

    /// Seals `state` for the call `binding` at `now` (Unix seconds).
    pub fn seal_state(
        &self,
        binding: &CallBinding<'_>,
        state: &RequestState,
        now: u64,
    ) -> Result<String, SealRejection> {
        if state.round > MAX_ROUNDS {
            return Err(SealRejection::TooManyRounds);
        }
        let body = serde_json::to_vec(state).map_err(|_| SealRejection::Malformed)?;
        self.seal(
            KIND_STATE,
            binding.digest(),
            &body,
            now,
            MAX_STATE_CHARS,
            "",
        )
    }

    /// Opens a `requestState` an agent echoed for the call `binding`.
    pub fn open_state(
        &self,
        sealed: &str,
        binding: &CallBinding<'_>,
        now: u64,
    ) -> Result<OpenedState, SealRejection> {
        let opened = self.open(
            KIND_STATE,
            sealed,
            binding.digest(),
            now,
            MAX_STATE_CHARS,
            "",
        )?;
        let state = serde_json::from_slice(&opened.body).map_err(|_| SealRejection::Malformed)?;
        Ok(OpenedState {
            state,
            nonce: opened.nonce,
            expires_at: opened.expires_at,
        })
    }

    /// The id under which `request` goes to the agent of `binding`: a
    /// JSON string starting with [`RELAYED_ID_PREFIX`].
    pub fn mint_id(
        &self,
        binding: &RunBinding<'_>,
        request: &RelayedRequest,
        now: u64,
    ) -> Result<String, SealRejection> {
        let body = serde_json::to_vec(request).map_err(|_| SealRejection::Malformed)?;
        self.seal(
            KIND_ID,
            binding.digest(),
            &body,
            now,
            MAX_ID_CHARS,
            RELAYED_ID_PREFIX,
        )
    }

    /// Opens the id of a response the agent of `binding` sent: which
    /// upstream request it answers, and what the answer must satisfy.
    pub fn open_id(
        &self,
        id: &str,
        binding: &RunBinding<'_>,
        now: u64,
    ) -> Result<OpenedId, SealRejection> {
        let opened = self.open(
            KIND_ID,
            id,
            binding.digest(),
            now,
            MAX_ID_CHARS,
            RELAYED_ID_PREFIX,
        )?;
        let request = serde_json::from_slice(&opened.body).map_err(|_| SealRejection::Malformed)?;
        Ok(OpenedId {
            request,
            nonce: opened.nonce,
            expires_at: opened.expires_at,
        })
    }

    fn mac(&self, signed: &[u8]) -> Result<HmacSha256, SealRejection> {
        let mut mac = self.key.mac().ok_or(SealRejection::Forged)?;
        mac.update(DOMAIN);
        mac.update(signed);
        Ok(mac)
    }

    fn seal(
        &self,
        kind: u8,
        binding: [u8; DIGEST_LEN],
        body: &[u8],
        now: u64,
        max_chars: usize,
        prefix: &str,
    ) -> Result<String, SealRejection> {
        let len = HEADER_LEN + body.len() + TAG_LEN;
        if prefix.len() + (len * 4).div_ceil(3) > max_chars {
            return Err(SealRejection::TooLarge);
        }
        let mut bytes = Vec::with_capacity(len);
        bytes.push(FORMAT_VERSION);
        bytes.push(kind);
        bytes.extend_from_slice(&now.saturating_add(self.ttl.as_secs()).to_be_bytes());
        bytes.extend_from_slice(&rand::random::<[u8; NONCE_LEN]>());
        bytes.extend_from_slice(&binding);
        bytes.extend_from_slice(body);
        let tag = self.mac(&bytes)?.finalize().into_bytes();
        bytes.extend_from_slice(&tag);
        Ok(format!("{prefix}{}", URL_SAFE_NO_PAD.encode(bytes)))
    }

    fn open(
        &self,
        kind: u8,
        sealed: &str,
        binding: [u8; DIGEST_LEN],
        now: u64,
        max_chars: usize,
        prefix: &str,
    ) -> Result<Opened, SealRejection> {
        // Bounded before decoding: the value is the agent's input.
        if sealed.len() > max_chars {
            return Err(SealRejection::Malformed);
        }
        let encoded = sealed
            .strip_prefix(prefix)
            .ok_or(SealRejection::Malformed)?;
        let bytes = URL_SAFE_NO_PAD
            .decode(encoded)
            .map_err(|_| SealRejection::Malformed)?;
        if bytes.len() < HEADER_LEN + TAG_LEN || bytes[0] != FORMAT_VERSION {
            return Err(SealRejection::Malformed);
        }
        let (signed, tag) = bytes.split_at(bytes.len() - TAG_LEN);
        // Constant time (hmac's verify uses `subtle`), under any listed
        // key: what was sealed before a key rotation still opens.
        let verified = self.key.macs().any(|mut mac| {
            mac.update(DOMAIN);
            mac.update(signed);
            mac.verify_slice(tag).is_ok()
        });
        if !verified {
            return Err(SealRejection::Forged);
        }
        if signed[1] != kind {
            return Err(SealRejection::Malformed);
        }
        // A plain comparison is fine here: the MAC already held, and the
        // digest is in the value the agent holds, so timing reveals nothing.
        if signed[10 + NONCE_LEN..HEADER_LEN] != binding {
            return Err(SealRejection::Foreign);
        }
        let mut expiry = [0u8; 8];
        expiry.copy_from_slice(&signed[2..10]);
        let expires_at = u64::from_be_bytes(expiry);
        if now >= expires_at {
            return Err(SealRejection::Expired);
        }
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&signed[10..10 + NONCE_LEN]);
        Ok(Opened {
            body: signed[HEADER_LEN..].to_vec(),
            nonce,
            expires_at,
        })
    }
}

struct Opened {
    body: Vec<u8>,
    nonce: [u8; NONCE_LEN],
    expires_at: u64,
}
