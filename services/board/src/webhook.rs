//! Webhooks: endpoints a tenant registers, the events they subscribe to,
//! the durable outbox of deliveries, and how a delivery is signed.
//!
//! Deliveries are written to the outbox by the store as part of the board
//! write that causes them (see [`WebhookStore`] for each store's
//! guarantee), claimed by a delivery worker under a lease, and retried with
//! exponential backoff ([`retry_delay`]) until [`limits::ATTEMPTS_MAX`]:
//! at-least-once, so receivers dedupe by the delivery id.

use crate::error::ValidationError;
use crate::ids::{DeliveryId, TenantId, WebhookId};
use crate::issue::Issue;
use crate::timestamp::Timestamp;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::time::Duration;

/// The webhook limits (README "Limits").
pub mod limits {
    use std::time::Duration;

    /// Endpoints one tenant may register.
    pub const ENDPOINTS_PER_TENANT_MAX: usize = 10;
    /// Longest endpoint URL, in bytes.
    pub const URL_MAX: usize = 2_048;
    /// Secret length bounds, in bytes.
    pub const SECRET_MIN: usize = 16;
    pub const SECRET_MAX: usize = 256;
    /// Attempts per delivery before it is given up (`dead`).
    pub const ATTEMPTS_MAX: u32 = 10;
    /// First retry delay; doubles per attempt up to [`RETRY_MAX`].
    pub const RETRY_FIRST: Duration = Duration::from_secs(1);
    pub const RETRY_MAX: Duration = Duration::from_secs(10 * 60);
    /// Undelivered (pending) deliveries one tenant may have; events past it
    /// are not queued and the endpoints say so (`dropped`).
    pub const PENDING_PER_TENANT_MAX: u64 = 10_000;
    /// Largest delivery body, in bytes (bodies carry an issue's summary,
    /// never its body or comments, so they stay far below it).
    pub const PAYLOAD_MAX: usize = 64 * 1024;
}

