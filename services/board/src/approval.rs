//! Approvals: a tenant's policies naming the calls that need a person's
//! approval, and the item one such call becomes, bound to exactly that
//! call (tenant, run, grant, tool, a digest of its arguments, the policy's
//! name and version) with an expiry; approved once, used once.
//!
//! The rules live here, without IO: which policy covers a call
//! ([`ApprovalPolicies::covering`]), how arguments are digested
//! ([`arguments_digest`]), what a decision may change
//! ([`ApprovalItem::decide`]) and when an approved item lets its call run
//! ([`ApprovalItem::redeem`]). Stores keep items; the gateway asks.

use crate::error::ValidationError;
use crate::ids::{GrantId, RunId, TenantId};
use crate::timestamp::Timestamp;
use crate::upstream::{UpstreamName, UpstreamPattern, glob_match};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::fmt;

/// The most approval policies one tenant may have.
pub const APPROVAL_POLICIES_MAX: usize = 32;
/// The most argument patterns one policy may have.
pub const APPROVAL_ARGUMENTS_MAX: usize = 8;
/// How long an item waits for a decision, and an approval for its call,
/// when the policy says nothing.
pub const APPROVAL_TTL_DEFAULT_SECS: u64 = 3600;
/// The longest an item may wait.
pub const APPROVAL_TTL_MAX_SECS: u64 = 7 * 24 * 3600;
/// The longest reason a person may give.
pub const APPROVAL_REASON_MAX: usize = 2000;
/// The largest arguments (JSON text) kept on an item for people to read.
pub const APPROVAL_ARGUMENTS_BYTES_MAX: usize = 64 * 1024;

/// The tools a policy covers: a board tool (`update_issue`, or a glob like
/// `*_issue`) or an upstream's (`upstream:<name>:<glob>`, as in grants).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolMatch {
    Board(String),
    Upstream(UpstreamPattern),
}

impl ToolMatch {
    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        if text.starts_with(UpstreamPattern::PREFIX) {
            return UpstreamPattern::parse(text)
                .map(Self::Upstream)
                .map_err(|e| ValidationError::new("tool", e.reason));
        }
        let ok = !text.is_empty()
            && text.len() <= 128
            && text
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '*'));
        if !ok {
            return Err(ValidationError::new(
                "tool",
                format!(
                    "bad tool pattern {text:?}: a board tool name or glob (update_issue, *_issue) \
                     or upstream:<name>:<tool glob>"
                ),
            ));
        }
        Ok(Self::Board(text.to_owned()))
    }

    /// Whether this covers `called`, the tool name as the agent called it
    /// (`update_issue`, or `github__issue_write` for an upstream's).
    pub fn covers(&self, called: &str) -> bool {
        match (self, called.split_once("__")) {
            (Self::Upstream(pattern), Some((upstream, tool))) => {
                UpstreamName::parse(upstream).is_ok_and(|name| pattern.allows(&name, tool))
            }
            (Self::Board(glob), None) => glob_match(glob.as_bytes(), called.as_bytes()),
            _ => false,
        }
    }
}

/// An argument pattern: the value at `pointer` (RFC 6901, e.g. `/state`)
/// matches `glob` (a string as is, anything else as its JSON text). A
/// missing value never matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgumentMatch {
    pub pointer: String,
    pub glob: String,
}

impl ArgumentMatch {
    fn validate(&self) -> Result<(), ValidationError> {
        if !(self.pointer.is_empty() || self.pointer.starts_with('/')) || self.pointer.len() > 256 {
            return Err(ValidationError::new(
                "arguments.pointer",
                "a JSON pointer such as /state (at most 256 characters)",
            ));
        }
        if self.glob.is_empty() || self.glob.len() > 256 {
            return Err(ValidationError::new(
                "arguments.glob",
                "1 to 256 characters; * matches any run of characters",
            ));
        }
        Ok(())
    }

    fn matches(&self, arguments: &Value) -> bool {
        let Some(value) = arguments.pointer(&self.pointer) else {
            return false;
        };
        let text = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        glob_match(self.glob.as_bytes(), text.as_bytes())
    }
}

