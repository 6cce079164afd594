//! The CI guard on the hot paths' cost: instructions per request, counted
//! by valgrind's callgrind, against a baseline kept in the repository
//! (`services/bench/callgrind-baseline.json`).
//!
//! Wall-clock figures on a shared two-core machine swing by tens of
//! percent; the instructions one request executes do not depend on load,
//! so a 10% growth in them is a regression a noisy machine cannot hide or
//! fake. What is counted ([`harness`]): the in-process request path of the
//! studio endpoint (actix-web service, MCP transport checks, bearer token →
//! registry → grant, the validator, `BoardTools`, the SQLite store in a
//! temporary directory, the answer's shaping and validation), all threads
//! (the store's writer thread included), for `get_issue` (one issue read
//! again, and issues read once each), the default
//! `list_issues` (its first page again, and pages read once each),
//! `create_issue` and `search_issues` on a board seeded with
//! fixed content. Start-up and seeding run uninstrumented
//! (`--instr-atstart=no`), each operation is warmed up, then measured over
//! [`CALLS`] calls between client requests (`zero_stats`, `dump_stats`).
//!
//! `corkboard-instructions check` ([`check`]) runs the harness under
//! valgrind, reads the dumps, and fails when an operation costs more than
//! the baseline's tolerance above it; `--update` rewrites the baseline
//! instead (commit it with the change that costs more, saying why).

pub mod check;
pub mod harness;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// Calls measured per operation: the count reported is their mean, so a
/// one-off (a cache filled, a vector grown) weighs 1/CALLS.
pub const CALLS: u32 = 20;

/// Calls of each operation before measuring, so caches and prepared
/// statements are warm and the measured calls are alike.
pub const WARM_UP: u32 = 5;

/// The operations measured, in the order the harness runs them (reads
/// before `create_issue`, which grows the board).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// One issue read again and again: after the first, each answer is the
    /// one kept (`services/tools/src/kept_answers.rs`) once the store has
    /// confirmed the tenant's epoch.
    GetIssue,
    /// Each call an issue not read before: the whole read and shaping.
    GetIssueUnread,
    /// The default list's first page again and again: after the first,
    /// each answer is the one kept, as for [`Self::GetIssue`].
    ListIssues,
    /// Each call a page of 50 not read before (the default list from
    /// another cursor): the whole list read and shaping.
    ListIssuesUnread,
    SearchIssues,
    CreateIssue,
}

impl Operation {
    pub const ALL: [Operation; 6] = [
        Self::GetIssue,
        Self::GetIssueUnread,
        Self::ListIssues,
        Self::ListIssuesUnread,
        Self::SearchIssues,
        Self::CreateIssue,
    ];

    /// The operation's key in the baseline.
    pub fn name(self) -> &'static str {
        match self {
            Self::GetIssue => "get_issue",
            Self::GetIssueUnread => "get_issue_unread",
            Self::ListIssues => "list_issues",
            Self::ListIssuesUnread => "list_issues_unread",
            Self::SearchIssues => "search_issues",
            Self::CreateIssue => "create_issue",
        }
    }

    /// The tool it calls.
    pub fn tool(self) -> &'static str {
        match self {
            Self::GetIssue | Self::GetIssueUnread => "get_issue",
            Self::ListIssues | Self::ListIssuesUnread => "list_issues",
            other => other.name(),
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Operation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|op| op.name() == s)
            .ok_or_else(|| format!("unknown operation {s:?}"))
    }
}

/// The baseline file: instructions per call of each operation, and how
/// much growth the guard lets pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    /// What the counts are of, for the reader of the file.
    pub about: String,
    /// Growth over the baseline that fails the guard, in percent.
    pub tolerance_percent: f64,
    /// Calls measured per operation.
    pub calls: u32,
    /// Mean instructions (callgrind's `Ir`) per call, by tool name.
    pub instructions_per_call: BTreeMap<String, u64>,
}

impl Baseline {
    pub const ABOUT: &'static str = "Instructions (callgrind Ir) per request of the in-process studio path (actix service, MCP, BoardTools, SQLite store) on the fixed seeded board of services/bench/src/instructions/harness.rs, dev profile as scripts/test builds it. Update with `cargo run -p corkboard-bench --bin corkboard-instructions -- check --update` in the commit that changes the cost, saying why (docs/numbers.md, 'Instruction counts').";
    pub const TOLERANCE_PERCENT: f64 = 10.0;
}

/// One operation compared with its baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub operation: String,
    pub baseline: Option<u64>,
    pub measured: Option<u64>,
}

impl Comparison {
    /// Growth over the baseline in percent (negative: cheaper).
    pub fn change_percent(&self) -> Option<f64> {
        match (self.baseline, self.measured) {
            (Some(base), Some(now)) if base > 0 => {
                Some((now as f64 - base as f64) * 100.0 / base as f64)
            }
            _ => None,
        }
    }

    /// Whether this row fails the guard: grown past the tolerance, or
    /// missing on either side (an operation added or lost must come with a
    /// baseline update).
    pub fn fails(&self, tolerance_percent: f64) -> bool {
        match self.change_percent() {
            Some(change) => change > tolerance_percent,
            None => true,
        }
    }
}

/// Every operation of the baseline and of the measurement, side by side.
pub fn compare(baseline: &Baseline, measured: &BTreeMap<String, u64>) -> Vec<Comparison> {
    let mut names: Vec<&String> = baseline
        .instructions_per_call
        .keys()
        .chain(measured.keys())
        .collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|name| Comparison {
            operation: name.clone(),
            baseline: baseline.instructions_per_call.get(name).copied(),
            measured: measured.get(name).copied(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn baseline(counts: &[(&str, u64)]) -> Baseline {
        Baseline {
            about: String::new(),
            tolerance_percent: 10.0,
            calls: CALLS,
            instructions_per_call: counts.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
        }
    }

    #[test]
    fn growth_past_the_tolerance_fails_and_within_it_passes() {
        let base = baseline(&[("get_issue", 1_000_000), ("create_issue", 2_000_000)]);
        let measured: BTreeMap<String, u64> = [
            ("get_issue".to_owned(), 1_099_000),
            ("create_issue".to_owned(), 2_300_000),
        ]
        .into();
        let rows = compare(&base, &measured);
        let failing: Vec<&str> = rows
            .iter()
            .filter(|r| r.fails(base.tolerance_percent))
            .map(|r| r.operation.as_str())
            .collect();
        assert_eq!(failing, ["create_issue"]);
        let cheaper = compare(&base, &[("get_issue".to_owned(), 10)].into());
        assert!(!cheaper[1].fails(10.0), "{cheaper:?}");
    }

    #[test]
    fn an_operation_missing_on_either_side_fails() {
        let base = baseline(&[("get_issue", 1_000)]);
        let rows = compare(&base, &[("list_issues".to_owned(), 1_000)].into());
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.fails(10.0)), "{rows:?}");
    }

    #[test]
    fn the_baseline_in_the_repository_names_every_operation() {
        let text = include_str!("../../callgrind-baseline.json");
        let base: Baseline = serde_json::from_str(text).unwrap();
        let names: Vec<&str> = base
            .instructions_per_call
            .keys()
            .map(String::as_str)
            .collect();
        let mut expected: Vec<&str> = Operation::ALL.iter().map(|op| op.name()).collect();
        expected.sort_unstable();
        assert_eq!(names, expected);
        assert_eq!(base.tolerance_percent, Baseline::TOLERANCE_PERCENT);
        assert_eq!(base.calls, CALLS);
    }
}
