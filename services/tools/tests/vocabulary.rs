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
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if have != want {
        std::fs::write(&path, &want).unwrap();
        panic!(
            "{} was not up to date with the tool table and has been regenerated: \
             review and commit it (`cargo test -p corkboard-tools --test integration \
             vocabulary::` regenerates it)",
            path.display()
        );
    }
}
