//! Loopback ports a test server keeps across restarts.
//!
//! A server a test kills and starts again must come back on *its* port:
//! the clients under test hold its address and reconnect by themselves. A
//! port from the kernel's ephemeral range (what binding port 0 gives) is
//! not safe for that: while the server is down, any outgoing connection on
//! the machine may get it as its source port, and another test's server
//! started on port 0 may listen on it. Then the restart has to move, and
//! the clients, still holding the old address, talk to a stranger (seen
//! in CI: a store reached another test's MongoDB and failed there).
//!
//! So servers take a [`ReservedPort`]: one outside the ephemeral range,
//! which the kernel hands to nobody, and reserved among the tests by an
//! exclusive lock on a file named after it. The lock is held as long as
//! the reservation lives, and the kernel drops it with the process, so a
//! test that dies leaves nothing reserved.

use std::fs::{self, File, OpenOptions};
use std::net::TcpListener;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Used when the kernel's ephemeral range cannot be read: below Linux's
/// default one (32768-60999).
const FALLBACK: Range<u16> = 10_000..32_768;
/// The lowest port handed out: under it are the registered services.
const LOWEST: u16 = 10_000;

/// A loopback port reserved for one test server, for as long as this value
/// lives (keep it next to the server).
#[derive(Debug)]
pub struct ReservedPort {
    port: u16,
    /// Holds the lock that reserves the port.
    _lock: File,
}

impl ReservedPort {
    /// Reserves a port that is outside the ephemeral range, not reserved by
    /// another test, and free to bind right now.
    ///
    /// # Panics
    /// If no port in the range is free (or the lock directory cannot be
    /// made).
    pub fn take() -> Self {
        let range = reservable_range();
        let dir = lock_dir();
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        let span = u64::from(range.end - range.start);
        let start = start_offset() % span;
        for step in 0..span {
            let port = range.start + u16::try_from((start + step) % span).unwrap_or(0);
            let Some(lock) = try_reserve(&dir, port) else {
                continue;
            };
            // Reserved among the tests; also free of any other program?
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Self { port, _lock: lock };
            }
        }
        panic!(
            "no free loopback port in {}..{} (reservations in {})",
            range.start,
            range.end,
            dir.display()
        )
    }

    pub fn port(&self) -> u16 {
        self.port
    }
}

/// The lock of `port`'s file, if no one else holds it.
fn try_reserve(dir: &std::path::Path, port: u16) -> Option<File> {
    let path = dir.join(format!("{port}.lock"));
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
    // `flock` locks belong to the open file, so a second reservation in
    // this same process is refused too.
    file.try_lock().ok().map(|()| file)
}

fn lock_dir() -> PathBuf {
    std::env::temp_dir().join("corkboard-test-ports")
}

/// Where to start looking: differs between processes and calls, so
/// parallel tests rarely try the same ports first.
fn start_offset() -> u64 {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    u64::from(std::process::id()).wrapping_mul(7_919)
        + CALLS.fetch_add(1, Ordering::Relaxed).wrapping_mul(104_729)
        + u64::from(nanos)
}

/// The larger stretch of ports outside the kernel's ephemeral range.
fn reservable_range() -> Range<u16> {
    fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| outside_ephemeral(&text))
        .unwrap_or(FALLBACK)
}

/// Parses `ip_local_port_range` (`"32768\t60999"`) and gives the larger of
/// the stretches below and above it.
fn outside_ephemeral(text: &str) -> Option<Range<u16>> {
    let mut bounds = text.split_whitespace().map(str::parse::<u16>);
    let (low, high) = (bounds.next()?.ok()?, bounds.next()?.ok()?);
    let below = LOWEST..low.max(LOWEST);
    let above = high.saturating_add(1).max(LOWEST)..u16::MAX;
    let larger = if below.len() >= above.len() {
        below
    } else {
        above
    };
    (larger.len() >= 1_000).then_some(larger)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_avoids_the_ephemeral_ports() {
        assert_eq!(outside_ephemeral("32768\t60999\n"), Some(10_000..32_768));
        assert_eq!(outside_ephemeral("1024 20000"), Some(20_001..65_535));
        assert_eq!(outside_ephemeral("1024 65000"), None, "too few left");
        assert_eq!(outside_ephemeral("garbage"), None);
    }

    #[test]
    fn a_reserved_port_is_outside_the_range_and_not_handed_out_twice() {
        let a = ReservedPort::take();
        let b = ReservedPort::take();
        assert_ne!(a.port(), b.port());
        assert!(reservable_range().contains(&a.port()));
        // While `a` lives, its port's lock is held, also against this
        // process.
        assert!(try_reserve(&lock_dir(), a.port()).is_none());
        let port = a.port();
        drop(a);
        assert!(
            try_reserve(&lock_dir(), port).is_some(),
            "dropping frees it"
        );
    }
}
