//! Webhook endpoints and their outbox (`webhooks`, `webhook_outbox`).
//!
//! The outbox is transactional: the board writes that cause events queue
//! their deliveries themselves, inside the op (undone with it) (an issue write
//! reads the issue first with [`watched_issue`], then calls the event's
//! function here with what it wrote), so the deliveries an issue write or
//! a grant change causes are committed with it or not at all; a crash can
//! lose neither one without the other. The outbox holds only undelivered
//! deliveries: a delivered or given-up one is deleted and counted on its
//! endpoint (`delivered`, `dead`), which also keeps the last attempt's
//! status. Claims lease rows (`lease_until`) under the writer's `BEGIN
//! IMMEDIATE`, so two processes never claim the same row at once, and
//! share them out as the domain says (`webhook::fair_share`, at most
//! `per_endpoint` live leases per endpoint, none for a paused endpoint:
//! `failures`, `paused_until`).

use super::WriteOp;
use crate::error::OpError;
use corkboard_board::webhook::{
    self, AttemptOutcome, ClaimedDelivery, DueDelivery, NewWebhook, Webhook, WebhookEvent,
    WebhookEvents, WebhookSecret, WebhookStatus, WebhookUrl, WebhookWithStatus, limits,
};
use corkboard_board::{
    CommentAdded, DeliveryId, Grant, GrantEvent, Issue, StoreError, TenantId, Timestamp, ToolPin,
    ValidationError, WebhookId,
};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::json;
use std::collections::HashMap;
use std::time::Duration;

/// A new issue (not a replayed create).
pub(crate) fn issue_created(
    conn: &Connection,
    tenant: &TenantId,
    issue: &Issue,
) -> Result<(), OpError> {
    enqueue(
        conn,
        tenant,
        WebhookEvent::IssueCreated,
        || webhook::issue_summary(issue),
        Timestamp::now(),
    )
}

/// An updated issue; `before` is what [`watched_issue`] read.
pub(crate) fn issue_updated(
    conn: &Connection,
    tenant: &TenantId,
    before: Option<Issue>,
    issue: &Issue,
) -> Result<(), OpError> {
    let now = Timestamp::now();
    let Some(before) = before else {
        return Ok(());
    };
    let data = std::cell::OnceCell::new();
    for event in webhook::issue_events(Some(&before), issue) {
        let data = || data.get_or_init(|| webhook::issue_summary(issue)).clone();
        enqueue(conn, tenant, event, data, now)?;
    }
    Ok(())
}

/// A claimed issue; `before` is what [`watched_issue`] read.
pub(crate) fn issue_claimed(
    conn: &Connection,
    tenant: &TenantId,
    before: Option<Issue>,
    issue: &Issue,
) -> Result<(), OpError> {
    // Claiming one's own claim again changes nothing (same version), or
    // renews its lease (the same run and grant held it): no event.
    match before {
        Some(before) if webhook::is_new_claim(&before, issue) => {
            issue_claimed_next(conn, tenant, issue)
        }
        _ => Ok(()),
    }
}

/// An issue `claim_next` claimed (always a new claim).
pub(crate) fn issue_claimed_next(
    conn: &Connection,
    tenant: &TenantId,
    issue: &Issue,
) -> Result<(), OpError> {
    let data = || {
        let mut data = webhook::issue_summary(issue);
        data["claim"] = json!(issue.claim);
        data
    };
    enqueue(
        conn,
        tenant,
        WebhookEvent::IssueClaimed,
        data,
        Timestamp::now(),
    )
}

/// A claim that ended without a release, cleared from `issue`.
pub(crate) fn claim_expired(
    conn: &Connection,
    tenant: &TenantId,
    issue: &Issue,
    claim: &corkboard_board::Claim,
) -> Result<(), OpError> {
    let data = || {
        let mut data = webhook::issue_summary(issue);
        data["claim"] = json!(claim);
        data
    };
    enqueue(
        conn,
        tenant,
        WebhookEvent::IssueClaimExpired,
        data,
        Timestamp::now(),
    )
}

