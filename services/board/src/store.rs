//! The traits every board store implements (SQLite, MongoDB). The contract
//! they must meet is written down as a test suite that runs against each.
//!
//! The traits' methods are listed once, in [`__store_methods!`](crate::__store_methods):
//! the traits below are generated from that list, and so is every store
//! that only forwards ([`decorate_store!`](crate::decorate_store): metrics,
//! the boardless stub, the fault-injecting store of the tests), so a new
//! store method is written in the list, each real store, and one contract
//! case, and every decorator follows without an edit.

use crate::audit::{AuditEntry, AuditRecord};
use crate::error::StoreError;
use std::future::Future;

/// The one list of the store traits' methods: each trait's name, its
/// documentation, and each method's documentation, arguments and answer
/// (every method is `async`, takes `&self` and answers
/// `Result<answer, StoreError>`). Provided methods, which decorators need
/// not forward, are written where the trait is defined.
///
/// `mode` is what to make of a trait: `define` (the trait itself, here) or
/// `decorate` (a forwarding impl for the type that follows, see
/// [`decorate_store!`](crate::decorate_store)).
#[doc(hidden)]
#[macro_export]
macro_rules! __store_methods {
    (IssueStore, $mode:ident, $($x:tt)*) => { $crate::__store_expand! { $mode [$($x)*]
        /// Issues and comments of every tenant. Every method takes the tenant
        /// explicitly; callers take it from the resolved grant, never from input.
        IssueStore {
            /// Creates an issue. With a key, a replay of the same request by the same
            /// run returns the original issue (`replayed: true`) and a different
            /// request under the same key is [`StoreError::IdempotencyConflict`].
            /// Relations must name issues of `tenant` ([`StoreError::UnknownRelated`]
            /// otherwise; another tenant's id reads exactly like a missing one).
            fn create_issue(
                tenant: &$crate::TenantId,
                author: &$crate::Author,
                new: $crate::NewIssue,
                key: Option<&$crate::IdempotencyKey>,
            ) -> $crate::Created;

            fn get_issue(tenant: &$crate::TenantId, id: &$crate::IssueId) -> $crate::Issue;

            fn list_issues(tenant: &$crate::TenantId, query: &$crate::ListQuery) -> $crate::Page;

            /// Applies `patch`. With `expected_version`, a stale version is a
            /// [`StoreError::VersionConflict`] and nothing is written. The lifecycle
            /// rules are [`IssuePatch::apply_to`](crate::IssuePatch::apply_to)'s;
            /// relations are checked as on create, and a parent that would form a
            /// cycle is [`StoreError::RelationCycle`].
            fn update_issue(
                tenant: &$crate::TenantId,
                id: &$crate::IssueId,
                patch: $crate::IssuePatch,
                expected_version: Option<u64>,
            ) -> $crate::Issue;

            /// The issue with the relations other issues hold to it (children,
            /// the issues it blocks), read in one snapshot, carrying only the
            /// comments `window` selects ([`CommentWindow::cut`](crate::CommentWindow::cut)
            /// defines which); [`IssueView::comment_facts`](crate::IssueView::comment_facts)
            /// counts the rest. The store reads the window, not every comment: an
            /// issue may hold [`COMMENTS_MAX`](crate::limits::COMMENTS_MAX) comments
            /// of 64 KiB. An unknown `before` is no error here (`before_found: false`,
            /// no comments): the caller words it. Another tenant's issue reads as
            /// missing.
            fn get_issue_view(
                tenant: &$crate::TenantId,
                id: &$crate::IssueId,
                window: &$crate::CommentWindow,
            ) -> $crate::IssueView;

            /// [`get_issue_view`](Self::get_issue_view), unless none of the tenant's
            /// issues or comments changed since `seen`, the epoch an earlier answer
            /// gave (then [`ViewSince::Unchanged`](crate::ViewSince::Unchanged), and
            /// nothing else is read). The tenant's epoch counts its changes,
            /// whichever process made them; other tenants' writes leave it. A store
            /// that keeps no epoch reads the view every time and answers
            /// `epoch: None`.
            fn get_issue_view_since(
                tenant: &$crate::TenantId,
                id: &$crate::IssueId,
                window: &$crate::CommentWindow,
                seen: Option<u64>,
            ) -> $crate::ViewSince;

            /// The tenant's epoch, the one [`get_issue_view_since`](Self::get_issue_view_since)
            /// answers: it moves with every change of the tenant's issues and
            /// comments, whichever process made it, and with nothing else. Read
            /// before a read of the board, it tells a later caller whether that
            /// read could still be the same. `None`: the store keeps no epoch.
            fn tenant_epoch(tenant: &$crate::TenantId) -> Option<u64>;

            /// Gives an open issue to `claimant`'s run, atomically: of many racing
            /// claimants exactly one wins, the others get [`StoreError::Claimed`]
            /// naming the winner. Claiming one's own claim again is a success that
            /// changes nothing, unless the claimant has a lease: then it renews
            /// the lease (only the claim's end moves: same version, same
            /// `claimed_at`, no `issue.claimed` event). A claim whose lease
            /// lapsed or whose grant has expired or been revoked counts as
            /// none and is taken over. A new claim bumps the version.
            fn claim_issue(
                tenant: &$crate::TenantId,
                id: &$crate::IssueId,
                claimant: &$crate::Claimant,
                expected_version: Option<u64>,
            ) -> $crate::Issue;

            /// Claims the best ready issue ([`ready_order`](crate::ready_order))
            /// among those `query` selects (`query.ready` is implied; its
            /// cursor and limit are ignored) for `claimant`, atomically: of
            /// racing callers on any replica each issue goes to exactly one,
            /// and a caller that loses an issue takes the next one. Racing
            /// callers may be spread over the best few ready issues instead
            /// of all aiming at the best (MongoDB: one of the 64 best); a
            /// caller alone takes the best. Answers
            /// [`ClaimNext::NoReadyWork`](crate::ClaimNext) with how many
            /// matching open issues are claimed or blocked only when no ready
            /// issue matched at the moment it looked.
            fn claim_next(
                tenant: &$crate::TenantId,
                query: &$crate::ListQuery,
                claimant: &$crate::Claimant,
            ) -> $crate::ClaimNext;

            /// What changed on an issue ([`Change`](crate::Change)s, each
            /// written with its write), newest first: those before version
            /// `before` (all: `None`), at most `limit`
            /// (`1..=HISTORY_PAGE_MAX`). Another tenant's issue has none.
            fn issue_history(
                tenant: &$crate::TenantId,
                id: &$crate::IssueId,
                before: Option<u64>,
                limit: u32,
            ) -> $crate::HistoryPage;

            /// What `run` changed on the tenant's board, across its issues,
            /// newest first: changes made before the instant `before` (all:
            /// `None`), at most `limit`.
            fn run_history(
                tenant: &$crate::TenantId,
                run: &$crate::RunId,
                before: Option<$crate::Timestamp>,
                limit: u32,
            ) -> $crate::HistoryPage;

            /// The board's counts ([`BoardStats`](crate::BoardStats)), claims
            /// judged live at now and stale up to `stale_until`. Grouped
            /// counts, bounded like any expensive read.
            fn board_stats(
                tenant: &$crate::TenantId,
                stale_until: $crate::Timestamp,
            ) -> $crate::BoardStats;

            /// Ends `run`'s claim on the issue (bumping the version). Refused with
            /// [`StoreError::Claimed`] when another run holds it and
            /// [`StoreError::NotClaimed`] when nobody does.
            fn release_issue(
                tenant: &$crate::TenantId,
                id: &$crate::IssueId,
                run: &$crate::RunId,
                expected_version: Option<u64>,
            ) -> $crate::Issue;

            /// Gives the issue's claim to `claimant`'s run whoever holds it (a
            /// person's hand-over), in one conditional write at `expected_version`
            /// (the version the person saw): no run can take the issue between
            /// the old holder's claim and the new one. Refused with
            /// [`StoreError::VersionConflict`] when the issue changed and
            /// [`StoreError::NotClaimable`] when it is done or closed. Bumps the
            /// version and announces the claim like `claim_issue`. The history
            /// records the change by `by` (the person who handed it over), with
            /// the claim before and after.
            fn hand_over_claim(
                tenant: &$crate::TenantId,
                id: &$crate::IssueId,
                claimant: &$crate::Claimant,
                by: &$crate::Author,
                expected_version: u64,
            ) -> $crate::Issue;

            /// Adds a comment, idempotently under `key` like `create_issue`.
            fn add_comment(
                tenant: &$crate::TenantId,
                author: &$crate::Author,
                comment: $crate::NewComment,
                key: Option<&$crate::IdempotencyKey>,
            ) -> $crate::CommentAdded;

            /// Ranked full-text search over titles, bodies and comments, with the
            /// list filters (see `corkboard_board::search` for what matches and how
            /// hits rank). Sees every write that has returned.
            fn search_issues(
                tenant: &$crate::TenantId,
                query: &$crate::SearchQuery,
            ) -> $crate::SearchPage;

            /// The open issues (states other than done and closed) whose titles are
            /// most like `title`, most similar first, at most `limit`
            /// (`1..=SIMILAR_LIMIT_MAX`); only issues sharing a word with it.
            fn similar_open_issues(
                tenant: &$crate::TenantId,
                title: &$crate::Title,
                limit: u32,
            ) -> Vec<$crate::SimilarIssue>;

            /// Whether `run` already used `key` for a create (`comment: false`) or
            /// a comment (`comment: true`) on `tenant`'s board: a repeat under it is
            /// answered from that record and writes nothing (a replay, or an
            /// idempotency conflict). Lets a run whose write budget is spent still
            /// get the original result of a write it retries.
            fn idempotency_key_used(
                tenant: &$crate::TenantId,
                run: &$crate::RunId,
                key: &$crate::IdempotencyKey,
                comment: bool,
            ) -> bool;

            /// `create_issue`, unless an open issue is a near match for the new
            /// title: then nothing is written and the near matches come back. A
            /// replay of an earlier create under `key` is answered as a replay
            /// whatever is similar now.
            fn create_issue_unless_similar(
                tenant: &$crate::TenantId,
                author: &$crate::Author,
                new: $crate::NewIssue,
                key: Option<&$crate::IdempotencyKey>,
            ) -> $crate::CreateOutcome;
        }
    } };

    (GrantLedger, $mode:ident, $($x:tt)*) => { $crate::__store_expand! { $mode [$($x)*]
        /// The durable record of grants: who created and revoked what, and when.
        GrantLedger {
            fn record_grant(grant: &$crate::Grant, token_hash: &str) -> ();

            /// Marks a grant revoked (first revocation wins) and returns its record.
            /// Every claim made under the grant ends with it (in the same
            /// transaction where the store has one; else right after, and a claim
            /// attempt takes over a claim whose grant is revoked meanwhile).
            fn record_revocation(
                id: &$crate::GrantId,
                by: &str,
                at: $crate::Timestamp,
            ) -> $crate::GrantEvent;

            /// Moves a live grant's expiry to `expires_at` (renewal), atomically
            /// with the check that it is live: a grant revoked, or expired at
            /// `now`, is left unchanged. Returns the record as it is afterwards, so
            /// the caller tells a renewal from a refusal by its status and expiry.
            fn record_expiry(
                id: &$crate::GrantId,
                expires_at: $crate::Timestamp,
                now: $crate::Timestamp,
            ) -> $crate::GrantEvent;

            fn grant(id: &$crate::GrantId) -> $crate::GrantEvent;

            /// The grant whose token hashes to `token_hash` (hex SHA-256), if any,
            /// revoked or not: the ledger doubles as the registry of local runs.
            fn grant_by_token_hash(token_hash: &str) -> Option<$crate::GrantEvent>;

            /// Grants of a tenant, newest first, after `cursor` (a grant id).
            fn list_grants(
                tenant: &$crate::TenantId,
                run: Option<&$crate::RunId>,
                cursor: Option<&$crate::GrantId>,
                limit: u32,
            ) -> Vec<$crate::GrantEvent>;

            /// The tenant's own grant settings (all unset when it has none).
            fn grant_policy(tenant: &$crate::TenantId) -> $crate::GrantPolicy;

            /// Replaces the tenant's grant settings (durable once acknowledged).
            fn set_grant_policy(tenant: &$crate::TenantId, policy: &$crate::GrantPolicy) -> ();

            /// Every grant neither revoked nor expired at `now`, to rebuild a registry.
            fn active_grants(now: $crate::Timestamp) -> Vec<$crate::GrantEvent>;

            /// Every revoked grant that has not expired at `now`: the revocations a
            /// shared registry must hold to be trusted (replayed into a Redis that
            /// may have lost writes; the token hash is what it is keyed by).
            fn revoked_grants(now: $crate::Timestamp) -> Vec<$crate::GrantEvent>;

            /// Takes one write of `kind` from grant `id`'s budget of `limit` in one
            /// conditional write (never read-then-write, so racing callers on any
            /// replica take at most `limit` in all): `true` when fewer than `limit`
            /// had been taken (now one more has), `false` when the budget is spent
            /// (nothing changed). Durable once acknowledged.
            fn reserve_budget(
                id: &$crate::GrantId,
                kind: $crate::BudgetKind,
                limit: u32,
            ) -> bool;

            /// Gives back one write taken by `reserve_budget` that did not
            /// happen (never below zero).
            fn release_budget(id: &$crate::GrantId, kind: $crate::BudgetKind) -> ();

            /// Writes taken per kind from grant `id`'s budgets (kinds never taken
            /// are left out).
            fn budget_used(
                id: &$crate::GrantId,
            ) -> ::std::collections::BTreeMap<$crate::BudgetKind, u32>;

            /// Stores a new approval item (a call waiting for a person).
            fn put_approval(item: &$crate::ApprovalItem) -> ();

            /// The tenant's approval item `id`, if it has one (another tenant's
            /// reads as missing).
            fn approval(
                tenant: &$crate::TenantId,
                id: &$crate::ApprovalId,
            ) -> Option<$crate::ApprovalItem>;

            /// The tenant's approval items, newest first, only those in `status`
            /// when given, at most `limit`.
            fn list_approvals(
                tenant: &$crate::TenantId,
                status: Option<$crate::ApprovalStatus>,
                limit: u32,
            ) -> Vec<$crate::ApprovalItem>;

            /// The newest item of exactly this call (run, tool, argument digest)
            /// not yet used: what the same call sent again collects.
            fn approval_for_call(
                tenant: &$crate::TenantId,
                run: &$crate::RunId,
                tool: &str,
                digest: &str,
            ) -> Option<$crate::ApprovalItem>;

            /// Records a person's decision on a pending item that has not expired
            /// at `decision.at`, in one conditional write (of racing deciders
            /// exactly one wins). Returns the item as it is afterwards, so the
            /// caller tells its own decision from a refusal by comparing it
            /// ([`StoreError::NotFound`](crate::StoreError) when there is none).
            fn decide_approval(
                tenant: &$crate::TenantId,
                id: &$crate::ApprovalId,
                decision: &$crate::Decision,
            ) -> $crate::ApprovalItem;

            /// Marks an approved item whose expiry is after `now` used, in one
            /// conditional write: `true` for exactly one caller, who may then run
            /// the call; `false` when it was not approved, already used, or expired.
            fn use_approval(
                tenant: &$crate::TenantId,
                id: &$crate::ApprovalId,
                now: $crate::Timestamp,
            ) -> bool;

            /// Records `id` of `kind` (a namespace) as used until `expires_at`, in
            /// one conditional write: `true` the first time (of racing callers in
            /// any process sharing the store exactly one gets it), `false` while
            /// a record of it is live at `now`. A record expired at `now` counts
            /// as none and is replaced; expired records are swept a few at a
            /// time. Durable once acknowledged.
            fn record_first_use(
                kind: &str,
                id: &str,
                expires_at: $crate::Timestamp,
                now: $crate::Timestamp,
            ) -> bool;

            /// Whether a record of `id` of `kind` made by
            /// [`record_first_use`](Self::record_first_use) is live at `now`
            /// (one point read; records nothing).
            fn first_use_recorded(
                kind: &str,
                id: &str,
                now: $crate::Timestamp,
            ) -> bool;
        }
    } };

    (AuditLog, $mode:ident, $($x:tt)*) => { $crate::__store_expand! { $mode [$($x)*]
        /// Append-only audit trail.
        AuditLog {
            /// Appends `entries`, each at most once: an entry whose id the store
            /// already holds counts as written. Writing the same entries again
            /// after a write whose outcome is unknown therefore duplicates nothing.
            fn append_audit_entries(entries: &[$crate::AuditEntry]) -> ();

            fn list_audit(
                tenant: &$crate::TenantId,
                query: &$crate::AuditQuery,
            ) -> Vec<$crate::AuditRecord>;
        }
    } };

    (WebhookStore, $mode:ident, $($x:tt)*) => { $crate::__store_expand! { $mode [$($x)*]
        /// Webhook endpoints and the durable outbox of their deliveries.
        ///
        /// Deliveries are queued by the store itself, inside the board writes that
        /// cause them (an issue created, updated, closed, commented, claimed, its
        /// claim expired; a grant recorded is a run started, its first revocation
        /// a run ended; an approval requested or decided; an upstream tool
        /// changed), for every endpoint of the write's tenant subscribed to the
        /// event, so only a tenant's own events reach its endpoints. What "inside"
        /// means is each store's to say: SQLite writes them in the same
        /// transaction as the board write; MongoDB marks the event on the document
        /// the write writes, in the same atomic update, and queues its deliveries
        /// before acknowledging the write, a mark left behind (a crash, a failed
        /// insert) being queued later by the sweep of `expire_claims`: neither
        /// the write nor its deliveries are lost. Past
        /// [`PENDING_PER_TENANT_MAX`](crate::webhook::limits::PENDING_PER_TENANT_MAX)
        /// undelivered deliveries, an event queues none and each endpoint counts
        /// it as `dropped`.
        WebhookStore {
            /// Registers an endpoint; refused past
            /// [`ENDPOINTS_PER_TENANT_MAX`](crate::webhook::limits::ENDPOINTS_PER_TENANT_MAX).
            fn create_webhook(
                tenant: &$crate::TenantId,
                new: &$crate::NewWebhook,
                at: $crate::Timestamp,
            ) -> $crate::Webhook;

            /// The tenant's endpoints with their delivery status, oldest first.
            fn list_webhooks(tenant: &$crate::TenantId) -> Vec<$crate::WebhookWithStatus>;

            /// Removes an endpoint and its undelivered deliveries.
            fn delete_webhook(tenant: &$crate::TenantId, id: &$crate::WebhookId) -> ();

            /// Up to `limit` deliveries due at `now` (not delivered, not given up,
            /// next attempt due, no live lease), each leased until `now + lease`
            /// so no other worker takes it meanwhile. Shared fairly: no endpoint
            /// has more than `per_endpoint` deliveries leased at once (live leases
            /// of every worker count), an endpoint paused after failed attempts
            /// ([`endpoint_pause`](crate::webhook::endpoint_pause)) gets none, and
            /// the rest are taken in turns across tenants and their endpoints
            /// ([`fair_share`](crate::webhook::fair_share)), each endpoint's oldest
            /// first, so one endpoint's backlog never starves another's.
            fn claim_deliveries(
                now: $crate::Timestamp,
                lease: ::std::time::Duration,
                limit: u32,
                per_endpoint: u32,
            ) -> Vec<$crate::ClaimedDelivery>;

            /// Ends up to `limit` claims whose end had passed at `now` without
            /// a release (a lapsed lease, an expired grant) on open issues:
            /// clears each (a new version) and queues its
            /// `issue.claim_expired` deliveries (SQLite: in the same
            /// transaction; MongoDB: right after). An ended claim already
            /// reads as none (the issue is ready work again without this);
            /// this is what notices it, so each is answered once, to the
            /// caller that cleared it.
            fn expire_claims(now: $crate::Timestamp, limit: u32) -> Vec<$crate::ExpiredClaim>;

            /// Records an attempt: delivered, or failed and due again after
            /// [`retry_delay`](crate::webhook::retry_delay), or given up after the
            /// last attempt. Releases the lease. A failure also pauses the
            /// endpoint for [`endpoint_pause`](crate::webhook::endpoint_pause) of
            /// its failures in a row; a success ends the pause.
            fn record_attempt(
                id: &$crate::DeliveryId,
                outcome: &$crate::AttemptOutcome,
            ) -> ();
        }
    } };

    (UpstreamStore, $mode:ident, $($x:tt)*) => { $crate::__store_expand! { $mode [$($x)*]
        /// A tenant's upstream MCP servers (their credentials sealed).
        UpstreamStore {
            /// Records `upstream`, replacing one of the same tenant and name (a
            /// new URL or credential is a whole new record, never half of one).
            /// A tenant that already has
            /// [`UPSTREAMS_PER_TENANT_MAX`](crate::UPSTREAMS_PER_TENANT_MAX) other
            /// upstreams is refused with [`StoreError::Invalid`] naming the limit.
            fn put_upstream(upstream: &$crate::Upstream) -> ();

            /// The tenant's upstreams, by name.
            fn list_upstreams(tenant: &$crate::TenantId) -> Vec<$crate::Upstream>;

            /// Removes one and its tool pins; [`StoreError::NotFound`] when
            /// there is none.
            fn delete_upstream(
                tenant: &$crate::TenantId,
                name: &$crate::UpstreamName,
            ) -> ();

            /// The pins of the tenant's upstream `upstream`'s tools, by tool name.
            fn list_tool_pins(
                tenant: &$crate::TenantId,
                upstream: &$crate::UpstreamName,
            ) -> Vec<$crate::ToolPin>;

            /// Records what one listing of `upstream` showed, as
            /// [`observe_tool_pins`](crate::observe_tool_pins) decides (pins of
            /// tools it did not show are kept), and queues
            /// `upstream.tool_changed` for each tool it leaves pending, in the
            /// same write; answers the upstream's pins after it. Listings of
            /// several replicas at once write each change once.
            fn observe_tools(
                tenant: &$crate::TenantId,
                upstream: &$crate::UpstreamName,
                sightings: &[$crate::ToolSighting],
                trust_first_listing: bool,
                at: $crate::Timestamp,
            ) -> Vec<$crate::ToolPin>;

            /// Approves the definition `hash` of one tool, as
            /// [`approve_tool_pin`](crate::approve_tool_pin) decides (a hash
            /// other than the last seen one is [`StoreError::Invalid`]);
            /// [`StoreError::NotFound`] when the tool was never listed.
            fn approve_tool(
                tenant: &$crate::TenantId,
                upstream: &$crate::UpstreamName,
                tool: &str,
                hash: &$crate::DefinitionHash,
                by: &str,
                at: $crate::Timestamp,
            ) -> $crate::ToolPin;
        }
    } };

    (StoreHealth, $mode:ident, $($x:tt)*) => { $crate::__store_expand! { $mode [$($x)*]
        /// Whether the store answers right now (for `/readyz`).
        StoreHealth {
            fn check() -> ();
        }
    } };
}

