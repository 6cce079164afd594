//! Integrity: how far what is on the board can be trusted, by where it
//! came from.
//!
//! Every issue, comment and change records its author ([`crate::Author`]:
//! which run under which grant, which person, or the admin API) and the
//! author's [`Integrity`] at the moment of the write. Three levels, lowest
//! first:
//!
//! - [`Integrity::External`]: a run that called an upstream tool in its
//!   grant. Text from outside the board (a web page, a repository, a
//!   ticket system) may have reached its model, so what it writes may
//!   carry someone else's instructions.
//! - [`Integrity::Agent`]: a run that has only used the board.
//! - [`Integrity::Person`]: a person on the web board, or a caller of the
//!   admin API.
//!
//! An issue's own level is the lowest of its author's and of everyone who
//! edited it since ([`Integrity::lowered_by`]); a comment's is its
//! author's. A grant may set a floor ([`crate::Grant::min_integrity`]):
//! entries below it are not shown to its run at all (lists, searches,
//! ready work and `claim_next` leave them out in the store's query; comment
//! windows and history leave them out and say how many), so a run can be
//! kept to what people and trusted runs wrote.
//!
//! Rows written before levels existed have none: a person's or an admin's
//! read as [`Integrity::Person`], a run's as [`Integrity::External`],
//! because whether that run had called an upstream tool is not known and
//! a floor must never let unknown text through.

use crate::ValidationError;
use crate::issue::AuthorKind;
use serde::{Deserialize, Serialize};

/// The integrity level of an entry or a writer, ordered lowest first.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum Integrity {
    /// A run that called an upstream tool in its grant (or a run whose
    /// level is not known).
    #[default]
    External,
    /// A run that has only used the board.
    Agent,
    /// A person, or the admin API.
    Person,
}

impl Integrity {
    pub const ALL: [Integrity; 3] = [Self::External, Self::Agent, Self::Person];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::External => "external",
            Self::Agent => "agent",
            Self::Person => "person",
        }
    }

    /// The number stores keep and compare (0 lowest).
    pub fn rank(self) -> i64 {
        match self {
            Self::External => 0,
            Self::Agent => 1,
            Self::Person => 2,
        }
    }

    /// The level of a stored rank; an unknown rank is the lowest level
    /// (a floor never lets through what it cannot place).
    pub fn from_rank(rank: i64) -> Self {
        match rank {
            2 => Self::Person,
            1 => Self::Agent,
            _ => Self::External,
        }
    }

    /// Parses a level by name; unknown text is a [`ValidationError`] on
    /// `field`.
    pub fn parse(field: &'static str, value: &str) -> Result<Self, ValidationError> {
        Self::ALL
            .into_iter()
            .find(|level| level.as_str() == value)
            .ok_or_else(|| ValidationError::new(field, "expected external, agent or person"))
    }

    pub fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|level| level.as_str()).collect()
    }

    /// The level of a writer of `kind`: people and admin-API callers are
    /// [`Integrity::Person`]; a run is [`Integrity::External`] once it has
    /// called an upstream tool in its grant, else [`Integrity::Agent`].
    pub fn of_writer(kind: AuthorKind, called_upstream: bool) -> Self {
        match kind {
            AuthorKind::Person | AuthorKind::Admin => Self::Person,
            AuthorKind::Run if called_upstream => Self::External,
            AuthorKind::Run => Self::Agent,
        }
    }

    /// The level an entry of unknown level (written before levels existed)
    /// reads as, by its author's kind.
    pub fn unrecorded(kind: AuthorKind) -> Self {
        match kind {
            AuthorKind::Person | AuthorKind::Admin => Self::Person,
            AuthorKind::Run => Self::External,
        }
    }

    /// An issue's level after `editor` changed it: never higher than
    /// before (a trusted edit does not vouch for what it left in place).
    pub fn lowered_by(self, editor: Integrity) -> Self {
        self.min(editor)
    }

    /// Whether an entry of this level may be shown to a run whose grant
    /// sets `floor` (none: everything is shown).
    pub fn meets(self, floor: Option<Integrity>) -> bool {
        floor.is_none_or(|floor| self >= floor)
    }
}

impl std::fmt::Display for Integrity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_order_lowest_first_and_round_trip_by_name_and_rank() {
        assert!(Integrity::External < Integrity::Agent && Integrity::Agent < Integrity::Person);
        for level in Integrity::ALL {
            assert_eq!(Integrity::parse("f", level.as_str()).unwrap(), level);
            assert_eq!(Integrity::from_rank(level.rank()), level);
            assert_eq!(
                serde_json::to_value(level).unwrap(),
                serde_json::json!(level.as_str())
            );
        }
        assert_eq!(Integrity::from_rank(7), Integrity::External);
        assert!(Integrity::parse("min_integrity", "trusted").is_err());
    }

    #[test]
    fn a_run_drops_to_external_once_it_called_upstream_and_people_are_highest() {
        assert_eq!(
            Integrity::of_writer(AuthorKind::Run, false),
            Integrity::Agent
        );
        assert_eq!(
            Integrity::of_writer(AuthorKind::Run, true),
            Integrity::External
        );
        assert_eq!(
            Integrity::of_writer(AuthorKind::Person, true),
            Integrity::Person
        );
        assert_eq!(
            Integrity::of_writer(AuthorKind::Admin, false),
            Integrity::Person
        );
        assert_eq!(Integrity::unrecorded(AuthorKind::Run), Integrity::External);
        assert_eq!(Integrity::unrecorded(AuthorKind::Person), Integrity::Person);
    }

    #[test]
    fn an_edit_only_lowers_and_a_floor_hides_what_is_below_it() {
        assert_eq!(
            Integrity::Person.lowered_by(Integrity::External),
            Integrity::External
        );
        assert_eq!(
            Integrity::Agent.lowered_by(Integrity::Person),
            Integrity::Agent
        );
        assert!(Integrity::External.meets(None));
        assert!(!Integrity::External.meets(Some(Integrity::Agent)));
        assert!(Integrity::Agent.meets(Some(Integrity::Agent)));
        assert!(Integrity::Person.meets(Some(Integrity::Agent)));
    }
}
