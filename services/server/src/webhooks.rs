//! Webhook delivery: which hosts endpoints may point at ([`HostPolicy`],
//! the one egress policy of `corkboard_egress` with the webhook setting),
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
use corkboard_egress::{AllowList, EgressError, EgressPolicy};
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

/// Where webhook endpoints may point: the one egress policy
/// (`egress_allow`, see [`corkboard_egress`]), opened further by
/// `webhook_allowed_hosts`, which, when it lists anything, also restricts
/// endpoints to the hosts it lists. Hosts are matched as the HTTP client's
/// own URL parser reads them, so `http://127.0.0.1\.example.com/` is
/// 127.0.0.1, never a subdomain of example.com.
#[derive(Debug, Clone, Default)]
pub struct HostPolicy {
    egress: Arc<EgressPolicy>,
    only: AllowList,
}

impl HostPolicy {
    /// `egress` opened and restricted by `allowed` (`webhook_allowed_hosts`:
    /// names, `*.` suffixes, addresses, CIDRs).
    pub fn new(egress: &EgressPolicy, allowed: &[String]) -> Result<Self, EgressError> {
        let only = AllowList::parse(allowed)?;
        Ok(Self {
            egress: Arc::new(egress.opening(&only)),
            only,
        })
    }

    /// The URL to send to, parsed once, or why `url` may not be used (its
    /// literal address judged now; a name when the client resolves it).
    pub fn check(&self, url: &WebhookUrl) -> Result<reqwest::Url, String> {
        let parsed =
            reqwest::Url::parse(url.as_str()).map_err(|e| format!("not a usable URL: {e}"))?;
        if !self.only.is_empty() && !self.only.allows_host(&parsed) {
            let host = parsed.host_str().unwrap_or("");
            return Err(format!("host {host} is not in webhook_allowed_hosts"));
        }
        self.egress
            .check_url(url.as_str())
            .map_err(|e| e.to_string())
    }

    /// Why `url` may not be used, if it may not.
    pub fn refusal(&self, url: &WebhookUrl) -> Option<String> {
        self.check(url).err()
    }

    /// The delivery client: connects only to addresses this policy allows,
    /// follows no redirect.
    pub fn client(&self) -> Result<reqwest::Client, reqwest::Error> {
        self.egress.client_builder().timeout(SEND_TIMEOUT).build()
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
    /// `webhook_api::create`); secrets stored in clear need none. Fails
    /// when the HTTP client cannot be built: there is no other client to
    /// fall back to (any other would skip the host policy or follow
    /// redirects).
    pub fn spawn(
        store: Arc<dyn BoardStore>,
        hosts: HostPolicy,
        key: Option<Arc<corkboard_upstream::CredentialKey>>,
    ) -> Result<Self, reqwest::Error> {
        let client = hosts.client()?;
        let task = tokio::spawn(run(store, hosts, client, key));
        Ok(Self { task })
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
    // endpoint was registered. The parsed URL is what is sent to.
    let url = match hosts.check(&delivery.url) {
        Ok(url) => url,
        Err(refusal) => return failed(None, refusal),
    };
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
        .post(url)
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
        // kind of failure it was, not where (a refusal names only the
        // host and the rule).
        Err(err) => match corkboard_egress::refusal_in(&err) {
            Some(refusal) => failed(None, refusal.to_string()),
            None if err.is_timeout() => failed(
                None,
                format!("no answer within {}s", SEND_TIMEOUT.as_secs()),
            ),
            None if err.is_connect() => failed(None, "cannot connect".into()),
            None => failed(None, "the request failed".into()),
        },
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
        let policy = HostPolicy::new(
            &EgressPolicy::default(),
            &["127.0.0.1".into(), "*.example.com".into()],
        )
        .unwrap();
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
