//! Webhook delivery: which hosts endpoints may point at ([`HostPolicy`],
//! the one egress policy of `corkboard_egress` with the webhook setting),
//! and the worker that sends the outbox's deliveries ([`DeliveryWorker`]).
//!
//! One worker per server process. It claims due deliveries from the board
//! store under a lease, so replicas sharing a store never send the same one
//! at once, POSTs each (signed, with its delivery id), and records the
//! outcome: 2xx is delivered, anything else (another status, no answer
//! within the deadline, a refused host) is retried with the store's backoff
//! until given up. A worker that dies mid-delivery leaves a lease that runs
//! out, and the delivery is sent again: at least once.
//!
//! Deliveries never wait for each other: each runs as its own task under
//! its deadline, at most [`DeliveryLimits::in_flight_max`] at once, and a
//! slot that frees is claimed again at once. What one claim takes is the
//! store's to share (`WebhookStore::claim_deliveries`): at most
//! [`DeliveryLimits::in_flight_per_endpoint`] in flight per endpoint, turns
//! across tenants and endpoints, none for an endpoint paused after failing.
//! So an endpoint that never answers holds only its own few slots, a
//! shrinking share of the time, and delays nobody else's deliveries.
//!
//! Logs name the endpoint by its redacted URL (no query string) and never
//! the secret or the body.

use crate::web::events::{BoardEvent, BoardEvents};
use corkboard_board::webhook::{self, limits};
use corkboard_board::{AttemptOutcome, BoardStore, ClaimedDelivery, Timestamp, WebhookUrl};
use corkboard_egress::{AllowList, EgressError, EgressPolicy};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::{JoinError, JoinHandle, JoinSet};
use tokio::time::Instant;

/// How long a claimed delivery stays reserved past its deadline: time to
/// record the attempt before another worker may take it.
const LEASE_MARGIN: Duration = Duration::from_secs(20);
/// How often the outbox is polled when no delivery finishes meanwhile.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);
/// The least time between two claims: deliveries finishing together free
/// their slots for one claim, not one claim each.
const CLAIM_GAP: Duration = Duration::from_millis(20);
/// How often ended claims are looked for (`expire_claims`): the delay of an
/// `issue.claim_expired` event after the claim's end, at most.
pub const CLAIM_SWEEP_INTERVAL: Duration = Duration::from_secs(1);
/// Ended claims cleared per sweep; more wait for the next one.
const CLAIM_SWEEP_MAX: u32 = 100;

/// How the worker shares its sends (`webhook_in_flight_max`,
/// `webhook_in_flight_per_endpoint`, `webhook_timeout_ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryLimits {
    /// Deliveries in flight at once in this process.
    pub in_flight_max: u32,
    /// Deliveries to one endpoint in flight at once, across every worker
    /// sharing the store (their live leases).
    pub in_flight_per_endpoint: u32,
    /// Deadline of one attempt (connect, send, answer).
    pub timeout: Duration,
}

impl DeliveryLimits {
    pub fn from_settings(settings: &corkboard_config::Settings) -> Self {
        Self {
            in_flight_max: settings.webhook_in_flight_max,
            in_flight_per_endpoint: settings.webhook_in_flight_per_endpoint,
            timeout: Duration::from_millis(settings.webhook_timeout_ms),
        }
    }