/// A new comment (not a replayed one).
pub(crate) fn issue_commented(
    conn: &Connection,
    tenant: &TenantId,
    added: &CommentAdded,
) -> Result<(), OpError> {
    let data = || {
        let mut data = webhook::issue_summary(&added.issue);
        data["comment"] = json!({ "id": added.comment.id, "author": added.comment.author });
        data
    };
    enqueue(
        conn,
        tenant,
        WebhookEvent::IssueCommented,
        data,
        Timestamp::now(),
    )
}

/// A grant recorded: a run started.
pub(crate) fn run_started(conn: &Connection, grant: &Grant) -> Result<(), OpError> {
    let data = || {
        json!({ "run": {
            "id": grant.run, "grant": grant.id, "capabilities": grant.capabilities,
            "expires_at": grant.expires_at,
        } })
    };
    enqueue(
        conn,
        &grant.tenant,
        WebhookEvent::RunStarted,
        data,
        Timestamp::now(),
    )
}

/// A grant revoked by `by` at `at`: its run ended, when this revocation
/// is the one that took effect (not a repeat).
pub(crate) fn run_ended(
    conn: &Connection,
    by: &str,
    at: Timestamp,
    event: &GrantEvent,
) -> Result<(), OpError> {
    if event.revoked_at != Some(at) || event.revoked_by.as_deref() != Some(by) {
        return Ok(());
    }
    let data = || {
        json!({ "run": {
            "id": event.grant.run, "grant": event.grant.id, "revoked_by": by,
        } })
    };
    enqueue(
        conn,
        &event.grant.tenant,
        WebhookEvent::RunEnded,
        data,
        Timestamp::now(),
    )
}

/// An upstream tool new or changed, pending a tenant admin's approval:
/// its name, the definition hashes and which fields changed, never the
/// definition itself (the admin API shows that).
pub(crate) fn upstream_tool_changed(conn: &Connection, pin: &ToolPin) -> Result<(), OpError> {
    enqueue(
        conn,
        &pin.tenant,
        WebhookEvent::UpstreamToolChanged,
        || webhook::tool_changed_data(pin),
        Timestamp::now(),
    )
}

/// An approval item was made (`approval.requested`) or decided
/// (`approval.decided`).
pub(crate) fn approval_event(
    conn: &Connection,
    event: WebhookEvent,
    item: &corkboard_board::ApprovalItem,
) -> Result<(), OpError> {
    enqueue(
        conn,
        &item.tenant,
        event,
        || item.event_data(),
        Timestamp::now(),
    )
}

/// One delivery per endpoint of `tenant` subscribed to `event`; past the
/// tenant's pending limit the endpoint counts it as dropped instead.
/// `data` is made only when an endpoint is subscribed: most tenants have
/// none, and a create's summary of its issue cost it about 4% of its op.
fn enqueue(
    conn: &Connection,
    tenant: &TenantId,
    event: WebhookEvent,
    data: impl FnOnce() -> serde_json::Value,
    now: Timestamp,
) -> Result<(), OpError> {
    let mut stmt = conn.prepare_cached("SELECT id, events FROM webhooks WHERE tenant = ?1")?;
    let subscribed: Vec<String> = stmt
        .query_map(params![tenant.as_str()], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
        })?
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .filter(|(_, events)| events.split(',').any(|e| e == event.as_str()))
        .map(|(id, _)| id)
        .collect();
    if subscribed.is_empty() {
        return Ok(());
    }
    let body = webhook::event_body(event, tenant, now, data());
    let mut pending: u64 = conn
        .prepare_cached("SELECT COUNT(*) FROM webhook_outbox WHERE tenant = ?1")?
        .query_row(params![tenant.as_str()], |row| row.get::<_, i64>(0))?
        .try_into()
        .unwrap_or(0);
    for id in subscribed {
        if pending >= limits::PENDING_PER_TENANT_MAX || body.len() > limits::PAYLOAD_MAX {
            conn.prepare_cached("UPDATE webhooks SET dropped = dropped + 1 WHERE id = ?1")?
                .execute(params![id])?;
            continue;
        }
        conn.prepare_cached(
            "INSERT INTO webhook_outbox (id, tenant, webhook, event, body, created_at, \
             attempts, next_attempt_at, lease_until) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?6, 0)",
        )?
        .execute(params![
            DeliveryId::generate().as_str(),
            tenant.as_str(),
            id,
            event.as_str(),
            body,
            now.as_millis(),
        ])?;
        pending += 1;
    }
    Ok(())
}

