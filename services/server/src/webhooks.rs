//! Webhook delivery: which hosts endpoints may point at ([`HostPolicy`]),
//! and the worker that sends the outbox's deliveries ([`DeliveryWorker`]).
//!
//! One worker per server process. It claims due deliveries from the board
//! store under a lease ([`LEASE`]), so replicas sharing a store never send
//! the same one at once, POSTs each (signed, with its delivery id), and
//! records the outcome: 2xx is delivered, anything else (another status,
//! no answer within [`SEND_TIMEOUT`], a refused host) is retried with the
//! store's backoff until given up. A worker that dies mid-delivery leaves
//! a lease that runs out, and the delivery is sent again: at least once.
//!
//! Logs name the endpoint by its redacted URL (no query string) and never
//! the secret or the body.

use corkboard_board::webhook::{self, limits};
use corkboard_board::{AttemptOutcome, BoardStore, ClaimedDelivery, Timestamp, WebhookUrl};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// How long a claimed delivery is reserved for this worker.
pub const LEASE: Duration = Duration::from_secs(30);
/// Bound on one delivery (connect, send, answer).
pub const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the outbox is polled for due deliveries.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);
/// Deliveries claimed (and sent concurrently) at once.
const BATCH: u32 = 32;

/// Which hosts webhook endpoints may point at (`webhook_allowed_hosts`).
#[derive(Debug, Clone, Default)]
pub struct HostPolicy {
    allowed: Vec<String>,
}

impl HostPolicy {
    pub fn new(allowed: &[String]) -> Self {
        Self {
            allowed: allowed
                .iter()
                .map(|h| h.trim().to_ascii_lowercase())
                .collect(),
        }
    }

    /// Why `url` may not be used, if it may not.
    pub fn refusal(&self, url: &WebhookUrl) -> Option<String> {
        let host = url.host();
        if self.allowed.is_empty() {
            let bare = host.trim_start_matches('[').trim_end_matches(']');
            let internal = host == "localhost"
                || host.ends_with(".localhost")
                || bare.parse::<IpAddr>().is_ok_and(is_internal);
            return internal.then(|| {
                format!(
                    "host {host} is a loopback, private or link-local address; list it in webhook_allowed_hosts to allow it"
                )
            });
        }
        let listed = self
            .allowed
            .iter()
            .any(|allowed| match allowed.strip_prefix("*.") {
                Some(domain) => host.ends_with(&format!(".{domain}")),
                None => *allowed == host,
            });
        (!listed).then(|| format!("host {host} is not in webhook_allowed_hosts"))
    }
}

fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                // 100.64.0.0/10 (carrier-grade NAT, often cluster-internal)
                || (v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64)
        }
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || (v6.segments()[0] & 0xfe00) == 0xfc00
                || (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| is_internal(IpAddr::V4(v4)))
        }
    }
}

/// The running delivery worker; dropping it does not stop it, [`Self::stop`] does.
#[derive(Debug)]
pub struct DeliveryWorker {
    task: JoinHandle<()>,
}

impl DeliveryWorker {
    /// Starts polling `store`'s outbox. Must run inside a Tokio runtime.
    /// `key` opens endpoints' sealed signing secrets (see
    /// `webhook_api::create`); secrets stored in clear need none.
    pub fn spawn(
        store: Arc<dyn BoardStore>,
        hosts: HostPolicy,
        key: Option<Arc<corkboard_upstream::CredentialKey>>,
    ) -> Self {
        let client = reqwest::Client::builder()
            .timeout(SEND_TIMEOUT)
            // A redirect could lead anywhere, past the host policy.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        let task = tokio::spawn(run(store, hosts, client, key));
        Self { task }
    }

    pub fn stop(&self) {
        self.task.abort();
    }
}

