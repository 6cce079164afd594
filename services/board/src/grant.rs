//! Grants: what one agent run may do on one tenant's board, until when.

use crate::approval::ApprovalPolicies;
use crate::error::ValidationError;
use crate::ids::{GrantId, RunId, TenantId};
use crate::integrity::Integrity;
use crate::timestamp::Timestamp;
use crate::upstream::{UpstreamName, UpstreamPattern};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

/// One thing a grant allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Capability {
    /// `get_issue`, `list_issues`.
    IssuesRead,
    /// `create_issue`.
    IssuesCreate,
    /// `update_issue`.
    IssuesUpdate,
    /// `add_comment`.
    CommentsWrite,
    /// `claim_issue`, `release_issue`.
    IssuesClaim,
}

impl Capability {
    /// Every capability. Append only: a capability's index is its bit in
    /// the tool sets' masks.
    pub const ALL: [Capability; 5] = [
        Self::IssuesRead,
        Self::IssuesCreate,
        Self::IssuesUpdate,
        Self::CommentsWrite,
        Self::IssuesClaim,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::IssuesRead => "issues:read",
            Self::IssuesCreate => "issues:create",
            Self::IssuesUpdate => "issues:update",
            Self::CommentsWrite => "comments:write",
            Self::IssuesClaim => "issues:claim",
        }
    }

    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        Self::ALL
            .into_iter()
            .find(|c| c.as_str() == text)
            .ok_or_else(|| {
                ValidationError::new(
                    "capabilities",
                    format!(
                        "unknown capability {text:?}; expected one of {}",
                        Self::ALL.map(Self::as_str).join(", ")
                    ),
                )
            })
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Capability {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Capability {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self::parse(&String::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

/// A non-empty set of capabilities: the board's, and patterns naming
/// upstream tools (`upstream:<name>:<glob>`, see [`UpstreamPattern`]).
/// Both travel as one list of strings (CSV in SQLite, an array in JSON,
/// Redis and MongoDB), so every place that stores a grant stores both.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Capabilities {
    board: BTreeSet<Capability>,
    upstream: BTreeSet<UpstreamPattern>,
}

impl Capabilities {
    pub fn parse_list<I, S>(items: I) -> Result<Self, ValidationError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut board = BTreeSet::new();
        let mut upstream = BTreeSet::new();
        for item in items {
            let item = item.as_ref().trim();
            if item.starts_with(UpstreamPattern::PREFIX) {
                upstream.insert(UpstreamPattern::parse(item)?);
            } else {
                board.insert(Capability::parse(item)?);
            }
        }
        if board.is_empty() && upstream.is_empty() {
            return Err(ValidationError::new(
                "capabilities",
                "at least one capability is required",
            ));
        }
        Ok(Self { board, upstream })
    }

    /// Parses a comma-separated list such as `issues:read,issues:create`.
    pub fn parse_csv(text: &str) -> Result<Self, ValidationError> {
        Self::parse_list(text.split(',').filter(|s| !s.trim().is_empty()))
    }

    pub fn all() -> Self {
        Self {
            board: Capability::ALL.into_iter().collect(),
            upstream: BTreeSet::new(),
        }
    }

    pub fn allows(&self, capability: Capability) -> bool {
        self.board.contains(&capability)
    }

    /// The board capabilities.
    pub fn iter(&self) -> impl Iterator<Item = Capability> + '_ {
        self.board.iter().copied()
    }

    /// The upstream patterns.
    pub fn upstream_patterns(&self) -> impl Iterator<Item = &UpstreamPattern> + '_ {
        self.upstream.iter()
    }

    /// Whether any pattern allows `tool` of `upstream`.
    pub fn allows_upstream(&self, upstream: &UpstreamName, tool: &str) -> bool {
        self.upstream.iter().any(|p| p.allows(upstream, tool))
    }

    /// Every capability as written: the board's, then the upstream patterns.
    pub fn names(&self) -> Vec<String> {
        self.board
            .iter()
            .map(|c| c.as_str().to_owned())
            .chain(self.upstream.iter().map(ToString::to_string))
            .collect()
    }

    pub fn to_csv(&self) -> String {
        self.names().join(",")
    }
}

impl Serialize for Capabilities {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.names())
    }
}

impl<'de> Deserialize<'de> for Capabilities {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self::parse_list(Vec::<String>::deserialize(deserializer)?)
            .map_err(serde::de::Error::custom)
    }
}

