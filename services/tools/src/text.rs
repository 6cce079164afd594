//! Clean text in what agents write to the board, and credentials in it
//! and in upstream calls' arguments, decided once for both.
//!
//! A board write's free-text fields (`title`, `body`, a comment's `body`:
//! [`BoardTool::text_fields`](crate::BoardTool::text_fields)) are cleaned
//! by the domain's rules ([`corkboard_board::clean_text`]: invisible
//! characters, escape sequences and HTML comments stripped) before they
//! are parsed, so nothing stored can hide text from the next reader. A
//! credential in them (or in an upstream call's arguments) is refused or
//! redacted as the tenant's settings say ([`SecretPolicies`]; refused when
//! they cannot be read), and audited as `secret_refused` or
//! `secret_redacted`, never with its text. The tenant's settings are read
//! only when a credential is found, and kept for a few seconds.

use crate::error::ToolsError;
use corkboard_board::{GrantLedger, SecretPolicy, TenantId, clean_text, redact_secrets};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a tenant's secret policy is used before it is read again.
const POLICY_TTL: Duration = Duration::from_secs(5);
/// Most tenants' policies kept before the cache is emptied.
const POLICIES_MAX: usize = 4096;

/// Each tenant's [`SecretPolicy`] (its grant settings' `secrets`), read
/// from the ledger when a credential is found and kept for
/// [`POLICY_TTL`]. Without a ledger, or when it cannot be read in time,
/// the policy is [`SecretPolicy::Refuse`]: a credential never goes through
/// on a guess.
pub struct SecretPolicies {
    ledger: Option<Arc<dyn GrantLedger>>,
    timeout: Duration,
    cache: Mutex<HashMap<TenantId, (Instant, SecretPolicy)>>,
}