async fn run(
    store: Arc<dyn BoardStore>,
    hosts: HostPolicy,
    client: reqwest::Client,
    key: Option<Arc<corkboard_upstream::CredentialKey>>,
) {
    let mut failing = false;
    loop {
        match store.claim_deliveries(Timestamp::now(), LEASE, BATCH).await {
            Ok(claimed) => {
                if failing {
                    tracing::info!("webhooks: the outbox answers again");
                    failing = false;
                }
                let full = claimed.len() == BATCH as usize;
                let sends = claimed
                    .into_iter()
                    .map(|delivery| deliver(&*store, &hosts, &client, key.as_deref(), delivery));
                futures_util::future::join_all(sends).await;
                if full {
                    continue;
                }
            }
            Err(err) => {
                if !failing {
                    tracing::warn!(error = %err, "webhooks: cannot read the outbox; retrying");
                    failing = true;
                }
            }
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

async fn deliver(
    store: &dyn BoardStore,
    hosts: &HostPolicy,
    client: &reqwest::Client,
    key: Option<&corkboard_upstream::CredentialKey>,
    delivery: ClaimedDelivery,
) {
    let outcome = send(hosts, client, key, &delivery).await;
    let url = delivery.url.redacted();
    match &outcome.error {
        None => tracing::info!(
            tenant = %delivery.tenant, webhook = %delivery.webhook, delivery = %delivery.id,
            event = delivery.event.as_str(), url = %url, "webhook delivered"
        ),
        Some(error) => tracing::warn!(
            tenant = %delivery.tenant, webhook = %delivery.webhook, delivery = %delivery.id,
            event = delivery.event.as_str(), url = %url, attempt = delivery.attempts + 1,
            max_attempts = limits::ATTEMPTS_MAX, error = %error, "webhook delivery failed"
        ),
    }
    if let Err(err) = store.record_attempt(&delivery.id, &outcome).await {
        // The lease runs out and the delivery is sent again.
        tracing::warn!(delivery = %delivery.id, error = %err, "webhooks: cannot record an attempt");
    }
}

async fn send(
    hosts: &HostPolicy,
    client: &reqwest::Client,
    key: Option<&corkboard_upstream::CredentialKey>,
    delivery: &ClaimedDelivery,
) -> AttemptOutcome {
    let failed = |status: Option<u16>, error: String| AttemptOutcome {
        at: Timestamp::now(),
        status,
        error: Some(error),
    };
    // Checked again at delivery: the setting may have changed since the
    // endpoint was registered.
    if let Some(refusal) = hosts.refusal(&delivery.url) {
        return failed(None, refusal);
    }
    // Sealed at rest (opened here, never logged); one stored in clear
    // before sealing existed is used as it is.
    let secret = match (delivery.secret.sealed_bytes(), key) {
        (None, _) => delivery.secret.clone(),
        (Some(_), Some(key)) => match key.open_webhook_secret(&delivery.tenant, &delivery.secret) {
            Ok(secret) => secret,
            Err(err) => return failed(None, err.to_string()),
        },
        (Some(_), None) => {
            return failed(
                None,
                "the endpoint's signing secret is sealed and this server has no upstream_key_file"
                    .to_owned(),
            );
        }
    };
    let timestamp = Timestamp::now().as_millis() / 1000;
    let response = client
        .post(delivery.url.as_str())
        .header("Content-Type", "application/json")
        .header("User-Agent", "corkboard-webhooks")
        .header("Corkboard-Event", delivery.event.as_str())
        .header("Corkboard-Delivery", delivery.id.as_str())
        .header(
            "Corkboard-Signature",
            webhook::signature(&secret, timestamp, &delivery.body),
        )
        .body(delivery.body.clone())
        .send()
        .await;
    match response {
        Ok(response) if response.status().is_success() => AttemptOutcome {
            at: Timestamp::now(),
            status: Some(response.status().as_u16()),
            error: None,
        },
        Ok(response) => {
            let status = response.status().as_u16();
            failed(Some(status), format!("the receiver answered {status}"))
        }
        // The error's text may hold the URL with its query: say what
        // kind of failure it was, not where.
        Err(err) if err.is_timeout() => failed(
            None,
            format!("no answer within {}s", SEND_TIMEOUT.as_secs()),
        ),
        Err(err) if err.is_connect() => failed(None, "cannot connect".into()),
        Err(_) => failed(None, "the request failed".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> WebhookUrl {
        WebhookUrl::parse(text).unwrap()
    }

    #[test]
    fn by_default_internal_hosts_are_refused() {
        let policy = HostPolicy::default();
        for internal in [
            "http://127.0.0.1:9/",
            "http://localhost/",
            "http://10.1.2.3/",
            "http://192.168.0.1/",
            "http://169.254.169.254/latest/meta-data",
            "http://[::1]/",
            "http://[fd00::1]/",
            "http://100.64.0.1/",
        ] {
            assert!(policy.refusal(&url(internal)).is_some(), "{internal}");
        }
        assert!(
            policy
                .refusal(&url("https://hooks.example.com/x"))
                .is_none()
        );
    }

    #[test]
    fn a_list_allows_only_what_it_names() {
        let policy = HostPolicy::new(&["127.0.0.1".into(), "*.example.com".into()]);
        assert!(policy.refusal(&url("http://127.0.0.1:8080/")).is_none());
        assert!(policy.refusal(&url("https://a.example.com/")).is_none());
        assert!(
            policy
                .refusal(&url("https://example.com.evil.org/"))
                .is_some()
        );
        assert!(policy.refusal(&url("https://other.org/")).is_some());
        let refusal = policy.refusal(&url("http://10.0.0.1/")).unwrap();
        assert!(refusal.contains("webhook_allowed_hosts"), "{refusal}");
    }
}