/// One policy: the calls of `tool` (by the grants listed, or any grant when
/// none are; whose arguments match every pattern, or any arguments when
/// there are none) need a person's approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalPolicy {
    /// 1-64 of `[a-z0-9-]`: what items and people call it.
    pub name: String,
    /// A [`ToolMatch`] in its text form.
    pub tool: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<GrantId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<ArgumentMatch>,
    /// How long an item waits for a decision (seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_secs: Option<u64>,
    /// Set by the server: 1 when the policy is first stored, one more with
    /// every change, so an item says which wording of it applied.
    #[serde(default)]
    pub version: u64,
}

impl ApprovalPolicy {
    pub fn validate(&self) -> Result<(), ValidationError> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !name_ok {
            return Err(ValidationError::new(
                "name",
                "a policy name is 1-64 of a-z, 0-9 and '-'",
            ));
        }
        ToolMatch::parse(&self.tool)?;
        if self.arguments.len() > APPROVAL_ARGUMENTS_MAX {
            return Err(ValidationError::new(
                "arguments",
                format!("at most {APPROVAL_ARGUMENTS_MAX} argument patterns per policy"),
            ));
        }
        for argument in &self.arguments {
            argument.validate()?;
        }
        if let Some(ttl) = self.ttl_secs
            && !(1..=APPROVAL_TTL_MAX_SECS).contains(&ttl)
        {
            return Err(ValidationError::new(
                "ttl",
                format!("between 1s and {APPROVAL_TTL_MAX_SECS}s"),
            ));
        }
        Ok(())
    }

    /// Whether this policy covers a call of `tool` with `arguments` by `grant`.
    pub fn covers(&self, grant: &GrantId, tool: &str, arguments: &Value) -> bool {
        (self.grants.is_empty() || self.grants.contains(grant))
            && ToolMatch::parse(&self.tool).is_ok_and(|m| m.covers(tool))
            && self.arguments.iter().all(|a| a.matches(arguments))
    }

    pub fn ttl_secs(&self) -> u64 {
        self.ttl_secs.unwrap_or(APPROVAL_TTL_DEFAULT_SECS)
    }

    /// The same policy, ignoring its version.
    fn same_rule(&self, other: &Self) -> bool {
        Self {
            version: 0,
            ..self.clone()
        } == Self {
            version: 0,
            ..other.clone()
        }
    }
}

/// A tenant's approval policies, kept with its other settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ApprovalPolicies(pub Vec<ApprovalPolicy>);

impl ApprovalPolicies {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn validate(&self) -> Result<(), ValidationError> {
        if self.0.len() > APPROVAL_POLICIES_MAX {
            return Err(ValidationError::new(
                "approvals",
                format!("at most {APPROVAL_POLICIES_MAX} approval policies per tenant"),
            ));
        }
        for (i, policy) in self.0.iter().enumerate() {
            policy.validate()?;
            if self.0[..i].iter().any(|p| p.name == policy.name) {
                return Err(ValidationError::new(
                    "approvals",
                    format!("two policies are named {:?}", policy.name),
                ));
            }
        }
        Ok(())
    }

    /// The first policy covering the call, if any.
    pub fn covering(
        &self,
        grant: &GrantId,
        tool: &str,
        arguments: &Value,
    ) -> Option<&ApprovalPolicy> {
        self.0.iter().find(|p| p.covers(grant, tool, arguments))
    }

    /// These policies as stored after `previous`: an unchanged policy keeps
    /// its version, a changed one gets the next, a new one version 1.
    pub fn versioned_after(mut self, previous: &Self) -> Self {
        for policy in &mut self.0 {
            policy.version = match previous.0.iter().find(|p| p.name == policy.name) {
                Some(old) if old.same_rule(policy) => old.version.max(1),
                Some(old) => old.version + 1,
                None => 1,
            };
        }
        self
    }
}

/// Hex SHA-256 of a call's arguments in a canonical form (object members
/// sorted by name, no insignificant whitespace), so the same call sent
/// again by any client digests the same, and any other call does not.
pub fn arguments_digest(arguments: &Map<String, Value>) -> String {
    let mut hasher = Sha256::new();
    canonical(&Value::Object(arguments.clone()), &mut hasher);
    crate::digest::hex_of(&hasher.finalize().into())
}

fn canonical(value: &Value, out: &mut Sha256) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.update(b"{");
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.update(b",");
                }
                out.update(Value::String(key.clone()).to_string().as_bytes());
                out.update(b":");
                canonical(&map[key], out);
            }
            out.update(b"}");
        }
        Value::Array(items) => {
            out.update(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.update(b",");
                }
                canonical(item, out);
            }
            out.update(b"]");
        }
        other => out.update(other.to_string().as_bytes()),
    }
}

