//! Identifier newtypes. Each one is parsed once at the edge and is valid by
//! construction afterwards; the parsing rules are the ones that make each id
//! safe where it ends up (a collection or file name, a URL path segment).

use crate::error::ValidationError;
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;
use std::str::FromStr;

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident, $field:literal, $check:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Parses and validates `value`.
            pub fn parse(value: impl Into<String>) -> Result<Self, ValidationError> {
                let value: String = value.into();
                let check: fn(&str) -> Result<(), String> = $check;
                match check(&value) {
                    Ok(()) => Ok(Self(value)),
                    Err(reason) => Err(ValidationError::new($field, reason)),
                }
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }

        impl FromStr for $name {
            type Err = ValidationError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::parse(s)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let raw = String::deserialize(deserializer)?;
                Self::parse(raw).map_err(serde::de::Error::custom)
            }
        }
    };
}

fn check_tenant(value: &str) -> Result<(), String> {
    if value.is_empty() || value.len() > 63 {
        return Err("must be 1 to 63 characters".into());
    }
    if !value
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err("may contain only lowercase letters, digits and '-'".into());
    }
    if value.starts_with('-') || value.ends_with('-') {
        return Err("must start and end with a letter or digit".into());
    }
    Ok(())
}

fn check_run(value: &str) -> Result<(), String> {
    if value.is_empty() || value.len() > 128 {
        return Err("must be 1 to 128 characters".into());
    }
    if !value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err("may contain only letters, digits, '-', '_' and '.'".into());
    }
    if !value.as_bytes()[0].is_ascii_alphanumeric() {
        return Err("must start with a letter or digit".into());
    }
    Ok(())
}

fn check_prefixed_ulid(value: &str, prefix: &str) -> Result<(), String> {
    let Some(rest) = value.strip_prefix(prefix) else {
        return Err(format!("must look like {prefix}<26-character ULID>"));
    };
    // Upper case only (the ULID decoder takes either): checked in place,
    // not against an upper-cased copy, since ids are checked on every call.
    if rest.len() != 26
        || ulid::Ulid::from_string(rest).is_err()
        || rest.bytes().any(|b| b.is_ascii_lowercase())
    {
        return Err(format!("must look like {prefix}<26-character ULID>"));
    }
    Ok(())
}

string_id!(
    /// A tenant: 1-63 of `[a-z0-9-]`, starting and ending with a letter or
    /// digit. Safe as a MongoDB collection suffix and as a file name.
    TenantId, "tenant", check_tenant
);
string_id!(
    /// An agent run: 1-128 of `[A-Za-z0-9._-]`, starting with a letter or
    /// digit. Safe as a URL path segment (`/runs/{run}/mcp`).
    RunId, "run", check_run
);
string_id!(
    /// An issue: `iss_` followed by a ULID, so ids sort by creation time.
    IssueId, "id", |v| check_prefixed_ulid(v, "iss_")
);
string_id!(
    /// A comment: `cmt_` followed by a ULID.
    CommentId, "comment_id", |v| check_prefixed_ulid(v, "cmt_")
);
string_id!(
    /// A grant: `gr_` followed by a ULID.
    GrantId, "grant_id", |v| check_prefixed_ulid(v, "gr_")
);
string_id!(
    /// A webhook endpoint: `wh_` followed by a ULID.
    WebhookId, "webhook_id", |v| check_prefixed_ulid(v, "wh_")
);
string_id!(
    /// One delivery of one event to one endpoint: `dlv_` followed by a
    /// ULID; receivers dedupe by it.
    DeliveryId, "delivery_id", |v| check_prefixed_ulid(v, "dlv_")
);
string_id!(
    /// A caller-chosen idempotency key: 1-200 visible ASCII characters.
    IdempotencyKey, "idempotency_key", |v| {
        if v.is_empty() || v.len() > 200 {
            Err("must be 1 to 200 characters".into())
        } else if !v.bytes().all(|b| b.is_ascii_graphic()) {
            Err("may contain only visible ASCII characters".into())
        } else {
            Ok(())
        }
    }
);

impl IssueId {
    pub fn generate() -> Self {
        Self(format!("iss_{}", ulid::Ulid::new()))
    }
}

impl CommentId {
    pub fn generate() -> Self {
        Self(format!("cmt_{}", ulid::Ulid::new()))
    }
}