/// A tenant-pinned permission for one run. The tenant of every board
/// operation an agent makes comes from here and nowhere else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub id: GrantId,
    pub tenant: TenantId,
    pub run: RunId,
    pub capabilities: Capabilities,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    /// The admin principal (JWT subject, or `local`) that created it.
    pub created_by: String,
    /// What the run may write in total (none: unlimited). Set when the
    /// grant is issued and never changed, so every copy (ledger, registry)
    /// agrees.
    #[serde(default, skip_serializing_if = "Budgets::is_empty")]
    pub budgets: Budgets,
    /// The lowest [`Integrity`] of what the run is shown (none: all of
    /// it). Set when the grant is issued and never changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_integrity: Option<Integrity>,
}

impl Grant {
    pub fn is_expired_at(&self, now: Timestamp) -> bool {
        now >= self.expires_at
    }
}

/// A write a run's budget can limit, named after its tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BudgetKind {
    /// Issues created (`create_issue`; a replay creates nothing).
    CreateIssue,
    /// Updates (`update_issue`).
    UpdateIssue,
    /// Comments added (`add_comment`; a replay adds nothing).
    AddComment,
    /// Claims taken (`claim_issue`; taking one's own claim again counts
    /// too: the store cannot tell it apart before it answers).
    ClaimIssue,
    /// Claims released (`release_issue`; a refused release counts nothing).
    ReleaseIssue,
}

impl BudgetKind {
    pub const ALL: [BudgetKind; 5] = [
        Self::CreateIssue,
        Self::UpdateIssue,
        Self::AddComment,
        Self::ClaimIssue,
        Self::ReleaseIssue,
    ];

    /// The budget's name: its tool's.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CreateIssue => "create_issue",
            Self::UpdateIssue => "update_issue",
            Self::AddComment => "add_comment",
            Self::ClaimIssue => "claim_issue",
            Self::ReleaseIssue => "release_issue",
        }
    }

    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == text)
            .ok_or_else(|| {
                ValidationError::new(
                    "budgets",
                    format!(
                        "unknown budget {text:?}; expected one of {}",
                        Self::ALL.map(Self::as_str).join(", ")
                    ),
                )
            })
    }

    /// What a limit allows, in words: "create at most 3 issues".
    pub fn allowance(self, limit: u32) -> String {
        let (verb, one, many) = match self {
            Self::CreateIssue => ("create", "issue", "issues"),
            Self::UpdateIssue => ("make", "update", "updates"),
            Self::AddComment => ("add", "comment", "comments"),
            Self::ClaimIssue => ("take", "claim", "claims"),
            Self::ReleaseIssue => ("release", "claim", "claims"),
        };
        format!(
            "{verb} at most {limit} {}",
            if limit == 1 { one } else { many }
        )
    }

    /// What `used` writes were, in words: "3 created".
    pub fn spent(self, used: u32) -> String {
        match self {
            Self::CreateIssue => format!("{used} created"),
            Self::UpdateIssue => format!("{used} made"),
            Self::AddComment => format!("{used} added"),
            Self::ClaimIssue => format!("{used} taken"),
            Self::ReleaseIssue => format!("{used} released"),
        }
    }
}

