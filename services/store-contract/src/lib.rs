//! The board store contract, written once as tests and run unchanged against
//! every store (SQLite, MongoDB, ...).
//!
//! Each case is a `pub async fn case_xxx<S: BoardStore>(store: Arc<S>)` that
//! panics when the store breaks the contract documented on the traits in
//! `corkboard_board::store`. A store crate runs all of them with one line in
//! an integration test:
//!
//! ```text
//! // tests/contract.rs of a store crate; needs `tokio` (macros,
//! // rt-multi-thread) as a dev-dependency.
//! corkboard_store_contract::store_contract_tests!(fresh_store());
//!
//! async fn fresh_store() -> (std::sync::Arc<MyStore>, tempfile::TempDir) {
//!     // a new, empty, isolated store, plus whatever keeps it alive
//! }
//! ```
//!
//! The factory expression is awaited once per case and must give a fresh,
//! isolated store: either `Arc<S>` or `(Arc<S>, guard)`, where the guard
//! (a temp dir, a test database, a child process) lives until the case ends.
//! Cases still use their own random tenants, so a store shared by mistake
//! shows up as a failure only where isolation is the point.
//!
//! [`FaultStore`] is the tests' one fault-injecting store (failing,
//! hanging, gated or answer-losing calls over a real store).
//!
//! This crate is test code: it panics (with a message saying which part of
//! the contract broke) instead of returning errors.

#![forbid(unsafe_code)]

mod approvals;
mod audit;
mod budgets;
mod claims;
mod comment_window;
mod concurrency;
mod expensive;
mod faults;
pub mod fixtures;
mod grants;
mod history;
mod issues;
mod lists;
mod provenance;
mod queue;
mod renewal;
mod search;
mod upstreams;
mod used_once;
mod webhooks;

pub use approvals::*;
pub use audit::*;
pub use budgets::*;
pub use claims::*;
pub use comment_window::*;
pub use concurrency::*;
pub use expensive::*;
pub use faults::{Fault, FaultStore};
pub use grants::*;
pub use history::*;
pub use issues::*;
pub use lists::*;
pub use provenance::*;
pub use queue::*;
pub use renewal::*;
pub use search::*;
pub use upstreams::*;
pub use used_once::*;
pub use webhooks::*;

use corkboard_board::BoardStore;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// What a store factory gives: the store, and a guard kept alive until the
/// case has finished.
pub trait Fixture {
    type Store: BoardStore;
    type Guard;

    fn split(self) -> (Arc<Self::Store>, Self::Guard);
}

impl<S: BoardStore> Fixture for Arc<S> {
    type Store = S;
    type Guard = ();

    fn split(self) -> (Arc<S>, ()) {
        (self, ())
    }
}

impl<S: BoardStore, G> Fixture for (Arc<S>, G) {
    type Store = S;
    type Guard = G;

    fn split(self) -> (Arc<S>, G) {
        self
    }
}

/// Longest one case may run: generous, only there so a store that hangs
/// fails the case instead of hanging the test run.
pub const CASE_DEADLINE: Duration = Duration::from_secs(300);

/// Runs one case under [`CASE_DEADLINE`].
pub async fn run_case(name: &str, case: impl Future<Output = ()>) {
    if tokio::time::timeout(CASE_DEADLINE, case).await.is_err() {
        panic!(
            "contract case {name} did not finish within {} s: the store hangs",
            CASE_DEADLINE.as_secs()
        );
    }
}