    /// How long a claimed delivery is reserved for this worker.
    fn lease(&self) -> Duration {
        self.timeout + LEASE_MARGIN
    }
}

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
    /// follows no redirect, gives up on a request after `timeout`.
    pub fn client(&self, timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
        self.egress.client_builder().timeout(timeout).build()
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
    ///
    /// The same loop notices claims that ended without a release (a lapsed
    /// lease, an expired grant: `WebhookStore::expire_claims`, at most
    /// every [`CLAIM_SWEEP_INTERVAL`]), which queues their
    /// `issue.claim_expired` deliveries, and publishes each on `events`
    /// (the live board feed) when given.
    pub fn spawn(
        store: Arc<dyn BoardStore>,
        hosts: HostPolicy,
        key: Option<Arc<corkboard_upstream::CredentialKey>>,
        limits: DeliveryLimits,
        events: Option<Arc<dyn BoardEvents>>,
    ) -> Result<Self, reqwest::Error> {
        let client = hosts.client(limits.timeout)?;
        let sender = Arc::new(Sender {
            store,
            hosts,
            client,
            key,
            timeout: limits.timeout,
            events,
        });
        let task = tokio::spawn(run(sender, limits));
        Ok(Self { task })
    }

    /// Stops claiming and abandons the deliveries in flight (their leases
    /// run out and they are sent again).
    pub fn stop(&self) {
        self.task.abort();
    }
}

/// What every delivery task shares.
struct Sender {
    store: Arc<dyn BoardStore>,
    hosts: HostPolicy,
    client: reqwest::Client,
    key: Option<Arc<corkboard_upstream::CredentialKey>>,
    timeout: Duration,
    events: Option<Arc<dyn BoardEvents>>,
}

async fn run(sender: Arc<Sender>, limits: DeliveryLimits) {
    // Dropped with this task: stopping the worker aborts its deliveries.
    let mut in_flight: JoinSet<()> = JoinSet::new();
    let mut failing = false;
    let mut swept_at: Option<Instant> = None;
    loop {
        while let Some(done) = in_flight.try_join_next() {
            report(done);
        }
        if swept_at.is_none_or(|at| at.elapsed() >= CLAIM_SWEEP_INTERVAL) {
            swept_at = Some(Instant::now());
            sender.sweep_claims().await;
        }
        let free = limits
            .in_flight_max
            .saturating_sub(u32::try_from(in_flight.len()).unwrap_or(u32::MAX));
        let claimed_at = Instant::now();
        if free > 0 {
            let claimed = sender
                .store
                .claim_deliveries(
                    Timestamp::now(),
                    limits.lease(),
                    free,
                    limits.in_flight_per_endpoint,
                )
                .await;
            match claimed {
                Ok(claimed) => {
                    if failing {
                        tracing::info!("webhooks: the outbox answers again");
                        failing = false;
                    }
                    for delivery in claimed {
                        let sender = sender.clone();
                        in_flight.spawn(async move { sender.deliver(delivery).await });
                    }
                }
                Err(err) => {
                    if !failing {
                        tracing::warn!(error = %err, "webhooks: cannot read the outbox; retrying");
                        failing = true;
                    }
                }
            }
        }
        // Claim again when a delivery finishes (its slot, and maybe its
        // endpoint's, is free) or after the poll interval (new deliveries,
        // backoffs and pauses that ended).
        tokio::select! {
            Some(done) = in_flight.join_next(), if !in_flight.is_empty() => report(done),
            () = tokio::time::sleep(POLL_INTERVAL) => {}
        }
        tokio::time::sleep_until(claimed_at + CLAIM_GAP).await;
    }
}

/// A delivery task that panicked or was cancelled: its lease runs out and
/// it is sent again.
fn report(done: Result<(), JoinError>) {
    if let Err(err) = done {
        tracing::warn!(error = %err, "webhooks: a delivery did not finish; it will be sent again");
    }
}

impl Sender {
    /// Ends the claims whose end has passed (their deliveries queued by
    /// the store) and tells open pages about each.
    async fn sweep_claims(&self) {
        match self
            .store
            .expire_claims(Timestamp::now(), CLAIM_SWEEP_MAX)
            .await
        {
            Ok(expired) => {
                for ended in expired {
                    tracing::info!(
                        tenant = %ended.tenant, issue = %ended.issue, run = %ended.claim.run,
                        "claim expired without a release"
                    );
                    if let Some(events) = &self.events {
                        events.publish(
                            &ended.tenant,
                            BoardEvent::IssueChanged {
                                id: ended.issue,
                                version: Some(ended.version),
                            },
                        );
                    }
                }
            }
            Err(err) => {
                tracing::debug!(error = %err, "webhooks: cannot sweep ended claims; retrying");
            }
        }
    }