impl fmt::Display for BudgetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for BudgetKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for BudgetKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self::parse(&String::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

/// Per-run write budgets: at most so many writes of each kind over the
/// grant's whole life (renewals included). A kind left out is unlimited.
/// One shape everywhere: `{"create_issue": 3, "add_comment": 10}` in JSON
/// (admin API, register API, Redis, MongoDB, SQLite), `create_issue=3,...`
/// on the command line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Budgets(BTreeMap<BudgetKind, u32>);

impl Budgets {
    /// The largest limit one budget may have.
    pub const MAX: u32 = 1_000_000;

    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `kind`'s limit; more than [`Self::MAX`] is refused.
    pub fn with(mut self, kind: BudgetKind, limit: u32) -> Result<Self, ValidationError> {
        if limit > Self::MAX {
            return Err(ValidationError::new(
                "budgets",
                format!("{kind} must be at most {}", Self::MAX),
            ));
        }
        self.0.insert(kind, limit);
        Ok(self)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn limit(&self, kind: BudgetKind) -> Option<u32> {
        self.0.get(&kind).copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = (BudgetKind, u32)> + '_ {
        self.0.iter().map(|(k, v)| (*k, *v))
    }

    /// Refuses limits above [`Self::MAX`] (deserialised ones included).
    pub fn validate(&self) -> Result<(), ValidationError> {
        self.iter()
            .try_fold(Self::new(), |acc, (kind, limit)| acc.with(kind, limit))
            .map(|_| ())
    }

    /// Parses `create_issue=3,add_comment=10` (the CLI's spelling).
    pub fn parse_csv(text: &str) -> Result<Self, ValidationError> {
        let mut out = Self::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (kind, limit) = item.split_once('=').ok_or_else(|| {
                ValidationError::new(
                    "budgets",
                    format!("expected kind=limit like create_issue=3, got {item:?}"),
                )
            })?;
            let kind = BudgetKind::parse(kind.trim())?;
            let limit: u32 = limit.trim().parse().map_err(|_| {
                ValidationError::new(
                    "budgets",
                    format!(
                        "{kind}: limit must be a whole number, got {:?}",
                        limit.trim()
                    ),
                )
            })?;
            out = out.with(kind, limit)?;
        }
        Ok(out)
    }

    pub fn to_csv(&self) -> String {
        self.iter()
            .map(|(kind, limit)| format!("{kind}={limit}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// These budgets under a tenant's defaults: per kind the smaller of
    /// the two, and a kind only the defaults name gets the default. A run
    /// may ask for less than its tenant allows, never more.
    pub fn within(&self, defaults: &Budgets) -> Budgets {
        let mut out = self.0.clone();
        for (kind, default) in defaults.iter() {
            out.entry(kind)
                .and_modify(|own| *own = (*own).min(default))
                .or_insert(default);
        }
        Budgets(out)
    }
}

/// One budget of a grant as the admin API shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetStatus {
    pub limit: u32,
    pub used: u32,
    pub remaining: u32,
}

impl BudgetStatus {
    pub fn new(limit: u32, used: u32) -> Self {
        Self {
            limit,
            used,
            remaining: limit.saturating_sub(used),
        }
    }
}

/// Whether a recorded grant still works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantStatus {
    Active,
    Revoked,
    Expired,
}

/// A grant as the durable ledger keeps it: who created and revoked it, when,
/// and the hash (never the token) needed to rebuild the registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantEvent {
    pub grant: Grant,
    /// Hex SHA-256 of the run token.
    #[serde(skip_serializing)]
    pub token_hash: String,
    pub revoked_at: Option<Timestamp>,
    pub revoked_by: Option<String>,
}

impl GrantEvent {
    pub fn status_at(&self, now: Timestamp) -> GrantStatus {
        if self.revoked_at.is_some() {
            GrantStatus::Revoked
        } else if self.grant.is_expired_at(now) {
            GrantStatus::Expired
        } else {
            GrantStatus::Active
        }
    }
}

/// A tenant's own grant settings, set once by its admin and kept in the
/// board store; a field left unset falls back to the operator's
/// configuration. Renewal limits and the budgets of runs' grants.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantPolicy {
    /// Lifetime of a run's grant (the register API, `corkboard run`): a run
    /// asking for less gets less, one asking for more or nothing gets this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_ttl_secs: Option<u64>,
    /// How long a grant may live in all, renewals included, counted from
    /// its creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lifetime_secs: Option<u64>,
    /// Budgets of a run's grant (the register API, `corkboard run`): a run
    /// asking for less gets less, one asking for more or nothing gets
    /// these (see [`Budgets::within`]).
    #[serde(default, skip_serializing_if = "Budgets::is_empty")]
    pub run_budgets: Budgets,
    /// What board writes and upstream calls carrying a credential get
    /// (refused, the default, or redacted).
    #[serde(default)]
    pub secrets: crate::SecretPolicy,
    /// The calls that need a person's approval (see `approval.rs`).
    #[serde(default, skip_serializing_if = "ApprovalPolicies::is_empty")]
    pub approvals: ApprovalPolicies,
}

impl GrantPolicy {
    /// Refuses zero lifetimes (a grant that could never be used).
    pub fn validate(&self) -> Result<(), ValidationError> {
        if self.run_ttl_secs == Some(0) {
            return Err(ValidationError::new("run_ttl", "must be at least 1s"));
        }
        if self.max_lifetime_secs == Some(0) {
            return Err(ValidationError::new("max_lifetime", "must be at least 1s"));
        }
        self.run_budgets.validate()?;
        self.approvals.validate()
    }
}