/// Expands to one `#[actix_rt::test(system = "corkboard_testkit::MultiThread")]`
/// per contract case, each awaiting `$factory` for a fresh store. The
/// calling crate needs `actix-rt` and `corkboard-testkit` as
/// dev-dependencies.
#[macro_export]
macro_rules! store_contract_tests {
    // The case list, written once; the other arms expand it.
    (@list $mode:ident $($arg:expr)?) => {
        $crate::store_contract_tests! { @$mode [$($arg)?]
            case_create_and_get,
            case_get_unknown_is_not_found,
            case_idempotent_create_replays_current_issue,
            case_idempotent_create_conflict,
            case_idempotency_scoped_by_tenant_and_run,
            case_update_each_field,
            case_update_validation_and_not_found,
            case_update_version_conflict_writes_nothing,
            case_comments,
            case_comment_idempotency,
            case_comment_window_is_the_newest_comments_with_counts,
            case_comment_window_pages_back_without_gaps_or_repeats,
            case_comment_window_stops_at_its_byte_bound,
            case_comment_window_of_another_tenants_issue_is_missing,
            case_issue_view_since_an_epoch_sees_every_later_write,
            case_tenant_isolation,
            case_health,
            case_list_newest_first,
            case_list_limit_and_last_page,
            case_list_validation,
            case_list_filters_match_reference,
            case_list_text_filter_is_literal_and_case_insensitive,
            case_list_filters_follow_updates,
            case_list_returns_full_issues,
            case_pages_end_before_their_comments_pass_the_bound,
            case_a_counted_page_counts_what_a_read_page_holds,
            case_list_pagination_across_pages,
            case_list_pagination_with_filters,
            case_list_pagination_stable_under_concurrent_inserts,
            case_concurrent_updates_same_expected_version,
            case_concurrent_updates_without_version_lose_nothing,
            case_concurrent_comments_and_updates,
            case_concurrent_creates_are_distinct,
            case_idempotent_create_race,
            case_idempotent_comment_race,
            case_comment_limit_holds_under_a_race,
            case_grant_record_and_get,
            case_grant_record_is_retry_safe,
            case_grant_revocation_first_wins,
            case_grant_by_token_hash,
            case_list_grants,
            case_active_grants_exclude_revoked_and_expired,
            case_revoked_grants_are_the_unexpired_revocations,
            case_grant_renewal_moves_only_a_live_grants_expiry,
            case_grant_policy_is_per_tenant,
            case_budgets_travel_with_the_grant_and_reserve_up_to_their_limit,
            case_idempotency_key_used_says_whether_a_repeat_would_replay,
            case_a_value_is_used_once_until_its_record_expires,
            case_authors_keep_their_kind,
            case_approvals_are_decided_once_and_used_once,
            case_webhook_outbox_follows_the_tenants_board_writes,
            case_webhook_outbox_has_issue_claimed_once_per_claim,
            case_an_ended_claim_is_expired_once_with_its_event,
            case_webhook_deliveries_are_leased_retried_and_given_up,
            case_webhook_endpoints_are_bounded_and_deleted_with_their_deliveries,
            case_webhook_events_past_the_pending_bound_are_dropped_and_counted,
            case_webhook_claims_share_slots_fairly_and_pause_a_failing_endpoint,
            case_audit_append_and_list,
            case_audit_filters_and_limit,
            case_audit_tenant_isolation,
            case_claim_race_has_one_winner_until_revoked,
            case_claim_expires_with_its_grant,
            case_claim_release_close_and_versions,
            case_claim_hand_over_is_one_write,
            case_close_reasons_and_reopen,
            case_ready_work_is_unblocked_unclaimed_and_best_first,
            case_claim_next_gives_each_ready_issue_to_one_claimant,
            case_claim_next_takes_the_best_match_of_its_filters,
            case_ready_follows_racing_blocker_changes,
            case_a_lapsed_lease_makes_the_issue_ready_again,
            case_board_stats_count_states_priorities_labels_and_the_queue,
            case_board_stats_follow_every_write_that_moves_a_count,
            case_history_records_every_kind_of_write,
            case_integrity_is_kept_lowered_by_edits_and_filtered_by_a_floor,
            case_relations_are_checked_and_shown,
            case_issue_view_shows_the_newest_inverse_relations,
            case_audit_retries_store_each_record_once,
            case_search_finds_a_body_word_first_with_its_snippet,
            case_search_finds_a_comment_word_right_after_the_comment,
            case_search_ranks_title_over_body_over_comments,
            case_search_matches_the_reference,
            case_search_combines_with_every_list_filter,
            case_search_and_similarity_stay_in_their_tenant,
            case_search_sees_every_write_when_it_returns,
            case_search_pages_by_offset_and_checks_limits,
            case_similar_open_issues_and_refusing_near_duplicates,
            case_similar_issues_are_found_behind_many_newer_word_sharing_ones,
            case_similar_issues_follow_retitles_closes_and_reopens,
            case_list_priority_and_updated_since_match_reference,
            case_upstreams_put_list_replace_delete,
            case_upstreams_per_tenant_limit,
            case_tool_pins_observe_approve_and_queue_changes,
            case_grants_keep_upstream_patterns,
        }
    };
    (@tests [$factory:expr] $($case:ident),* $(,)?) => {
        $(
            #[::actix_rt::test(system = "::corkboard_testkit::MultiThread")]
            async fn $case() {
                let (store, guard) = $crate::Fixture::split($factory.await);
                $crate::run_case(stringify!($case), $crate::$case(store)).await;
                drop(guard);
            }
        )*
    };
    (@names [] $($case:ident),* $(,)?) => {
        &[$(stringify!($case)),*]
    };
    ($factory:expr) => {
        $crate::store_contract_tests!(@list tests $factory);
    };
}