    async fn deliver(&self, delivery: ClaimedDelivery) {
        let outcome = match tokio::time::timeout(self.timeout, self.send(&delivery)).await {
            Ok(outcome) => outcome,
            Err(_) => failed(None, self.no_answer()),
        };
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
        if let Err(err) = self.store.record_attempt(&delivery.id, &outcome).await {
            // The lease runs out and the delivery is sent again.
            tracing::warn!(delivery = %delivery.id, error = %err, "webhooks: cannot record an attempt");
        }
    }

    fn no_answer(&self) -> String {
        format!("no answer within {:?}", self.timeout)
    }

    async fn send(&self, delivery: &ClaimedDelivery) -> AttemptOutcome {
        // Checked again at delivery: the setting may have changed since the
        // endpoint was registered. The parsed URL is what is sent to.
        let url = match self.hosts.check(&delivery.url) {
            Ok(url) => url,
            Err(refusal) => return failed(None, refusal),
        };
        // Sealed at rest (opened here, never logged); one stored in clear
        // before sealing existed is used as it is.
        let secret = match (delivery.secret.sealed_bytes(), self.key.as_deref()) {
            (None, _) => delivery.secret.clone(),
            (Some(_), Some(key)) => {
                match key.open_webhook_secret(&delivery.tenant, &delivery.secret) {
                    Ok(secret) => secret,
                    Err(err) => return failed(None, err.to_string()),
                }
            }
            (Some(_), None) => {
                return failed(
                    None,
                    "the endpoint's signing secret is sealed and this server has no upstream_key_file"
                        .to_owned(),
                );
            }
        };
        let timestamp = Timestamp::now().as_millis() / 1000;
        let response = self
            .client
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
                None if err.is_timeout() => failed(None, self.no_answer()),
                None if err.is_connect() => failed(None, "cannot connect".into()),
                None => failed(None, "the request failed".into()),
            },
        }
    }
}

