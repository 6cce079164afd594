//! The runtimes of the workspace's async tests, behind the one async test
//! attribute, `#[actix_rt::test]`.
//!
//! A plain `#[actix_rt::test]` runs the test in an actix `System` on a
//! single-threaded tokio runtime, which is what actors need and what most
//! tests want. A test that needs tasks to run in parallel with its body
//! (racing replicas, a server and its clients in one process, a blocking
//! call beside async work) names [`MultiThread`] instead:
//!
//! ```ignore
//! #[actix_rt::test(system = "corkboard_testkit::MultiThread")]
//! async fn racing_claims() { /* ... */ }
//! ```
//!
//! Both are the same attribute, so every async test also has a `System`
//! (actors can start anywhere) and there is one way to write one.

use actix_rt::{System, SystemRunner};

/// Worker threads of [`MultiThread`]'s runtime: more than the 2 cores CI
/// has, so a test whose tasks block a worker for a moment still makes
/// progress.
pub const TEST_WORKER_THREADS: usize = 4;

/// An actix `System` on a multi-threaded tokio runtime with
/// [`TEST_WORKER_THREADS`] workers; the `system` of
/// `#[actix_rt::test(system = "corkboard_testkit::MultiThread")]`.
#[derive(Debug)]
pub struct MultiThread;

impl MultiThread {
    /// What the test attribute calls: a `System` whose spawned tasks run on
    /// the runtime's workers while the test body runs on the test's thread.
    #[allow(clippy::new_ret_no_self)]
    pub fn new() -> SystemRunner {
        System::with_tokio_rt(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(TEST_WORKER_THREADS)
                .enable_all()
                .build()
                .unwrap_or_else(|e| panic!("the test runtime could not start: {e}"))
        })
    }
}
