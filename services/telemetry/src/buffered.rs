//! Log lines to stderr without a `write` system call per line.
//!
//! Under load the long-running roles log one info line per request; one
//! `write(2)` per line on the request's own thread was a measurable share
//! of a request's cost (services/bench/FINDINGS.md). Lines are appended to
//! a shared buffer instead, and a background thread writes whatever has
//! gathered every [`FLUSH_EVERY`], in one call. Nothing is dropped and
//! nothing waits on a wake-up per line:
//!
//! - a `WARN` or `ERROR` line is written out at once, together with every
//!   line before it (so the order holds and an error before a crash is on
//!   stderr, not in a buffer);
//! - a buffer past [`HIGH_WATER`] is written by the thread that filled it
//!   (back-pressure instead of unbounded memory or loss);
//! - the telemetry guard flushes on shutdown, and so does dropping it.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;
use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// Longest an info line waits in the buffer.
pub(crate) const FLUSH_EVERY: Duration = Duration::from_millis(20);
/// A buffer this large is written out by the thread that filled it.
pub(crate) const HIGH_WATER: usize = 256 * 1024;

/// Where the gathered bytes finally go.
type Sink = Box<dyn Write + Send>;

struct Shared {
    pending: Mutex<Vec<u8>>,
    /// Held while writing, so two flushes never reorder lines.
    sink: Mutex<Sink>,
    stop: AtomicBool,
}

impl Shared {
    fn flush(&self) {
        let mut sink = self.sink.lock().unwrap_or_else(PoisonError::into_inner);
        let bytes =
            std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
        if !bytes.is_empty() {
            // Nowhere to report a failing stderr; the bytes are gone either way.
            let _ = sink.write_all(&bytes);
            let _ = sink.flush();
        }
    }
}

/// A [`MakeWriter`] over a buffer flushed by its own thread. Cheap to clone.
#[derive(Clone)]
pub(crate) struct BufferedLog {
    shared: Arc<Shared>,
    flusher: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl std::fmt::Debug for BufferedLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferedLog").finish_non_exhaustive()
    }
}

impl BufferedLog {
    /// Buffers lines for stderr.
    pub(crate) fn stderr() -> Self {
        Self::to(Box::new(io::stderr()))
    }

    /// Buffers lines for `sink` (tests).
    pub(crate) fn to(sink: Sink) -> Self {
        let shared = Arc::new(Shared {
            pending: Mutex::new(Vec::with_capacity(64 * 1024)),
            sink: Mutex::new(sink),
            stop: AtomicBool::new(false),
        });
        let worker = Arc::clone(&shared);
        let flusher = std::thread::Builder::new()
            .name("corkboard-log".to_owned())
            .spawn(move || {
                while !worker.stop.load(Ordering::Acquire) {
                    std::thread::park_timeout(FLUSH_EVERY);
                    worker.flush();
                }
            })
            .ok();
        Self {
            shared,
            flusher: Arc::new(Mutex::new(flusher)),
        }
    }

    /// Flushes and stops the background thread. Lines logged later are
    /// still written (each at once).
    pub(crate) fn close(&self) {
        self.shared.stop.store(true, Ordering::Release);
        let flusher = self
            .flusher
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(flusher) = flusher {
            flusher.thread().unpark();
            let _ = flusher.join();
        }
        self.shared.flush();
    }
}

/// One event's writer: appends, and flushes on drop if the line must not
/// wait.
pub(crate) struct LineWriter<'a> {
    shared: &'a Shared,
    urgent: bool,
}

impl Write for LineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let full = {
            let mut pending = self
                .shared
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            pending.extend_from_slice(buf);
            pending.len() >= HIGH_WATER
        };
        if full {
            self.shared.flush();
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter<'_> {
    fn drop(&mut self) {
        if self.urgent || self.shared.stop.load(Ordering::Acquire) {
            self.shared.flush();
        }
    }
}

impl<'a> MakeWriter<'a> for BufferedLog {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter {
            shared: &self.shared,
            urgent: true,
        }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Self::Writer {
        LineWriter {
            shared: &self.shared,
            // In `tracing`, more severe levels compare lower.
            urgent: *meta.level() <= Level::WARN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Default)]
    struct Collected(Arc<Mutex<Vec<u8>>>);

    impl Write for Collected {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Collected {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    /// Writes one line as an event of `level` would.
    fn line(log: &BufferedLog, level: Level, text: &str) {
        let mut writer = LineWriter {
            shared: &log.shared,
            urgent: level <= Level::WARN,
        };
        writer.write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn info_lines_wait_for_the_flusher_and_a_warning_takes_them_along_in_order() {
        let sink = Collected::default();
        let log = BufferedLog::to(Box::new(sink.clone()));
        // Stop the background thread so only explicit flushes write.
        log.shared.stop.store(true, Ordering::Release);
        line(&log, Level::INFO, "one\n");
        assert_eq!(sink.text(), "one\n", "a stopped log writes at once");
        log.shared.stop.store(false, Ordering::Release);
        line(&log, Level::INFO, "two\n");
        line(&log, Level::WARN, "three\n");
        assert_eq!(sink.text(), "one\ntwo\nthree\n");
        log.close();
    }

    #[test]
    fn the_flusher_writes_buffered_lines_by_itself_and_close_writes_the_rest() {
        let sink = Collected::default();
        let log = BufferedLog::to(Box::new(sink.clone()));
        line(&log, Level::INFO, "soon\n");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while sink.text().is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(sink.text(), "soon\n");
        line(&log, Level::INFO, "last\n");
        log.close();
        assert_eq!(sink.text(), "soon\nlast\n");
    }

    #[test]
    fn a_full_buffer_is_written_by_the_thread_that_filled_it() {
        let sink = Collected::default();
        let log = BufferedLog::to(Box::new(sink.clone()));
        let big = "x".repeat(HIGH_WATER);
        line(&log, Level::INFO, &big);
        assert_eq!(sink.text().len(), HIGH_WATER);
        log.close();
    }

    #[test]
    fn lines_from_many_threads_all_arrive_whole() {
        let sink = Collected::default();
        let log = BufferedLog::to(Box::new(sink.clone()));
        std::thread::scope(|scope| {
            for t in 0..4 {
                let log = &log;
                scope.spawn(move || {
                    for i in 0..1000 {
                        line(log, Level::INFO, &format!("t{t} line {i}\n"));
                    }
                });
            }
        });
        log.close();
        let text = sink.text();
        assert_eq!(text.lines().count(), 4000);
        for t in 0..4 {
            let mine: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with(&format!("t{t} ")))
                .collect();
            let expected: Vec<String> = (0..1000).map(|i| format!("t{t} line {i}")).collect();
            assert_eq!(mine, expected, "thread {t}'s lines in order");
        }
    }
}