/// A grant lifetime (or any duration an operator types) like `90s`, `15m`,
/// `1h`, `7d`: the admin API, the register API and the CLI all read it
/// here, so they accept and refuse the same spellings.
pub fn parse_ttl(text: &str) -> Result<Duration, ValidationError> {
    let bad = || ValidationError::new("ttl", "expected a duration like 90s, 15m, 1h or 7d");
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (n, unit) = text.split_at(split);
    let n: u64 = n.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => n,
        "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3600),
        "d" => n.saturating_mul(86_400),
        _ => return Err(bad()),
    };
    Ok(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_parse_from_csv() {
        let caps = Capabilities::parse_csv("issues:read, issues:create").unwrap();
        assert!(caps.allows(Capability::IssuesRead));
        assert!(!caps.allows(Capability::CommentsWrite));
        assert_eq!(caps.to_csv(), "issues:read,issues:create");
        assert!(Capabilities::parse_csv("").is_err());
        let err = Capabilities::parse_csv("issues:delete").unwrap_err();
        assert!(err.reason.contains("issues:delete"));
    }

    #[test]
    fn upstream_patterns_travel_with_board_capabilities() {
        let caps = Capabilities::parse_csv("issues:read,upstream:github:issue_*").unwrap();
        let github = UpstreamName::parse("github").unwrap();
        assert!(caps.allows(Capability::IssuesRead));
        assert!(caps.allows_upstream(&github, "issue_read"));
        assert!(!caps.allows_upstream(&github, "pr_merge"));
        assert_eq!(caps.to_csv(), "issues:read,upstream:github:issue_*");
        let json = serde_json::to_string(&caps).unwrap();
        assert_eq!(json, r#"["issues:read","upstream:github:issue_*"]"#);
        assert_eq!(serde_json::from_str::<Capabilities>(&json).unwrap(), caps);
        let only = Capabilities::parse_csv("upstream:github:*").unwrap();
        assert_eq!(only.iter().count(), 0);
        assert!(Capabilities::parse_csv("upstream:Bad:*").is_err());
    }

    #[test]
    fn budgets_parse_print_and_cap() {
        let asked = Budgets::parse_csv("create_issue=5, add_comment=2").unwrap();
        assert_eq!(asked.limit(BudgetKind::CreateIssue), Some(5));
        assert_eq!(asked.limit(BudgetKind::UpdateIssue), None);
        assert_eq!(asked.to_csv(), "create_issue=5,add_comment=2");
        let json = serde_json::to_string(&asked).unwrap();
        assert_eq!(json, r#"{"create_issue":5,"add_comment":2}"#);
        assert_eq!(serde_json::from_str::<Budgets>(&json).unwrap(), asked);
        assert!(serde_json::from_str::<Budgets>(r#"{"delete_issue":1}"#).is_err());
        assert!(Budgets::parse_csv("create_issue").is_err());
        assert!(Budgets::parse_csv("create_issue=-1").is_err());
        assert!(Budgets::parse_csv("create_issue=2000000").is_err());
        let defaults = Budgets::parse_csv("create_issue=3,update_issue=20").unwrap();
        // Per kind the smaller; a kind only the tenant names gets its default.
        assert_eq!(
            asked.within(&defaults).to_csv(),
            "create_issue=3,update_issue=20,add_comment=2"
        );
        let less = Budgets::parse_csv("create_issue=1").unwrap();
        assert_eq!(
            less.within(&defaults).limit(BudgetKind::CreateIssue),
            Some(1)
        );
        assert_eq!(
            BudgetKind::CreateIssue.allowance(3),
            "create at most 3 issues"
        );
        assert_eq!(BudgetKind::AddComment.allowance(1), "add at most 1 comment");
        assert_eq!(BudgetKind::CreateIssue.spent(3), "3 created");
        assert_eq!(
            BudgetStatus::new(3, 5),
            BudgetStatus {
                limit: 3,
                used: 5,
                remaining: 0
            }
        );
    }

    #[test]
    fn ttl_parses_units() {
        assert_eq!(parse_ttl("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_ttl("2h").unwrap(), Duration::from_secs(7200));
        assert!(parse_ttl("2").is_err());
        assert!(parse_ttl("h").is_err());
        assert!(parse_ttl("5y").is_err());
    }
}