macro_rules! webhook_events {
    ($($(#[$doc:meta])* $variant:ident => $name:literal,)*) => {
        /// What an endpoint can subscribe to. A new event is one line here.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum WebhookEvent {
            $($(#[$doc])* $variant,)*
        }

        impl WebhookEvent {
            pub const ALL: &'static [WebhookEvent] = &[$(Self::$variant,)*];

            /// The wire name (`issue.created`, ...).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }
        }
    };
}

webhook_events! {
    /// An issue was created (by a run or the board API).
    IssueCreated => "issue.created",
    /// An issue's fields changed (comments are `issue.commented`).
    IssueUpdated => "issue.updated",
    /// An issue moved to `done` or `closed` (it is `issue.updated` too).
    IssueClosed => "issue.closed",
    /// A comment was added.
    IssueCommented => "issue.commented",
    /// A run claimed an issue (`claim_issue`, `claim_next`; not a repeat
    /// or renewal of its own claim).
    IssueClaimed => "issue.claimed",
    /// A claim's lease lapsed (or its grant expired) without a release:
    /// the issue is ready again unless something else holds it back
    /// (noticed by the control plane's delivery worker, within a second
    /// or so).
    IssueClaimExpired => "issue.claim_expired",
    /// A run's grant was issued.
    RunStarted => "run.started",
    /// A run's grant was revoked (its end; expiry is not an event).
    RunEnded => "run.ended",
    /// An upstream tool is new or its definition changed: it is pending,
    /// hidden from runs until a tenant admin approves it.
    UpstreamToolChanged => "upstream.tool_changed",
    /// A run's call needs a person's approval (an approval item was made).
    ApprovalRequested => "approval.requested",
    /// A person approved or denied a call.
    ApprovalDecided => "approval.decided",
}

impl WebhookEvent {
    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        Self::ALL
            .iter()
            .copied()
            .find(|e| e.as_str() == text)
            .ok_or_else(|| {
                let known: Vec<&str> = Self::ALL.iter().map(|e| e.as_str()).collect();
                ValidationError::new(
                    "events",
                    format!(
                        "unknown event {text:?}; expected one of {}",
                        known.join(", ")
                    ),
                )
            })
    }
}

impl fmt::Display for WebhookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for WebhookEvent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for WebhookEvent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self::parse(&String::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

/// A non-empty set of events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct WebhookEvents(BTreeSet<WebhookEvent>);

impl WebhookEvents {
    pub fn parse_list<I, S>(items: I) -> Result<Self, ValidationError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let set = items
            .into_iter()
            .map(|s| WebhookEvent::parse(s.as_ref().trim()))
            .collect::<Result<BTreeSet<_>, _>>()?;
        if set.is_empty() {
            return Err(ValidationError::new(
                "events",
                "at least one event is required",
            ));
        }
        Ok(Self(set))
    }

    pub fn contains(&self, event: WebhookEvent) -> bool {
        self.0.contains(&event)
    }

    pub fn iter(&self) -> impl Iterator<Item = WebhookEvent> + '_ {
        self.0.iter().copied()
    }

    pub fn to_csv(&self) -> String {
        self.0
            .iter()
            .map(|e| e.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// An endpoint URL: `http` or `https`, a host, no credentials, at most
/// [`limits::URL_MAX`] bytes. Which hosts are allowed is the operator's
/// setting, checked where endpoints are registered and again before each
/// delivery, not here.
#[derive(Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct WebhookUrl(String);

impl WebhookUrl {
    pub fn parse(text: impl Into<String>) -> Result<Self, ValidationError> {
        let text: String = text.into();
        let bad = |reason: &str| ValidationError::new("url", reason.to_owned());
        if text.len() > limits::URL_MAX {
            return Err(bad("longer than 2048 bytes"));
        }
        let rest = text
            .strip_prefix("https://")
            .or_else(|| text.strip_prefix("http://"))
            .ok_or_else(|| bad("must start with http:// or https://"))?;
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if authority.contains('@') {
            return Err(bad(
                "must not carry credentials (user:password@); sign deliveries with the secret instead",
            ));
        }
        if authority.is_empty() || authority.starts_with(':') {
            return Err(bad("has no host"));
        }
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("must not contain spaces or control characters"));
        }
        Ok(Self(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The host (IPv6 in brackets), lowercased, without the port.
    pub fn host(&self) -> String {
        let rest = self.0.split_once("://").map_or("", |(_, r)| r);
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let host = if authority.starts_with('[') {
            authority
                .split_once(']')
                .map_or(authority, |(h, _)| h)
                .to_owned()
                + "]"
        } else {
            authority.split(':').next().unwrap_or("").to_owned()
        };
        host.to_ascii_lowercase()
    }

    /// What logs and the admin API show: scheme, host, port and path, never
    /// the query string or fragment (they often carry tokens).
    pub fn redacted(&self) -> String {
        let end = self.0.find(['?', '#']).unwrap_or(self.0.len());
        self.0[..end].to_owned()
    }
}

impl fmt::Debug for WebhookUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WebhookUrl({:?})", self.redacted())
    }
}

/// The signing secret of an endpoint: never printed, never returned after
/// the endpoint is created.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret(String);

impl WebhookSecret {
    pub fn parse(text: impl Into<String>) -> Result<Self, ValidationError> {
        let text: String = text.into();
        if !(limits::SECRET_MIN..=limits::SECRET_MAX).contains(&text.len()) {
            return Err(ValidationError::new(
                "secret",
                format!(
                    "must be {} to {} bytes",
                    limits::SECRET_MIN,
                    limits::SECRET_MAX
                ),
            ));
        }
        Ok(Self(text))
    }

    /// A fresh random secret (`whsec_` and 256 bits, hex).
    pub fn generate() -> Self {
        let a = u128::from(ulid::Ulid::new());
        let b = u128::from(ulid::Ulid::new());
        // ULIDs carry 80 random bits each; hashing two with the time
        // spreads them over the whole digest.
        let digest = crate::digest::sha256_hex(format!("{a:x}{b:x}").as_bytes());
        Self(format!("whsec_{digest}"))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Marks a secret sealed at rest (see [`Self::from_sealed_bytes`]).
    pub const SEALED_PREFIX: &'static str = "sealed1:";

    /// A secret as a store keeps it: in clear ([`Self::parse`]'s limits;
    /// endpoints registered before sealing, or by a server without a key)
    /// or sealed (`sealed1:` and hex). The stores read back whatever they
    /// were given; only the control plane seals and opens (with the
    /// upstream key), since the domain does no cryptography of its own.
    pub fn from_stored(text: impl Into<String>) -> Result<Self, ValidationError> {
        let text: String = text.into();
        match text.strip_prefix(Self::SEALED_PREFIX) {
            Some(hex_part) => {
                // Version, nonce and tag around at most SECRET_MAX bytes.
                let max = 2 * (limits::SECRET_MAX + 64);
                if hex_part.is_empty() || hex_part.len() > max || hex::decode(hex_part).is_err() {
                    return Err(ValidationError::new("secret", "not a sealed secret"));
                }
                Ok(Self(text))
            }
            None => Self::parse(text),
        }
    }

    /// The stored form of a sealed secret's bytes.
    pub fn from_sealed_bytes(bytes: &[u8]) -> Self {
        Self(format!("{}{}", Self::SEALED_PREFIX, hex::encode(bytes)))
    }

    /// The sealed bytes, when this is a sealed secret (none: in clear).
    pub fn sealed_bytes(&self) -> Option<Vec<u8>> {
        self.0
            .strip_prefix(Self::SEALED_PREFIX)
            .and_then(|h| hex::decode(h).ok())
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret(<redacted>)")
    }
}

/// A request to register an endpoint.
#[derive(Debug, Clone)]
pub struct NewWebhook {
    pub url: WebhookUrl,
    pub events: WebhookEvents,
    pub secret: WebhookSecret,
}

/// A registered endpoint (without its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Webhook {
    pub id: WebhookId,
    pub tenant: TenantId,
    #[serde(serialize_with = "redacted_url")]
    pub url: WebhookUrl,
    pub events: WebhookEvents,
    pub created_at: Timestamp,
}

fn redacted_url<S: Serializer>(url: &WebhookUrl, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&url.redacted())
}

/// How an endpoint's deliveries are going.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WebhookStatus {
    /// Deliveries not yet delivered nor given up.
    pub pending: u64,
    pub delivered: u64,
    /// Given up after [`limits::ATTEMPTS_MAX`] attempts.
    pub dead: u64,
    /// Events not queued because the tenant's outbox was full.
    pub dropped: u64,
    pub last_attempt_at: Option<Timestamp>,
    /// The HTTP status of the last attempt, when there was an answer.
    pub last_status: Option<u16>,
    /// Why the last attempt failed, if it did.
    pub last_error: Option<String>,
}

/// An endpoint with its status, as the admin API lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WebhookWithStatus {
    #[serde(flatten)]
    pub webhook: Webhook,
    pub status: WebhookStatus,
}