/// Turns one trait of [`__store_methods!`](crate::__store_methods) into the
/// trait (`define`) or into a forwarding impl (`decorate`).
#[doc(hidden)]
#[macro_export]
macro_rules! __store_expand {
    (define [$($provided:tt)*]
        $(#[$trait_meta:meta])*
        $trait:ident {
            $(
                $(#[$meta:meta])*
                fn $name:ident($($arg:ident: $arg_ty:ty),* $(,)?) -> $answer:ty;
            )*
        }
    ) => {
        $(#[$trait_meta])*
        #[$crate::__async_trait]
        pub trait $trait: Send + Sync + 'static {
            $(
                $(#[$meta])*
                async fn $name(&self, $($arg: $arg_ty),*)
                    -> ::core::result::Result<$answer, $crate::StoreError>;
            )*
            $($provided)*
        }
    };
    (decorate [$ty:ty]
        $(#[$trait_meta:meta])*
        $trait:ident {
            $(
                $(#[$meta:meta])*
                fn $name:ident($($arg:ident: $arg_ty:ty),* $(,)?) -> $answer:ty;
            )*
        }
    ) => {
        #[$crate::__async_trait]
        impl $crate::$trait for $ty {
            $(
                async fn $name(&self, $($arg: $arg_ty),*)
                    -> ::core::result::Result<$answer, $crate::StoreError>
                {
                    $crate::StoreDecorator::around(self, stringify!($name), async move {
                        $crate::StoreDecorator::inner(self)?.$name($($arg),*).await
                    })
                    .await
                }
            )*
        }
    };
}

/// Implements the named store traits for a [`StoreDecorator`] by
/// forwarding every method to its [`inner`](StoreDecorator::inner) store
/// through its [`around`](StoreDecorator::around):
///
/// ```ignore
/// corkboard_board::decorate_store!(MeteredStore: IssueStore, GrantLedger);
/// ```
#[macro_export]
macro_rules! decorate_store {
    ($ty:ty: $($trait:ident),+ $(,)?) => {
        $( $crate::__store_methods!($trait, decorate, $ty); )+
    };
}

crate::__store_methods!(IssueStore, define,);
crate::__store_methods!(GrantLedger, define,);
crate::__store_methods!(
    AuditLog,
    define,
    /// Appends `records`, each under a fresh id (for callers that never
    /// write the same records twice).
    async fn append_audit(&self, records: &[AuditRecord]) -> Result<(), StoreError> {
        let entries: Vec<AuditEntry> = records.iter().cloned().map(AuditEntry::new).collect();
        self.append_audit_entries(&entries).await
    }
);
crate::__store_methods!(WebhookStore, define,);
crate::__store_methods!(UpstreamStore, define,);
crate::__store_methods!(StoreHealth, define,);

/// A complete board store.
pub trait BoardStore:
    IssueStore + GrantLedger + AuditLog + WebhookStore + UpstreamStore + StoreHealth
{
}

impl<T: IssueStore + GrantLedger + AuditLog + WebhookStore + UpstreamStore + StoreHealth> BoardStore
    for T
{
}

/// A store that only adds something around another store's calls (timing
/// them, refusing them, injecting faults). [`decorate_store!`] writes its
/// trait impls: each method runs `around(op, inner()?.method(..))`, `op`
/// being the method's name.
pub trait StoreDecorator: Send + Sync + 'static {
    /// The store the calls go to (a trait object of the traits decorated).
    type Inner: ?Sized + Send + Sync;

    /// The store to call, or the answer to give without calling one.
    fn inner(&self) -> Result<&Self::Inner, StoreError>;

    /// Runs around every call; the default only awaits it.
    fn around<'a, T: Send + 'a>(
        &'a self,
        op: &'static str,
        call: impl Future<Output = Result<T, StoreError>> + Send + 'a,
    ) -> impl Future<Output = Result<T, StoreError>> + Send + 'a {
        let _ = op;
        call
    }
}
