//! Keeping a `corkboard run` grant alive while its command lives.
//!
//! The grant is issued for a short lifetime (the run's `--ttl`) and
//! renewed (same token, a new expiry `ttl` from now) every third of it,
//! with jitter so that many runs started together do not renew together.
//! So the token works as long as the process does, a `corkboard run` that
//! is killed without revoking leaves a token that works at most `ttl`
//! longer, and the revocation when the command ends is unchanged.
//!
//! Failures are never silent: each failed attempt is reported on stderr and
//! retried soon; a definite refusal (revoked, expired, past the maximum
//! lifetime) is reported once and renewal stops, since retrying cannot
//! change it.

use corkboard_board::Timestamp;
use std::future::Future;
use std::time::{Duration, Instant};

/// What one renewal attempt came to.
#[derive(Debug)]
pub(crate) enum Attempt {
    /// The grant now expires at this instant.
    Renewed(Timestamp),
    /// Refused for good (revoked, expired, no such run): stop renewing.
    Refused(String),
    /// Could not be done now (unreachable, unavailable): try again soon.
    Failed(String),
}

/// Renews through `renew` on a schedule driven by [`KeepAlive::tick`].
pub(crate) struct KeepAlive<F> {
    ttl: Duration,
    renew: F,
    next: Instant,
    expires_at: Timestamp,
    stopped: bool,
    capped_reported: bool,
    /// Consecutive failures, for the retry delay.
    failures: u32,
}

/// A renewal every third of the lifetime, less up to a fifth of that at
/// random, never more often than every 100 ms.
fn period(ttl: Duration) -> Duration {
    let third = ttl / 3;
    let jitter = third.mul_f64(0.2 * unit_random());
    (third - jitter).max(Duration::from_millis(100))
}

/// A retry after a failure: soon, but no busier than a few per lifetime.
fn retry_delay(ttl: Duration, failures: u32) -> Duration {
    let base = (ttl / 10).clamp(Duration::from_millis(100), Duration::from_secs(5));
    (base * failures.min(4)).min(period(ttl))
}

/// Not cryptographic: spreads renewals of runs started together.
fn unit_random() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from(nanos % 1_000) / 1_000.0
}

impl<F, Fut> KeepAlive<F>
where
    F: FnMut(Duration) -> Fut,
    Fut: Future<Output = Attempt>,
{
    /// `ttl` is the grant's lifetime as issued (the server's, after any
    /// tenant cap), `expires_at` its current expiry.
    pub(crate) fn new(ttl: Duration, expires_at: Timestamp, renew: F) -> Self {
        Self {
            ttl,
            renew,
            next: Instant::now() + period(ttl),
            expires_at,
            stopped: false,
            capped_reported: false,
            failures: 0,
        }
    }

    /// Waits for the next renewal and makes it. Cancel-safe for
    /// `tokio::select!`: a tick dropped midway is made up by the next one.
    /// Never returns once renewal has stopped.
    pub(crate) async fn tick(&mut self) {
        if self.stopped {
            return std::future::pending().await;
        }
        tokio::time::sleep_until(self.next.into()).await;
        match (self.renew)(self.ttl).await {
            Attempt::Renewed(expires_at) => {
                if self.failures > 0 {
                    eprintln!("corkboard run: renewing the run's grant works again");
                }
                self.failures = 0;
                if expires_at <= self.expires_at && !self.capped_reported {
                    self.capped_reported = true;
                    eprintln!(
                        "corkboard run: the run's grant has reached its maximum lifetime and expires at {expires_at}; it cannot be renewed past it"
                    );
                }
                self.expires_at = self.expires_at.max(expires_at);
                self.next = Instant::now() + period(self.ttl);
            }
            Attempt::Refused(reason) => {
                self.stopped = true;
                eprintln!(
                    "corkboard run: the run's grant cannot be renewed ({reason}); it expires at {}",
                    self.expires_at
                );
            }
            Attempt::Failed(reason) => {
                self.failures += 1;
                let delay = retry_delay(self.ttl, self.failures);
                eprintln!(
                    "corkboard run: renewing the run's grant failed ({reason}); retrying in {}ms (it expires at {})",
                    delay.as_millis(),
                    self.expires_at
                );
                self.next = Instant::now() + delay;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewals_come_every_third_of_the_lifetime_with_jitter() {
        let ttl = Duration::from_secs(3);
        for _ in 0..50 {
            let p = period(ttl);
            assert!(p <= Duration::from_secs(1), "{p:?}");
            assert!(p >= Duration::from_millis(800), "{p:?}");
        }
        assert_eq!(
            period(Duration::from_millis(30)),
            Duration::from_millis(100)
        );
    }

    #[test]
    fn retries_back_off_but_stay_inside_a_period() {
        let ttl = Duration::from_secs(30);
        assert_eq!(retry_delay(ttl, 1), Duration::from_secs(3));
        assert_eq!(retry_delay(ttl, 2), Duration::from_secs(6));
        assert!(retry_delay(ttl, 9) <= Duration::from_secs(10));
    }

    #[actix_rt::test]
    async fn failures_are_retried_and_a_refusal_stops_renewal() {
        let mut answers = vec![
            Attempt::Refused("revoked".into()),
            Attempt::Renewed(Timestamp::from_millis(10_000)),
            Attempt::Failed("unreachable".into()),
        ];
        let calls = std::cell::Cell::new(0);
        // 300 ms: renewals and retries every 100 ms, the shortest.
        let mut keep = KeepAlive::new(
            Duration::from_millis(300),
            Timestamp::from_millis(3_000),
            |_ttl| {
                calls.set(calls.get() + 1);
                let answer = answers.pop().expect("no more answers");
                async move { answer }
            },
        );
        keep.tick().await;
        assert_eq!(keep.failures, 1);
        keep.tick().await;
        assert_eq!(keep.failures, 0);
        assert_eq!(keep.expires_at, Timestamp::from_millis(10_000));
        keep.tick().await;
        assert!(keep.stopped);
        // Stopped: the next tick never completes (a running keep-alive
        // ticks within its 100 ms shortest period; 2 s is twenty of them).
        let more = tokio::time::timeout(Duration::from_secs(2), keep.tick()).await;
        assert!(more.is_err());
        assert_eq!(calls.get(), 3);
    }
}