/// An approval item's id: `apr_` followed by a ULID.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ApprovalId(String);

impl ApprovalId {
    pub fn generate() -> Self {
        Self(format!("apr_{}", ulid::Ulid::new()))
    }

    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        let ok = text.strip_prefix("apr_").is_some_and(|rest| {
            rest.len() == 26
                && ulid::Ulid::from_string(rest).is_ok()
                && rest == rest.to_ascii_uppercase()
        });
        if ok {
            Ok(Self(text.to_owned()))
        } else {
            Err(ValidationError::new(
                "approval",
                "must look like apr_<26-character ULID>",
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ApprovalId {
    type Error = ValidationError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<ApprovalId> for String {
    fn from(id: ApprovalId) -> String {
        id.0
    }
}

impl fmt::Display for ApprovalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where an item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    /// Waiting for a person.
    Pending,
    /// A person approved it; its call may run once.
    Approved,
    /// A person denied it; its call never runs.
    Denied,
    /// Its approved call ran (or began to): it is spent.
    Used,
}

impl ApprovalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Used => "used",
        }
    }

    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        [Self::Pending, Self::Approved, Self::Denied, Self::Used]
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| {
                ValidationError::new("status", "expected pending, approved, denied or used")
            })
    }
}

/// A person's decision on an item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub approve: bool,
    /// The admin subject of whoever decided.
    pub by: String,
    pub reason: Option<String>,
    pub at: Timestamp,
}

/// One call waiting for (or carrying) a person's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalItem {
    pub id: ApprovalId,
    pub tenant: TenantId,
    pub run: RunId,
    pub grant: GrantId,
    /// The tool as the agent called it.
    pub tool: String,
    /// [`arguments_digest`] of the call's arguments.
    pub digest: String,
    /// The arguments (JSON text) for the person to read; never logged.
    pub arguments: String,
    pub policy: String,
    pub policy_version: u64,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    pub status: ApprovalStatus,
    #[serde(default)]
    pub decision: Option<Decision>,
}

/// Why an item does not let its call run, or cannot be decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalRefusal {
    /// Still waiting for a person.
    Pending,
    /// Denied, with the decision.
    Denied(Decision),
    /// Approved and already used: an approval runs its call once.
    Used,
    /// Past its expiry.
    Expired,
    /// Another call than the one approved (tool, arguments, run or grant).
    OtherCall,
    /// Already decided.
    Decided,
}

impl fmt::Display for ApprovalRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pending => f.write_str("the call still awaits a person's approval"),
            Self::Denied(d) => write!(
                f,
                "a person ({}) denied the call: {}",
                d.by,
                d.reason.as_deref().unwrap_or("no reason given")
            ),
            Self::Used => f.write_str("this approval was already used: it runs its call once"),
            Self::Expired => f.write_str("this approval has expired"),
            Self::OtherCall => f.write_str(
                "this approval is for another call (tool, arguments, run or grant differ)",
            ),
            Self::Decided => f.write_str("this approval was already decided"),
        }
    }
}

impl std::error::Error for ApprovalRefusal {}

impl crate::error_code::ErrorCode for ApprovalRefusal {
    fn error_code(&self) -> crate::error_code::Code {
        use crate::error_code::Code;
        match self {
            Self::Expired => Code::ApprovalExpired,
            Self::Decided | Self::Used | Self::Denied(_) => Code::ApprovalDecided,
            Self::Pending | Self::OtherCall => Code::BadRequest,
        }
    }
}

impl ApprovalItem {
    /// A pending item for a call `policy` covers, expiring after the
    /// policy's wait.
    pub fn new(
        tenant: TenantId,
        run: RunId,
        grant: GrantId,
        tool: &str,
        arguments: &Map<String, Value>,
        policy: &ApprovalPolicy,
        now: Timestamp,
    ) -> Self {
        let mut text = Value::Object(arguments.clone()).to_string();
        if text.len() > APPROVAL_ARGUMENTS_BYTES_MAX {
            let mut cut = APPROVAL_ARGUMENTS_BYTES_MAX;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push_str("… (cut)");
        }
        let ttl_ms = i64::try_from(policy.ttl_secs().saturating_mul(1000)).unwrap_or(i64::MAX);
        Self {
            id: ApprovalId::generate(),
            tenant,
            run,
            grant,
            tool: tool.to_owned(),
            digest: arguments_digest(arguments),
            arguments: text,
            policy: policy.name.clone(),
            policy_version: policy.version,
            created_at: now,
            expires_at: Timestamp::from_millis(now.as_millis().saturating_add(ttl_ms)),
            status: ApprovalStatus::Pending,
            decision: None,
        }
    }

