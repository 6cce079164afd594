//! The identity of a run on a runner: its tenant and its run id.

use corkboard_board::{RunId, TenantId};
use std::fmt;

/// Runs are unique per tenant, not globally: two tenants may both have a
/// run called `build-7`, and they must never share an actor.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunKey {
    pub tenant: TenantId,
    pub run: RunId,
}

impl RunKey {
    pub fn new(tenant: TenantId, run: RunId) -> Self {
        Self { tenant, run }
    }
}

impl fmt::Display for RunKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.tenant, self.run)
    }
}

impl fmt::Debug for RunKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RunKey({self})")
    }
}