/// Registers a webhook endpoint (bounded per tenant).
#[derive(Debug)]
pub(crate) struct CreateWebhook {
    pub tenant: TenantId,
    pub new: NewWebhook,
    pub at: Timestamp,
}

impl WriteOp for CreateWebhook {
    type Output = Webhook;
    const NAME: &'static str = "create_webhook";

    fn run(&self, conn: &Connection) -> Result<Webhook, OpError> {
        create_webhook(conn, &self.tenant, &self.new, self.at)
    }
}

/// Deletes an endpoint and its undelivered deliveries.
#[derive(Debug)]
pub(crate) struct DeleteWebhook {
    pub tenant: TenantId,
    pub id: WebhookId,
}

impl WriteOp for DeleteWebhook {
    type Output = ();
    const NAME: &'static str = "delete_webhook";

    fn run(&self, conn: &Connection) -> Result<(), OpError> {
        delete_webhook(conn, &self.tenant, &self.id)
    }
}

/// Leases the deliveries due at `now` to one sender, shared fairly.
#[derive(Debug)]
pub(crate) struct ClaimDeliveries {
    pub now: Timestamp,
    pub lease: Duration,
    pub limit: u32,
    pub per_endpoint: u32,
}

impl WriteOp for ClaimDeliveries {
    type Output = Vec<ClaimedDelivery>;
    const NAME: &'static str = "claim_deliveries";

    fn run(&self, conn: &Connection) -> Result<Vec<ClaimedDelivery>, OpError> {
        claim_deliveries(conn, self.now, self.lease, self.limit, self.per_endpoint)
    }
}

/// Records one delivery attempt: delivered, retried later, or given up.
#[derive(Debug)]
pub(crate) struct RecordAttempt {
    pub id: DeliveryId,
    pub outcome: AttemptOutcome,
}

impl WriteOp for RecordAttempt {
    type Output = ();
    const NAME: &'static str = "record_attempt";

    fn run(&self, conn: &Connection) -> Result<(), OpError> {
        record_attempt(conn, &self.id, &self.outcome)
    }
}

fn create_webhook(
    conn: &Connection,
    tenant: &TenantId,
    new: &NewWebhook,
    at: Timestamp,
) -> Result<Webhook, OpError> {
    let count: i64 = conn
        .prepare_cached("SELECT COUNT(*) FROM webhooks WHERE tenant = ?1")?
        .query_row(params![tenant.as_str()], |row| row.get(0))?;
    if count >= limits::ENDPOINTS_PER_TENANT_MAX as i64 {
        return Err(OpError::Store(StoreError::Invalid(ValidationError::new(
            "webhooks",
            format!(
                "tenant {tenant} already has {} webhook endpoints, the limit; delete one first",
                limits::ENDPOINTS_PER_TENANT_MAX
            ),
        ))));
    }
    let webhook = Webhook {
        id: WebhookId::generate(),
        tenant: tenant.clone(),
        url: new.url.clone(),
        events: new.events.clone(),
        created_at: at,
    };
    conn.prepare_cached(
        "INSERT INTO webhooks (id, tenant, url, events, secret, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        webhook.id.as_str(),
        tenant.as_str(),
        webhook.url.as_str(),
        webhook.events.to_csv(),
        new.secret.expose(),
        at.as_millis(),
    ])?;
    Ok(webhook)
}

fn delete_webhook(conn: &Connection, tenant: &TenantId, id: &WebhookId) -> Result<(), OpError> {
    let deleted = conn
        .prepare_cached("DELETE FROM webhooks WHERE id = ?1 AND tenant = ?2")?
        .execute(params![id.as_str(), tenant.as_str()])?;
    if deleted == 0 {
        return Err(OpError::Store(StoreError::not_found(format!(
            "webhook {id}"
        ))));
    }
    conn.prepare_cached("DELETE FROM webhook_outbox WHERE webhook = ?1")?
        .execute(params![id.as_str()])?;
    Ok(())
}

fn corrupt(what: &str, detail: impl std::fmt::Display) -> OpError {
    OpError::Store(StoreError::Internal(format!("unreadable {what}: {detail}")))
}