    /// What webhooks and the live feed say about this item: everything but
    /// the arguments, which only people on the board read.
    pub fn event_data(&self) -> Value {
        serde_json::json!({ "approval": {
            "id": self.id,
            "run": self.run,
            "grant": self.grant,
            "tool": self.tool,
            "digest": self.digest,
            "policy": self.policy,
            "policy_version": self.policy_version,
            "status": self.status,
            "expires_at": self.expires_at,
            "decision": self.decision,
        } })
    }

    pub fn is_expired_at(&self, now: Timestamp) -> bool {
        now >= self.expires_at
    }

    /// Whether this item is for exactly this call.
    pub fn is_for(&self, run: &RunId, grant: &GrantId, tool: &str, digest: &str) -> bool {
        &self.run == run && &self.grant == grant && self.tool == tool && self.digest == digest
    }

    /// A person's decision: only a pending, unexpired item takes one.
    pub fn decide(&mut self, decision: Decision) -> Result<(), ApprovalRefusal> {
        if self.status != ApprovalStatus::Pending {
            return Err(ApprovalRefusal::Decided);
        }
        if self.is_expired_at(decision.at) {
            return Err(ApprovalRefusal::Expired);
        }
        self.status = if decision.approve {
            ApprovalStatus::Approved
        } else {
            ApprovalStatus::Denied
        };
        self.decision = Some(decision);
        Ok(())
    }