/// A delivery claimed by a worker: what to send, where, signed with what.
#[derive(Debug, Clone)]
pub struct ClaimedDelivery {
    pub id: DeliveryId,
    pub tenant: TenantId,
    pub webhook: WebhookId,
    pub event: WebhookEvent,
    pub url: WebhookUrl,
    pub secret: WebhookSecret,
    /// The JSON body, exactly as it is to be sent and signed.
    pub body: String,
    /// Attempts made before this one.
    pub attempts: u32,
}

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptOutcome {
    pub at: Timestamp,
    /// The receiver's HTTP status, when it answered.
    pub status: Option<u16>,
    /// Why it failed (no answer, a non-2xx status); `None` for success.
    pub error: Option<String>,
}

impl AttemptOutcome {
    pub fn succeeded(&self) -> bool {
        self.error.is_none()
    }
}

/// How long to wait after the `attempts`-th failed attempt (1-based), or
/// `None` once the delivery has had [`limits::ATTEMPTS_MAX`] attempts.
/// 1 s, 2 s, 4 s, ... capped at 10 min: about 8.5 min in all.
pub fn retry_delay(attempts: u32) -> Option<Duration> {
    if attempts >= limits::ATTEMPTS_MAX {
        return None;
    }
    let factor = 1u32 << attempts.saturating_sub(1).min(20);
    Some((limits::RETRY_FIRST * factor).min(limits::RETRY_MAX))
}