impl std::fmt::Debug for SecretPolicies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretPolicies")
            .field("ledger", &self.ledger.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for SecretPolicies {
    fn default() -> Self {
        Self {
            ledger: None,
            timeout: Duration::from_secs(2),
            cache: Mutex::new(HashMap::new()),
        }
    }
}

impl SecretPolicies {
    /// Reads each tenant's policy from `ledger`, each read bounded by
    /// `timeout`.
    pub fn new(ledger: Arc<dyn GrantLedger>, timeout: Duration) -> Self {
        Self {
            ledger: Some(ledger),
            timeout,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// `tenant`'s policy.
    pub async fn of(&self, tenant: &TenantId) -> SecretPolicy {
        let cached = self.lock().get(tenant).copied();
        if let Some((read, policy)) = cached
            && read.elapsed() < POLICY_TTL
        {
            return policy;
        }
        let Some(ledger) = &self.ledger else {
            return SecretPolicy::Refuse;
        };
        let policy = match tokio::time::timeout(self.timeout, ledger.grant_policy(tenant)).await {
            Ok(Ok(policy)) => policy.secrets,
            Ok(Err(err)) => {
                tracing::warn!(%tenant, error = %err, "tenant settings unreadable; credentials are refused");
                return SecretPolicy::Refuse;
            }
            Err(_) => {
                tracing::warn!(%tenant, "tenant settings timed out; credentials are refused");
                return SecretPolicy::Refuse;
            }
        };
        let mut cache = self.lock();
        if cache.len() >= POLICIES_MAX {
            cache.clear();
        }
        cache.insert(tenant.clone(), (Instant::now(), policy));
        policy
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TenantId, (Instant, SecretPolicy)>> {
        // Whole entries are inserted or cleared: a poisoned map is whole.
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What screening found: nothing to say, or credentials redacted (their
/// kinds).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Screened {
    pub redacted: Vec<&'static str>,
}

/// `map` with `fields` cleaned and screened for credentials, when that
/// changes anything (`None`: use `map` as it is). A credential under the
/// `Refuse` policy is [`ToolsError::SecretRefused`] naming the field and
/// the kind.
pub(crate) async fn screen_fields(
    policies: &SecretPolicies,
    tenant: &TenantId,
    map: &Map<String, Value>,
    fields: &[&'static str],
) -> Result<(Option<Map<String, Value>>, Screened), ToolsError> {
    let mut out: Option<Map<String, Value>> = None;
    let mut screened = Screened::default();
    for field in fields {
        let Some(Value::String(text)) = map.get(*field) else {
            continue;
        };
        let (mut cleaned, removed) = clean_text(text);
        let found = corkboard_board::find_secrets(&cleaned);
        if !found.is_empty() {
            let kinds = kinds_of(found.iter().map(|s| s.kind));
            match policies.of(tenant).await {
                SecretPolicy::Refuse => {
                    return Err(ToolsError::SecretRefused {
                        field: (*field).to_owned(),
                        kinds,
                    });
                }
                SecretPolicy::Redact => {
                    let (redacted, found) = redact_secrets(&cleaned);
                    cleaned = redacted;
                    screened.redacted.extend(found);
                }
            }
        } else if !removed.any() {
            continue;
        }
        out.get_or_insert_with(|| map.clone())
            .insert((*field).to_owned(), Value::String(cleaned));
    }
    Ok((out, screened))
}

/// An upstream call's argument bytes screened for credentials: `Ok(None)`
/// to send them as they are, `Ok(Some(bytes))` redacted (still the same
/// JSON but for the redacted strings), `Err(kinds)` refused.
pub async fn screen_arguments(
    policies: &SecretPolicies,
    tenant: &TenantId,
    raw: &[u8],
) -> Result<Option<(Vec<u8>, Screened)>, String> {
    let Ok(text) = std::str::from_utf8(raw) else {
        return Ok(None);
    };
    let found = corkboard_board::find_secrets(text);
    if found.is_empty() {
        return Ok(None);
    }
    let kinds = kinds_of(found.iter().map(|s| s.kind));
    match policies.of(tenant).await {
        SecretPolicy::Refuse => Err(kinds),
        SecretPolicy::Redact => {
            let (redacted, found) = redact_secrets(text);
            // A redaction that broke the JSON (a credential spanning an
            // escape it cannot) is refused instead of sent half-changed.
            if serde_json::from_str::<Value>(&redacted).is_err() {
                return Err(kinds);
            }
            Ok(Some((redacted.into_bytes(), Screened { redacted: found })))
        }
    }
}

/// The distinct kinds, in the order found, joined for a message.
fn kinds_of(kinds: impl Iterator<Item = &'static str>) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for kind in kinds {
        if !seen.contains(&kind) {
            seen.push(kind);
        }
    }
    seen.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tenant() -> TenantId {
        TenantId::parse("acme").unwrap()
    }

    #[actix_rt::test]
    async fn write_fields_are_cleaned_and_credentials_refused_without_a_policy() {
        let policies = SecretPolicies::default();
        let map =
            json!({ "title": "Fix\u{200B} it", "body": "see \u{1B}[2Jhere", "labels": ["a"] });
        let map = map.as_object().unwrap();
        let (cleaned, screened) = screen_fields(&policies, &tenant(), map, &["title", "body"])
            .await
            .unwrap();
        let cleaned = cleaned.expect("changed");
        assert_eq!(cleaned["title"], "Fix it");
        assert_eq!(cleaned["body"], "see here");
        assert_eq!(cleaned["labels"], json!(["a"]));
        assert!(screened.redacted.is_empty());
        let plain = json!({ "title": "Fine" });
        let (same, _) = screen_fields(&policies, &tenant(), plain.as_object().unwrap(), &["title"])
            .await
            .unwrap();
        assert!(same.is_none(), "clean text is used as it is");
        let key = json!({ "body": "key AKIAIOSFODNN7EXAMPLE" });
        let refused =
            screen_fields(&policies, &tenant(), key.as_object().unwrap(), &["body"]).await;
        let err = refused.unwrap_err();
        assert!(
            matches!(&err, ToolsError::SecretRefused { field, kinds } if field == "body" && kinds == "AWS access key")
        );
        assert!(!err.to_string().contains("AKIAIOSFODNN7EXAMPLE"), "{err}");
        let raw = br#"{"token":"ghp_abcdefghijklmnopqrstuvwxyz0123456789"}"#;
        assert_eq!(
            screen_arguments(&policies, &tenant(), raw)
                .await
                .unwrap_err(),
            "GitHub token"
        );
        assert!(
            screen_arguments(&policies, &tenant(), b"{\"a\":1}")
                .await
                .unwrap()
                .is_none()
        );
    }
}