    /// Whether this item lets exactly this call run now: approved, unused,
    /// unexpired, and for this run, grant, tool and arguments. The store
    /// then marks it used in one conditional write (single use).
    pub fn redeem(
        &self,
        run: &RunId,
        grant: &GrantId,
        tool: &str,
        digest: &str,
        now: Timestamp,
    ) -> Result<(), ApprovalRefusal> {
        if !self.is_for(run, grant, tool, digest) {
            return Err(ApprovalRefusal::OtherCall);
        }
        match self.status {
            ApprovalStatus::Pending if self.is_expired_at(now) => Err(ApprovalRefusal::Expired),
            ApprovalStatus::Pending => Err(ApprovalRefusal::Pending),
            ApprovalStatus::Denied => Err(ApprovalRefusal::Denied(
                self.decision.clone().unwrap_or(Decision {
                    approve: false,
                    by: "unknown".into(),
                    reason: None,
                    at: now,
                }),
            )),
            ApprovalStatus::Used => Err(ApprovalRefusal::Used),
            ApprovalStatus::Approved if self.is_expired_at(now) => Err(ApprovalRefusal::Expired),
            ApprovalStatus::Approved => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(tool: &str) -> ApprovalPolicy {
        ApprovalPolicy {
            name: "p".into(),
            tool: tool.into(),
            grants: vec![],
            arguments: vec![],
            ttl_secs: Some(60),
            version: 1,
        }
    }

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn policies_cover_board_and_upstream_tools_by_grant_and_arguments() {
        let grant = GrantId::generate();
        let other = GrantId::generate();
        let none = json!({});
        assert!(policy("update_issue").covers(&grant, "update_issue", &none));
        assert!(policy("*_issue").covers(&grant, "claim_issue", &none));
        assert!(!policy("update_issue").covers(&grant, "github__update_issue", &none));
        let up = policy("upstream:github:issue_*");
        assert!(up.covers(&grant, "github__issue_write", &none));
        assert!(!up.covers(&grant, "gitlab__issue_write", &none));
        assert!(!up.covers(&grant, "issue_write", &none));
        let mut only = policy("update_issue");
        only.grants = vec![grant.clone()];
        assert!(!only.covers(&other, "update_issue", &none));
        let mut closing = policy("update_issue");
        closing.arguments = vec![ArgumentMatch {
            pointer: "/state".into(),
            glob: "clos*".into(),
        }];
        assert!(closing.covers(&grant, "update_issue", &json!({"state": "closed"})));
        assert!(!closing.covers(&grant, "update_issue", &json!({"state": "todo"})));
        assert!(!closing.covers(&grant, "update_issue", &json!({})));
        for bad in ["", "Update", "upstream:", "upstream:Git:x", "a b"] {
            assert!(policy(bad).validate().is_err(), "{bad}");
        }
    }

    #[test]
    fn versions_move_only_when_a_policy_changes() {
        let first = ApprovalPolicies(vec![policy("update_issue")])
            .versioned_after(&ApprovalPolicies::default());
        assert_eq!(first.0[0].version, 1);
        let same = ApprovalPolicies(vec![policy("update_issue")]).versioned_after(&first);
        assert_eq!(same.0[0].version, 1);
        let changed = ApprovalPolicies(vec![policy("create_issue")]).versioned_after(&same);
        assert_eq!(changed.0[0].version, 2);
    }

    #[test]
    fn digests_ignore_member_order_and_nothing_else() {
        let a = arguments_digest(&args(json!({"a": 1, "b": {"y": [1, "x"], "x": null}})));
        let b = arguments_digest(&args(json!({"b": {"x": null, "y": [1, "x"]}, "a": 1})));
        let c = arguments_digest(&args(json!({"a": 2, "b": {"x": null, "y": [1, "x"]}})));
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn an_item_runs_exactly_its_approved_call_once_before_it_expires() {
        let now = Timestamp::from_millis(1_000_000);
        let tenant = TenantId::parse("acme").unwrap();
        let run = RunId::parse("r").unwrap();
        let grant = GrantId::generate();
        let arguments = args(json!({"id": "x", "state": "closed"}));
        let mut item = ApprovalItem::new(
            tenant,
            run.clone(),
            grant.clone(),
            "update_issue",
            &arguments,
            &policy("update_issue"),
            now,
        );
        let digest = arguments_digest(&arguments);
        let later = Timestamp::from_millis(now.as_millis() + 1000);
        assert_eq!(
            item.redeem(&run, &grant, "update_issue", &digest, later),
            Err(ApprovalRefusal::Pending)
        );
        let decision = Decision {
            approve: true,
            by: "alice".into(),
            reason: None,
            at: later,
        };
        item.decide(decision.clone()).unwrap();
        assert_eq!(item.decide(decision), Err(ApprovalRefusal::Decided));
        assert_eq!(
            item.redeem(&run, &grant, "update_issue", &digest, later),
            Ok(())
        );
        let other = arguments_digest(&args(json!({"id": "y", "state": "closed"})));
        assert_eq!(
            item.redeem(&run, &grant, "update_issue", &other, later),
            Err(ApprovalRefusal::OtherCall)
        );
        assert_eq!(
            item.redeem(
                &RunId::parse("s").unwrap(),
                &grant,
                "update_issue",
                &digest,
                later
            ),
            Err(ApprovalRefusal::OtherCall)
        );
        let expired = Timestamp::from_millis(item.expires_at.as_millis());
        assert_eq!(
            item.redeem(&run, &grant, "update_issue", &digest, expired),
            Err(ApprovalRefusal::Expired)
        );
        item.status = ApprovalStatus::Used;
        assert_eq!(
            item.redeem(&run, &grant, "update_issue", &digest, later),
            Err(ApprovalRefusal::Used)
        );
    }

    #[test]
    fn a_denial_carries_the_reason() {
        let now = Timestamp::from_millis(1_000_000);
        let arguments = args(json!({}));
        let mut item = ApprovalItem::new(
            TenantId::parse("acme").unwrap(),
            RunId::parse("r").unwrap(),
            GrantId::generate(),
            "create_issue",
            &arguments,
            &policy("create_issue"),
            now,
        );
        item.decide(Decision {
            approve: false,
            by: "bob".into(),
            reason: Some("not today".into()),
            at: now,
        })
        .unwrap();
        let refusal = item
            .redeem(
                &item.run.clone(),
                &item.grant.clone(),
                "create_issue",
                &arguments_digest(&arguments),
                now,
            )
            .unwrap_err();
        assert!(refusal.to_string().contains("not today"), "{refusal}");
        assert!(refusal.to_string().contains("bob"), "{refusal}");
    }
}