/// How long an endpoint whose attempts failed `failures` times in a row
/// (timeouts, error statuses, refusals) is left alone before its next
/// delivery is claimed: the delivery backoff ([`retry_delay`]), staying at
/// [`limits::RETRY_MAX`] past the last attempt's. Only a success ends it,
/// so an endpoint that never answers holds its in-flight slots a shrinking
/// share of the time, however many deliveries wait for it.
pub fn endpoint_pause(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    retry_delay(failures).unwrap_or(limits::RETRY_MAX)
}

/// A due delivery a store found while claiming: whose it is and since when
/// it is due, what [`fair_share`] orders by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueDelivery {
    pub id: DeliveryId,
    pub tenant: TenantId,
    pub webhook: WebhookId,
    pub due_at: Timestamp,
}

/// Which of `due` one claim takes, at most `limit`, in the order to send
/// them: round robin across tenants (the tenant waiting longest first),
/// and within a tenant round robin across its endpoints (each endpoint's
/// oldest first), so one endpoint's backlog, however long, takes one turn
/// per round like any other tenant's single delivery. `due` holds, per
/// endpoint, no more than its free in-flight slots (the store's cap).
pub fn fair_share(mut due: Vec<DueDelivery>, limit: usize) -> Vec<DueDelivery> {
    /// One tenant's due deliveries, per endpoint.
    struct Tenant {
        endpoints: Vec<(WebhookId, Vec<DueDelivery>)>,
    }
    due.sort_by(|a, b| (a.due_at, &a.id).cmp(&(b.due_at, &b.id)));
    // Tenants and their endpoints in order of their oldest due delivery.
    let mut tenants: Vec<Tenant> = Vec::new();
    let mut places: HashMap<TenantId, usize> = HashMap::new();
    for delivery in due {
        let at = *places.entry(delivery.tenant.clone()).or_insert_with(|| {
            tenants.push(Tenant {
                endpoints: Vec::new(),
            });
            tenants.len() - 1
        });
        let endpoints = &mut tenants[at].endpoints;
        match endpoints.iter_mut().find(|(w, _)| *w == delivery.webhook) {
            Some((_, queue)) => queue.push(delivery),
            None => endpoints.push((delivery.webhook.clone(), vec![delivery])),
        }
    }
    let tenants: Vec<Vec<DueDelivery>> = tenants
        .into_iter()
        .map(|t| round_robin(t.endpoints.into_iter().map(|(_, q)| q).collect()))
        .collect();
    let mut taken = round_robin(tenants);
    taken.truncate(limit);
    taken
}

/// The first of each queue, then the second of each, and so on.
fn round_robin<T>(queues: Vec<Vec<T>>) -> Vec<T> {
    let total = queues.iter().map(Vec::len).sum();
    let mut iters: Vec<_> = queues.into_iter().map(Vec::into_iter).collect();
    let mut out = Vec::with_capacity(total);
    while out.len() < total {
        out.extend(iters.iter_mut().filter_map(Iterator::next));
    }
    out
}