fn opt_ts(millis: Option<i64>) -> Option<Timestamp> {
    millis.map(Timestamp::from_millis)
}

pub(crate) fn list_webhooks(
    conn: &Connection,
    tenant: &TenantId,
) -> Result<Vec<WebhookWithStatus>, OpError> {
    let mut stmt = conn.prepare_cached(
        "SELECT w.id, w.url, w.events, w.created_at, w.delivered, w.dead, w.dropped, \
         w.last_attempt_at, w.last_status, w.last_error, \
         (SELECT COUNT(*) FROM webhook_outbox o WHERE o.webhook = w.id) \
         FROM webhooks w WHERE w.tenant = ?1 ORDER BY w.id",
    )?;
    let rows = stmt
        .query_map(params![tenant.as_str()], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, i64>(3)?,
                [
                    row.get::<_, i64>(4)?,
                    row.get::<_, i64>(5)?,
                    row.get::<_, i64>(6)?,
                ],
                row.get::<_, Option<i64>>(7)?,
                row.get::<_, Option<i64>>(8)?,
                row.get::<_, Option<String>>(9)?,
                row.get::<_, i64>(10)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    rows.into_iter()
        .map(
            |(
                id,
                url,
                events,
                created_at,
                [delivered, dead, dropped],
                last_at,
                status,
                error,
                pending,
            )| {
                let count = |n: i64| u64::try_from(n).unwrap_or(0);
                Ok(WebhookWithStatus {
                    webhook: Webhook {
                        id: WebhookId::parse(id).map_err(|e| corrupt("webhook id", e))?,
                        tenant: tenant.clone(),
                        url: WebhookUrl::parse(url).map_err(|e| corrupt("webhook url", e))?,
                        events: WebhookEvents::parse_list(events.split(','))
                            .map_err(|e| corrupt("webhook events", e))?,
                        created_at: Timestamp::from_millis(created_at),
                    },
                    status: WebhookStatus {
                        pending: count(pending),
                        delivered: count(delivered),
                        dead: count(dead),
                        dropped: count(dropped),
                        last_attempt_at: opt_ts(last_at),
                        last_status: status.and_then(|s| u16::try_from(s).ok()),
                        last_error: error,
                    },
                })
            },
        )
        .collect()
}

/// One index probe per endpoint that is not paused and has a free slot
/// (its due deliveries oldest first, at most that many), the live leases
/// counted from their own index: the cost follows the endpoints, never an
/// endpoint's backlog.
fn claim_deliveries(
    conn: &Connection,
    now: Timestamp,
    lease: Duration,
    limit: u32,
    per_endpoint: u32,
) -> Result<Vec<ClaimedDelivery>, OpError> {
    if limit == 0 || per_endpoint == 0 {
        return Ok(Vec::new());
    }
    let now_ms = now.as_millis();
    let leased: HashMap<String, u32> = conn
        .prepare_cached(
            "SELECT webhook, COUNT(*) FROM webhook_outbox WHERE lease_until > ?1 GROUP BY webhook",
        )?
        .query_map(params![now_ms], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, u32>(1)?))
        })?
        .collect::<Result<_, _>>()?;
    let endpoints: Vec<(String, String)> = conn
        .prepare_cached("SELECT id, tenant FROM webhooks WHERE paused_until <= ?1")?
        .query_map(params![now_ms], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let mut probe = conn.prepare_cached(
        "SELECT id, next_attempt_at FROM webhook_outbox \
         WHERE webhook = ?1 AND next_attempt_at <= ?2 AND lease_until <= ?2 \
         ORDER BY next_attempt_at, id LIMIT ?3",
    )?;
    let mut due = Vec::new();
    for (webhook, tenant) in endpoints {
        let free = per_endpoint.saturating_sub(leased.get(&webhook).copied().unwrap_or(0));
        if free == 0 {
            continue;
        }
        let webhook_id = WebhookId::parse(&webhook).map_err(|e| corrupt("webhook id", e))?;
        let tenant = TenantId::parse(tenant).map_err(|e| corrupt("webhook tenant", e))?;
        let rows = probe
            .query_map(params![webhook, now_ms, free], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        for (id, due_at) in rows {
            due.push(DueDelivery {
                id: DeliveryId::parse(id).map_err(|e| corrupt("delivery id", e))?,
                tenant: tenant.clone(),
                webhook: webhook_id.clone(),
                due_at: Timestamp::from_millis(due_at),
            });
        }
    }
    let until = now.plus_millis(i64::try_from(lease.as_millis()).unwrap_or(i64::MAX));
    let mut read = conn.prepare_cached(
        "SELECT o.event, o.body, o.attempts, w.url, w.secret \
         FROM webhook_outbox o JOIN webhooks w ON w.id = o.webhook WHERE o.id = ?1",
    )?;
    let mut lease_stmt =
        conn.prepare_cached("UPDATE webhook_outbox SET lease_until = ?1 WHERE id = ?2")?;
    let taken = webhook::fair_share(due, usize::try_from(limit).unwrap_or(usize::MAX));
    let mut claimed = Vec::with_capacity(taken.len());
    for due in taken {
        let (event, body, attempts, url, secret) =
            read.query_row(params![due.id.as_str()], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, i64>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, String>(4)?,
                ))
            })?;
        lease_stmt.execute(params![until.as_millis(), due.id.as_str()])?;
        claimed.push(ClaimedDelivery {
            id: due.id,
            tenant: due.tenant,
            webhook: due.webhook,
            event: WebhookEvent::parse(&event).map_err(|e| corrupt("delivery event", e))?,
            url: WebhookUrl::parse(url).map_err(|e| corrupt("webhook url", e))?,
            secret: WebhookSecret::from_stored(secret).map_err(|e| corrupt("webhook secret", e))?,
            body,
            attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
        });
    }
    Ok(claimed)
}

