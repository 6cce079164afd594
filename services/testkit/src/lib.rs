//! Test-only helpers shared by the workspace's test suites.
//!
//! Tests here run against real programs, not mocks: [`RedisServer`] spawns a
//! `redis-server` process on a loopback port of its own ([`ReservedPort`])
//! and [`RedisCluster`] builds a real Redis Cluster out of several of them.
//! Both are killed when dropped, also when the test panics. A missing
//! `redis-server` is a test failure with a message saying how to install
//! it, never a silent skip. [`mcp`] builds
//! the MCP requests (bodies and headers) every test folder sends, and
//! [`MultiThread`] is the runtime of async tests that need parallel tasks,
//! [`ensure_file_contents`] keeps generated, committed files current, and
//! [`LogCapture`] keeps what a test's log subscriber writes.
//!
//! This crate panics instead of returning errors: it only runs inside tests,
//! where a panic with a clear message is the most useful failure.

#![forbid(unsafe_code)]

mod cluster;
mod generated;
mod logs;
pub mod mcp;
mod mongo;
mod ports;
mod resp;
mod runtime;
mod server;

pub use cluster::RedisCluster;
pub use generated::ensure_file_contents;
pub use logs::LogCapture;
pub use mongo::*;
pub use ports::ReservedPort;
pub use resp::Reply;
pub use runtime::{MultiThread, TEST_WORKER_THREADS};
pub use server::{RedisServer, TLS_CA_FILE, TLS_CLIENT_CERT_FILE, TLS_CLIENT_KEY_FILE};

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A key prefix no other test (in this process or a parallel one) uses, so
/// tests can share a Redis without seeing each other's keys. Contains no `{`
/// or `}`, so it never turns into a Redis Cluster hash tag.
pub fn unique_prefix(test_name: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name: String = test_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "cbtest:{name}:{}:{nanos:x}:{}:",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_unique_and_tag_free() {
        let a = unique_prefix("my test {x}");
        let b = unique_prefix("my test {x}");
        assert_ne!(a, b);
        assert!(!a.contains('{') && !a.contains('}'), "{a}");
        assert!(a.starts_with("cbtest:my_test__x_:"), "{a}");
        assert!(a.ends_with(':'));
    }
}
