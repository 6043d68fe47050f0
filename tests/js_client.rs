//! Runs the browser client module's own tests (codec vectors, transport contract) with Node's
//! built-in test runner, so `cargo test` covers the JavaScript half too.

use std::process::Command;

#[test]
fn browser_client_module_passes_its_node_tests() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("node")
        .args(["--test", "tests/js/"])
        .current_dir(root)
        .output()
        .expect("node (>= 20) is needed to test src/web/client.js; install Node.js");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "node --test failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for zero in ["# fail 0", "# cancelled 0"] {
        assert!(stdout.contains(zero), "expected {zero:?}:\n{stdout}");
    }
}