/// The `Corkboard-Signature` header value: `t=<unix seconds>,v1=<hex
/// HMAC-SHA256 of "<t>.<body>" under the endpoint's secret>`.
pub fn signature(secret: &WebhookSecret, timestamp_secs: i64, body: &str) -> String {
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(secret.expose().as_bytes())
        .expect("HMAC takes keys of any length");
    mac.update(timestamp_secs.to_string().as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    format!(
        "t={timestamp_secs},v1={}",
        hex::encode(mac.finalize().into_bytes())
    )
}

/// The body of a delivery: the event, when, the tenant, and what it is
/// about (an issue's summary, never its body or comments; or a run).
pub fn event_body(
    event: WebhookEvent,
    tenant: &TenantId,
    at: Timestamp,
    data: serde_json::Value,
) -> String {
    serde_json::json!({
        "event": event,
        "tenant": tenant,
        "at": at,
        "data": data,
    })
    .to_string()
}

/// An issue as deliveries describe it.
/// The data of an `upstream.tool_changed` event: the tool, its upstream,
/// the definition hashes (seen, and approved if any) and which pinned
/// fields changed; the definition itself is read through the admin API.
pub fn tool_changed_data(pin: &crate::ToolPin) -> serde_json::Value {
    serde_json::json!({ "tool": {
        "upstream": pin.upstream.as_str(),
        "name": pin.tool,
        "hash": pin.seen.as_str(),
        "approved_hash": pin.approved.as_ref().map(|a| a.hash.as_str()),
        "changes": pin.changes(),
    } })
}

pub fn issue_summary(issue: &Issue) -> serde_json::Value {
    serde_json::json!({
        "issue": {
            "id": issue.id,
            "title": issue.title,
            "state": issue.state,
            "priority": issue.priority,
            "labels": issue.labels,
            "author": issue.author,
            "version": issue.version,
            "comments": issue.comments.len(),
            "updated_at": issue.updated_at,
        }
    })
}

/// Whether a claim write turned `before` into `after` with a claim that
/// is new: not a repeat of the same claim (nothing changed) nor a renewal
/// of its lease (the same run and grant held it live before).
pub fn is_new_claim(before: &Issue, after: &Issue) -> bool {
    let renewed = match (&before.claim, &after.claim) {
        (Some(old), Some(new)) => old.run == new.run && old.grant == new.grant,
        _ => false,
    };
    before.version != after.version && !renewed
}

/// The webhook events a change of `before` into `after` implies
/// (`before` is `None` for a creation).
pub fn issue_events(before: Option<&Issue>, after: &Issue) -> Vec<WebhookEvent> {
    use crate::issue::IssueState;
    let closed = |i: &Issue| matches!(i.state, IssueState::Done | IssueState::Closed);
    match before {
        None => vec![WebhookEvent::IssueCreated],
        Some(before) => {
            let mut events = vec![WebhookEvent::IssueUpdated];
            if closed(after) && !closed(before) {
                events.push(WebhookEvent::IssueClosed);
            }
            events
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_parse_and_print_their_wire_names() {
        for event in WebhookEvent::ALL {
            assert_eq!(WebhookEvent::parse(event.as_str()).unwrap(), *event);
        }
        let err = WebhookEvent::parse("issue.deleted").unwrap_err();
        assert!(err.reason.contains("issue.created"), "{err}");
        assert!(WebhookEvents::parse_list(Vec::<String>::new()).is_err());
    }

    #[test]
    fn urls_are_http_without_credentials_and_redacted_in_logs() {
        let url = WebhookUrl::parse("https://hooks.example.com:8443/in?token=abc#x").unwrap();
        assert_eq!(url.host(), "hooks.example.com");
        assert_eq!(url.redacted(), "https://hooks.example.com:8443/in");
        assert!(!format!("{url:?}").contains("abc"));
        assert_eq!(
            WebhookUrl::parse("http://[::1]:9/").unwrap().host(),
            "[::1]"
        );
        for bad in [
            "ftp://x/",
            "file:///etc/passwd",
            "https://user:pw@x/",
            "https:///path",
            "http://:80/",
            "http://a b/",
        ] {
            assert!(WebhookUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn signatures_follow_the_documented_scheme() {
        let secret = WebhookSecret::parse("0123456789abcdef").unwrap();
        let header = signature(&secret, 1_700_000_000, r#"{"a":1}"#);
        // Python: hmac.new(b'0123456789abcdef', b'1700000000.{"a":1}', 'sha256')
        assert_eq!(
            header,
            "t=1700000000,v1=9eb18f493f8ec135d9eb2dad817c369bb4e9cbfa818657897a7437c1cd8c3a23"
        );
        assert_ne!(header, signature(&secret, 1_700_000_001, r#"{"a":1}"#));
        assert!(!format!("{secret:?}").contains("0123"));
        let generated = WebhookSecret::generate();
        assert!(generated.expose().starts_with("whsec_"));
        assert_ne!(generated, WebhookSecret::generate());
    }

    /// A due delivery named `id` (a few ULID characters, zero-padded).
    fn due(id: &str, tenant: &str, webhook: &str, at: i64) -> DueDelivery {
        DueDelivery {
            id: DeliveryId::parse(format!("dlv_{id:0>26}")).unwrap(),
            tenant: TenantId::parse(tenant).unwrap(),
            webhook: WebhookId::parse(format!("wh_{webhook:0>26}")).unwrap(),
            due_at: Timestamp::from_millis(at),
        }
    }

    fn ids(taken: &[DueDelivery]) -> Vec<&str> {
        taken
            .iter()
            .map(|d| d.id.as_str()["dlv_".len()..].trim_start_matches('0'))
            .collect()
    }

    #[test]
    fn a_claim_takes_turns_across_tenants_then_endpoints() {
        // Tenant a's endpoint X has the oldest backlog; b's one delivery is
        // the newest of all; a's second endpoint Y is newer than X.
        let mut backlog: Vec<DueDelivery> =
            (0..6).map(|n| due(&format!("X{n}"), "a", "X", n)).collect();
        backlog.push(due("Y0", "a", "Y", 10));
        backlog.push(due("Y1", "a", "Y", 11));
        backlog.push(due("B0", "b", "Z", 100));
        backlog.reverse();
        let taken = fair_share(backlog.clone(), 100);
        assert_eq!(
            ids(&taken),
            ["X0", "B0", "Y0", "X1", "Y1", "X2", "X3", "X4", "X5"]
        );
        // A claim of two takes b's delivery second, however long a's backlog.
        assert_eq!(ids(&fair_share(backlog.clone(), 2)), ["X0", "B0"]);
        // The tenant waiting longest goes first.
        backlog.push(due("C0", "c", "W", -5));
        assert_eq!(ids(&fair_share(backlog, 3)), ["C0", "X0", "B0"]);
        assert!(fair_share(Vec::new(), 5).is_empty());
    }

    #[test]
    fn a_failing_endpoint_pauses_like_a_delivery_backs_off() {
        assert_eq!(endpoint_pause(0), Duration::ZERO);
        assert_eq!(endpoint_pause(1), Duration::from_secs(1));
        assert_eq!(endpoint_pause(3), Duration::from_secs(4));
        assert_eq!(endpoint_pause(limits::ATTEMPTS_MAX), limits::RETRY_MAX);
        assert_eq!(endpoint_pause(u32::MAX), limits::RETRY_MAX);
    }

    #[test]
    fn retries_back_off_exponentially_and_end() {
        assert_eq!(retry_delay(1), Some(Duration::from_secs(1)));
        assert_eq!(retry_delay(2), Some(Duration::from_secs(2)));
        assert_eq!(retry_delay(9), Some(Duration::from_secs(256)));
        assert_eq!(retry_delay(limits::ATTEMPTS_MAX), None);
    }
}
