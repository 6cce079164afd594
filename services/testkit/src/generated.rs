//! Files generated from the code and committed (the test clients' copy of
//! the tool vocabulary, the documentation's reference pages): a test
//! compares the committed copy with what the code generates now, and when
//! they differ rewrites it and fails, so the fix is to review and commit the
//! new file (as rust-analyzer's `ensure_file_contents` does). CI runs on a
//! clean checkout, so a stale copy fails there.

use std::path::Path;

/// Fails (after rewriting `path`) unless `path` holds exactly `want`;
/// `regenerate` is the command that regenerates it, for the message.
pub fn ensure_file_contents(path: &Path, want: &str, regenerate: &str) {
    let have = std::fs::read_to_string(path).unwrap_or_default();
    if have == want {
        return;
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    }
    std::fs::write(path, want).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    panic!(
        "{} was not up to date with the code and has been regenerated: review and commit it \
         (`{regenerate}` regenerates it)",
        path.display()
    );
}
