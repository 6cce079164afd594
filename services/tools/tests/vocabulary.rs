//! The test clients' copy of the board vocabulary
//! (`tests/clients/vocabulary.json`, read by the Node and Python clients
//! for the tool names) is generated from the tool table: this test fails
//! when the committed copy differs, and rewrites it so that the fix is to
//! review and commit the new file (as rust-analyzer's
//! `ensure_file_contents` does).

use std::path::Path;

#[test]
fn the_clients_copy_of_the_vocabulary_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/clients/vocabulary.json");
    let mut want = serde_json::to_string_pretty(&corkboard_tools::vocabulary()).unwrap();
    want.push('\n');
    corkboard_testkit::ensure_file_contents(
        &path,
        &want,
        "cargo test -p corkboard-tools --test integration vocabulary::",
    );
}