fn record_attempt(
    conn: &Connection,
    id: &DeliveryId,
    outcome: &AttemptOutcome,
) -> Result<(), OpError> {
    let row: Option<(String, i64)> = conn
        .prepare_cached("SELECT webhook, attempts FROM webhook_outbox WHERE id = ?1")?
        .query_row(params![id.as_str()], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    // Its endpoint was deleted meanwhile: nothing left to record.
    let Some((webhook, attempts)) = row else {
        return Ok(());
    };
    let attempts = u32::try_from(attempts)
        .unwrap_or(u32::MAX)
        .saturating_add(1);
    let counter = if outcome.succeeded() {
        Some("delivered")
    } else {
        match webhook::retry_delay(attempts) {
            Some(delay) => {
                let next = outcome
                    .at
                    .plus_millis(i64::try_from(delay.as_millis()).unwrap_or(i64::MAX));
                conn.prepare_cached(
                    "UPDATE webhook_outbox SET attempts = ?1, next_attempt_at = ?2, \
                     lease_until = 0 WHERE id = ?3",
                )?
                .execute(params![attempts, next.as_millis(), id.as_str()])?;
                None
            }
            None => Some("dead"),
        }
    };
    if let Some(counter) = counter {
        conn.prepare_cached("DELETE FROM webhook_outbox WHERE id = ?1")?
            .execute(params![id.as_str()])?;
        let sql = format!("UPDATE webhooks SET {counter} = {counter} + 1 WHERE id = ?1");
        conn.prepare_cached(&sql)?.execute(params![webhook])?;
    }
    let failures: Option<i64> = conn
        .prepare_cached("SELECT failures FROM webhooks WHERE id = ?1")?
        .query_row(params![webhook], |row| row.get(0))
        .optional()?;
    let failures = if outcome.succeeded() {
        0
    } else {
        u32::try_from(failures.unwrap_or(0))
            .unwrap_or(u32::MAX)
            .saturating_add(1)
    };
    let pause = webhook::endpoint_pause(failures);
    let paused_until = outcome
        .at
        .plus_millis(i64::try_from(pause.as_millis()).unwrap_or(i64::MAX));
    conn.prepare_cached(
        "UPDATE webhooks SET last_attempt_at = ?1, last_status = ?2, last_error = ?3, \
         failures = ?4, paused_until = ?5 WHERE id = ?6",
    )?
    .execute(params![
        outcome.at.as_millis(),
        outcome.status,
        outcome.error,
        failures,
        paused_until.as_millis(),
        webhook
    ])?;
    Ok(())
}