/// The name of every case [`store_contract_tests!`] runs.
pub const CASES: &[&str] = store_contract_tests!(@list names);

/// Expands to one test per case of the bounds on expensive reads
/// (`expensive.rs`), each given `$factory`: a function from the
/// `ExpensiveReads` the case tests to a future of a fresh store built with
/// them (the same fixture kinds as [`store_contract_tests!`]):
///
/// ```text
/// corkboard_store_contract::store_expensive_read_tests!(fresh_store_with);
///
/// async fn fresh_store_with(reads: ExpensiveReads) -> (Arc<MyStore>, TempDir) { ... }
/// ```
#[macro_export]
macro_rules! store_expensive_read_tests {
    (@list $mode:ident $($arg:expr)?) => {
        $crate::store_expensive_read_tests! { @$mode [$($arg)?]
            case_a_search_past_its_deadline_is_stopped,
            case_a_tenant_past_its_share_waits_then_is_refused,
        }
    };
    (@tests [$factory:expr] $($case:ident),* $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                $crate::run_case(stringify!($case), $crate::$case($factory)).await;
            }
        )*
    };
    (@names [] $($case:ident),* $(,)?) => {
        &[$(stringify!($case)),*]
    };
    ($factory:expr) => {
        $crate::store_expensive_read_tests!(@list tests $factory);
    };
}

/// The name of every case [`store_expensive_read_tests!`] runs.
pub const EXPENSIVE_READ_CASES: &[&str] = store_expensive_read_tests!(@list names);

#[cfg(test)]
mod tests {
    use super::{CASES, EXPENSIVE_READ_CASES};
    use std::collections::BTreeSet;

    /// A case written but left out of the macro would silently never run.
    /// Every source file of the crate is read (not a list of them, which a
    /// new case file would have to remember to join).
    #[test]
    fn every_case_function_is_in_the_macro() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let sources: Vec<String> = std::fs::read_dir(&dir)
            .expect("read the crate's src directory")
            .map(|entry| entry.expect("a directory entry").path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
            .map(|path| std::fs::read_to_string(&path).expect("read a source file"))
            .collect();
        let defined: BTreeSet<&str> = sources
            .iter()
            .flat_map(|src| src.lines())
            .filter_map(|line| line.trim_start().strip_prefix("pub async fn "))
            .filter_map(|rest| rest.split('<').next())
            .filter(|name| name.starts_with("case_"))
            .collect();
        let all: Vec<&str> = CASES.iter().chain(EXPENSIVE_READ_CASES).copied().collect();
        let listed: BTreeSet<&str> = all.iter().copied().collect();
        assert_eq!(defined, listed);
        assert_eq!(listed.len(), all.len(), "a case is listed twice");
    }
}
