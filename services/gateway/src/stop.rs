//! Why a run stops: the one vocabulary the actor, the refusals and the
//! register API share. A leaf: it imports no other gateway module.

/// Why a run stopped (or is stopping).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Revoked through this runner (the register API or `corkboard run`).
    Revoked,
    /// The grant reached its expiry.
    Expired,
    /// The grant stopped resolving (revoked on another replica, expired,
    /// or gone from the registry).
    GrantEnded,
    /// No request for the idle timeout (shared-mode actors only; the next
    /// request activates the run again).
    Idle,
    /// The runner is shutting down.
    Shutdown,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Revoked => "revoked",
            Self::Expired => "expired",
            Self::GrantEnded => "grant_ended",
            Self::Idle => "idle",
            Self::Shutdown => "shutdown",
        }
    }

    /// Every reason, in declaration order (so `reason as u8` indexes it).
    const ALL: [Self; 5] = [
        Self::Revoked,
        Self::Expired,
        Self::GrantEnded,
        Self::Idle,
        Self::Shutdown,
    ];

    /// The reason as a byte, for the run's atomic state.
    pub(crate) fn to_u8(self) -> u8 {
        self as u8
    }

    /// The reason [`Self::to_u8`] gave `value` (an unknown byte, which no
    /// store writes, reads as `Shutdown`).
    pub(crate) fn from_u8(value: u8) -> Self {
        Self::ALL
            .get(usize::from(value))
            .copied()
            .unwrap_or(Self::Shutdown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stop_reason_survives_the_atomic_round_trip() {
        for reason in StopReason::ALL {
            assert_eq!(StopReason::from_u8(reason.to_u8()), reason);
        }
    }
}