impl GrantId {
    pub fn generate() -> Self {
        Self(format!("gr_{}", ulid::Ulid::new()))
    }

    /// The grant of what people and admin-API callers do (they act under
    /// no grant), where a record needs one: an audit record of a web board
    /// action. The nil ULID, which [`GrantId::generate`] never makes.
    pub fn none() -> Self {
        Self(format!("gr_{}", ulid::Ulid::nil()))
    }

    /// Whether this is [`GrantId::none`].
    pub fn is_none(&self) -> bool {
        *self == Self::none()
    }
}

impl WebhookId {
    pub fn generate() -> Self {
        Self(format!("wh_{}", ulid::Ulid::new()))
    }
}

impl DeliveryId {
    /// The id of `occurrence`'s delivery to `webhook`, the same whenever
    /// it is made: a store that queues an event again (a keyed write
    /// replayed after its first answer was lost) finds the delivery
    /// already there instead of queueing a copy the receiver could not
    /// tell apart. `occurrence` names one event once (`issue.created` and
    /// the issue's id, say); its ids sort by `at`, as generated ones do.
    pub fn of_event(at: crate::Timestamp, occurrence: &str, webhook: &str) -> Self {
        use sha2::{Digest, Sha256};
        let digest = Sha256::new()
            .chain_update(occurrence.as_bytes())
            .chain_update([0])
            .chain_update(webhook.as_bytes())
            .finalize();
        // A ULID's random part is 80 bits: the digest's first ten bytes.
        let mut random = [0u8; 16];
        random[6..].copy_from_slice(&digest[..10]);
        let millis = u64::try_from(at.as_millis()).unwrap_or(0);
        Self(format!(
            "dlv_{}",
            ulid::Ulid::from_parts(millis, u128::from_be_bytes(random))
        ))
    }

    pub fn generate() -> Self {
        Self(format!("dlv_{}", ulid::Ulid::new()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_ids_are_safe_names() {
        for ok in ["a", "acme", "acme-2", &"x".repeat(63)] {
            TenantId::parse(ok).unwrap();
        }
        for bad in [
            "",
            "Acme",
            "a_b",
            "a.b",
            "-a",
            "a-",
            "a/b",
            "../x",
            &"x".repeat(64),
            "é",
        ] {
            let err = TenantId::parse(bad).unwrap_err();
            assert_eq!(err.field, "tenant", "{bad}");
        }
    }

    #[test]
    fn run_ids_are_path_segments() {
        RunId::parse("run-1.retry_2").unwrap();
        for bad in ["", ".", "..", "-x", "a/b", "a b", &"r".repeat(129)] {
            assert!(RunId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn generated_ids_parse_back_and_sort_by_time() {
        let a = IssueId::generate();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = IssueId::generate();
        assert_eq!(IssueId::parse(a.as_str()).unwrap(), a);
        assert!(a < b);
        assert!(IssueId::parse("iss_nope").is_err());
        assert!(IssueId::parse(b.as_str().to_lowercase()).is_err());
        GrantId::parse(GrantId::generate().into_string()).unwrap();
        CommentId::parse(CommentId::generate().into_string()).unwrap();
    }

    #[test]
    fn an_event_s_delivery_id_is_the_same_whenever_it_is_made() {
        let at = crate::Timestamp::from_millis(1_765_000_000_000);
        let id = DeliveryId::of_event(at, "issue.created iss_1", "wh_1");
        assert_eq!(id, DeliveryId::of_event(at, "issue.created iss_1", "wh_1"));
        assert_eq!(DeliveryId::parse(id.as_str()).unwrap(), id);
        for other in [
            DeliveryId::of_event(at, "issue.created iss_2", "wh_1"),
            DeliveryId::of_event(at, "issue.created iss_1", "wh_2"),
            // The separator keeps the two parts apart.
            DeliveryId::of_event(at, "issue.created iss_1w", "h_1"),
        ] {
            assert_ne!(id, other);
        }
        // Ordered by time like generated ids.
        let later = DeliveryId::of_event(at.plus_millis(1), "a", "wh_0");
        assert!(id < later);
    }

    #[test]
    fn deserialising_validates() {
        assert!(serde_json::from_str::<TenantId>("\"Bad\"").is_err());
        assert_eq!(
            serde_json::from_str::<TenantId>("\"ok\"").unwrap().as_str(),
            "ok"
        );
    }
}