fn failed(status: Option<u16>, error: String) -> AttemptOutcome {
    AttemptOutcome {
        at: Timestamp::now(),
        status,
        error: Some(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corkboard_board::{
        IssueStore, NewWebhook, TenantId, WebhookEvents, WebhookSecret, WebhookStore,
    };
    use corkboard_store_contract::fixtures::{author, new_issue};
    use corkboard_store_sqlite::SqliteStore;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A loopback receiver: reads each request, then either answers 200
    /// or (`stuck`) holds the connection open until the sender gives up.
    /// Counts the connections open at once.
    struct Receiver {
        port: u16,
        open: Arc<AtomicUsize>,
        most_open: Arc<AtomicUsize>,
        answered: Arc<Mutex<Vec<Instant>>>,
    }

    impl Receiver {
        fn start(stuck: bool) -> Self {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let open = Arc::new(AtomicUsize::new(0));
            let most_open = Arc::new(AtomicUsize::new(0));
            let answered = Arc::new(Mutex::new(Vec::new()));
            let (o, m, a) = (open.clone(), most_open.clone(), answered.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(mut stream) = stream else { continue };
                    let now_open = o.fetch_add(1, Ordering::SeqCst) + 1;
                    m.fetch_max(now_open, Ordering::SeqCst);
                    let (o, a) = (o.clone(), a.clone());
                    std::thread::spawn(move || {
                        let mut reader = BufReader::new(stream.try_clone().unwrap());
                        let mut len = 0;
                        loop {
                            let mut line = String::new();
                            if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                                break;
                            }
                            let lower = line.to_ascii_lowercase();
                            if let Some(v) = lower.strip_prefix("content-length:") {
                                len = v.trim().parse().unwrap_or(0);
                            }
                        }
                        let mut body = vec![0; len];
                        let _ = reader.read_exact(&mut body);
                        if stuck {
                            // Until the sender's deadline closes it.
                            let _ = reader.read(&mut [0; 1]);
                        } else {
                            a.lock().unwrap().push(Instant::now());
                            let _ = stream.write_all(
                                b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                            );
                        }
                        o.fetch_sub(1, Ordering::SeqCst);
                    });
                }
            });
            Self {
                port,
                open,
                most_open,
                answered,
            }
        }

        fn url(&self) -> WebhookUrl {
            WebhookUrl::parse(format!("http://127.0.0.1:{}/in", self.port)).unwrap()
        }
    }

    /// A store where `tenant` has an endpoint at `receiver` with
    /// `deliveries` issue creations due.
    async fn queue(store: &SqliteStore, tenant: &str, receiver: &Receiver, deliveries: usize) {
        let tenant = TenantId::parse(tenant).unwrap();
        let hook = NewWebhook {
            url: receiver.url(),
            events: WebhookEvents::parse_list(["issue.created"]).unwrap(),
            secret: WebhookSecret::parse("a-secret-of-16-bytes").unwrap(),
        };
        store
            .create_webhook(&tenant, &hook, Timestamp::now())
            .await
            .unwrap();
        for n in 0..deliveries {
            store
                .create_issue(
                    &tenant,
                    &author("run-1"),
                    new_issue(&format!("n {n}")),
                    None,
                )
                .await
                .unwrap();
        }
    }

    fn worker(store: &SqliteStore, in_flight_max: u32) -> DeliveryWorker {
        let hosts = HostPolicy::new(&EgressPolicy::default(), &["127.0.0.1".into()]).unwrap();
        let limits = DeliveryLimits {
            in_flight_max,
            in_flight_per_endpoint: 2,
            timeout: Duration::from_secs(20),
        };
        DeliveryWorker::spawn(Arc::new(store.clone()), hosts, None, limits, None).unwrap()
    }

    /// Issue 28 item 7: a stuck endpoint with a backlog holds two
    /// connections (its cap), and another tenant's delivery, queued after
    /// the whole backlog, arrives while they are still stuck.
    #[actix_rt::test(system = "corkboard_testkit::MultiThread")]
    async fn a_stuck_endpoint_holds_its_own_slots_and_delays_nobody_else() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open_in_dir(dir.path()).unwrap();
        let (stuck, quick) = (Receiver::start(true), Receiver::start(false));
        queue(&store, "slow-tenant", &stuck, 40).await;
        queue(&store, "quick-tenant", &quick, 1).await;
        let started = Instant::now();
        let worker = worker(&store, 64);
        while quick.answered.lock().unwrap().is_empty() {
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "the other tenant's delivery did not arrive while the slow endpoint was stuck"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Give the worker time to overstep the cap, were it going to.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            stuck.open.load(Ordering::SeqCst),
            2,
            "still stuck, two at once"
        );
        assert_eq!(
            stuck.most_open.load(Ordering::SeqCst),
            2,
            "never more than two"
        );
        worker.stop();
    }

    /// The process-wide cap holds across endpoints: two stuck endpoints
    /// (each could take two) share three slots.
    #[actix_rt::test(system = "corkboard_testkit::MultiThread")]
    async fn deliveries_in_flight_stay_within_the_process_cap() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open_in_dir(dir.path()).unwrap();
        let (one, two) = (Receiver::start(true), Receiver::start(true));
        queue(&store, "tenant-one", &one, 5).await;
        queue(&store, "tenant-two", &two, 5).await;
        let worker = worker(&store, 3);
        let started = Instant::now();
        let open = || one.open.load(Ordering::SeqCst) + two.open.load(Ordering::SeqCst);
        while open() < 3 {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{} open",
                open()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(open(), 3);
        assert!(one.open.load(Ordering::SeqCst) >= 1 && two.open.load(Ordering::SeqCst) >= 1);
        worker.stop();
    }

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
