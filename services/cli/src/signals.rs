//! Waiting for the signals that ask a process to stop.

use std::time::Duration;
use tokio::signal::unix::{Signal, SignalKind, signal};

/// SIGINT and SIGTERM, caught from the moment [`StopSignals::catch`]
/// returns. Made before a process announces itself: a supervisor may
/// signal the instant it reads the announcement, and a signal that
/// arrives before anything catches it takes the default action, a kill
/// that skips the drain and the audit flush.
pub struct StopSignals {
    interrupt: Signal,
    terminate: Signal,
}

/// Which stop was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Interrupt,
    Terminate,
}

impl StopSignals {
    /// Catches both signals now (needs a running Tokio runtime).
    pub fn catch() -> anyhow::Result<Self> {
        use anyhow::Context;
        let catch = |kind| signal(kind).context("catch SIGINT and SIGTERM");
        Ok(Self {
            interrupt: catch(SignalKind::interrupt())?,
            terminate: catch(SignalKind::terminate())?,
        })
    }

    /// The next stop asked for.
    pub async fn next(&mut self) -> Stop {
        tokio::select! {
            _ = self.interrupt.recv() => Stop::Interrupt,
            _ = self.terminate.recv() => Stop::Terminate,
        }
    }
}

/// Stops `server` gracefully on the first SIGINT or SIGTERM, after
/// `before` (which ends what would otherwise hold the graceful stop open).
pub fn stop_server_on_signal(
    mut stop: StopSignals,
    server: actix_web::dev::ServerHandle,
    before: impl FnOnce() + 'static,
) {
    actix_web::rt::spawn(async move {
        stop.next().await;
        tracing::info!("stopping: draining in-flight requests");
        before();
        server.stop(true).await;
    });
}

/// How the time a process has between SIGTERM and SIGKILL
/// (`shutdown_grace_ms`) is spent, phase by phase, in the worst case:
/// the HTTP listener drains its requests, then the runner drains its runs
/// (each run: `drain`, then `cancel_grace` for cancelled requests, plus
/// the gateway's fixed waits, `GatewayConfig::SHUTDOWN_SLACK`), then the
/// shared gateway port's last connections (`port`), then the audit writer
/// and the trace exporter flush (`flush`, which nothing bounds but what is
/// left). Every phase is derived from the grace period so that their sum
/// stays within it: a longer preStop sleep shortens the drains instead of
/// turning the audit flush into a SIGKILL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownPlan {
    /// actix's graceful stop of the HTTP listener (whole seconds).
    pub http: Duration,
    /// A stopping run's in-flight requests.
    pub drain: Duration,
    /// Cancelled requests' last answers after `drain`.
    pub cancel_grace: Duration,
    /// The shared gateway port's remaining connections (whole seconds).
    pub port: Duration,
    /// Left for the audit flush and the trace export.
    pub flush: Duration,
}

/// The shortest grace period a plan is made for (`Settings::check`
/// refuses less).
pub const MIN_GRACE: Duration = Duration::from_secs(10);

impl ShutdownPlan {
    /// Today's fixed deadlines, for a process told nothing of its grace
    /// period (a terminal, a compose file).
    pub const FIXED: Self = Self {
        http: Duration::from_secs(10),
        drain: Duration::from_secs(5),
        cancel_grace: Duration::from_secs(1),
        port: Duration::from_secs(5),
        flush: Duration::ZERO,
    };

    /// The plan for `grace` (at least [`MIN_GRACE`]; less is planned as
    /// that much), with `slack` the gateway's fixed waits.
    pub fn for_grace(grace: Duration, slack: Duration) -> Self {
        let grace = grace.max(MIN_GRACE);
        // A tenth for the flush, 1-5 s: the audit writer's last batch.
        let flush = (grace / 10).clamp(Duration::from_secs(1), Duration::from_secs(5));
        let rest = grace.saturating_sub(flush + slack);
        let cancel_grace = Duration::from_secs(1).min(rest / 10);
        // actix takes whole seconds: round down, at least one.
        let secs = |d: Duration| Duration::from_secs(d.as_secs().max(1));
        let http = secs(rest * 3 / 10);
        let port = secs(rest * 2 / 10);
        let drain = rest
            .saturating_sub(http + port + cancel_grace)
            .max(Duration::from_millis(500));
        Self {
            http,
            drain,
            cancel_grace,
            port,
            flush,
        }
    }

    /// The plan `settings` call for.
    pub fn of(settings: &corkboard_config::Settings) -> Self {
        match settings.shutdown_grace_ms {
            Some(ms) => Self::for_grace(
                Duration::from_millis(ms),
                corkboard_gateway::GatewayConfig::SHUTDOWN_SLACK,
            ),
            None => Self::FIXED,
        }
    }

    /// The worst case of every bounded phase together, with `slack`.
    #[cfg(test)]
    fn worst_case(&self, slack: Duration) -> Duration {
        self.http + self.drain + self.cancel_grace + slack + self.port
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_grace_period_fits_its_worst_case_and_leaves_time_to_flush() {
        let slack = corkboard_gateway::GatewayConfig::SHUTDOWN_SLACK;
        for secs in [10, 11, 15, 20, 25, 30, 45, 60, 120, 600] {
            let grace = Duration::from_secs(secs);
            let plan = ShutdownPlan::for_grace(grace, slack);
            assert!(
                plan.worst_case(slack) + plan.flush <= grace,
                "{secs}s: {plan:?} takes {:?}",
                plan.worst_case(slack) + plan.flush
            );
            assert!(plan.flush >= Duration::from_secs(1), "{secs}s: {plan:?}");
            assert!(
                plan.drain >= Duration::from_millis(500),
                "{secs}s: {plan:?}"
            );
            assert!(plan.http >= Duration::from_secs(1) && plan.port >= Duration::from_secs(1));
            assert_eq!(plan.http.subsec_nanos(), 0, "actix takes whole seconds");
        }
        // Kubernetes' default 30 s minus a 5 s preStop: drains longer than
        // the fixed 5 s, and all of it before the kill.
        let plan = ShutdownPlan::for_grace(Duration::from_secs(25), slack);
        assert!(plan.drain >= Duration::from_secs(5), "{plan:?}");
    }

    #[test]
    fn without_a_grace_period_the_fixed_deadlines_stay() {
        let settings = corkboard_config::Settings::default();
        assert_eq!(ShutdownPlan::of(&settings), ShutdownPlan::FIXED);
        let settings = corkboard_config::Settings {
            shutdown_grace_ms: Some(20_000),
            ..Default::default()
        };
        assert_ne!(ShutdownPlan::of(&settings), ShutdownPlan::FIXED);
    }
}
