//! The chart grants on `observersets/status` only `patch` (docs/rbac.md: "nothing reads the
//! status subresource or sends a PUT"). A call that needs more is refused with 403 at run time
//! and only where the chart's RBAC is in force, after the code passed every test that ran with
//! the bed's admin credentials; the engine's fresh read after a status conflict did exactly that
//! (`get_status`) until D22 on the namespaced install showed it. This catches such a call in the
//! source, outside tests, before it ships.

use std::path::{Path, PathBuf};

/// The kube-rs calls on the status subresource that need a verb the chart does not grant.
const NEEDS_MORE_THAN_PATCH: [(&str, &str); 2] = [
    (".get_status(", "get observersets/status"),
    (".replace_status(", "update observersets/status"),
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs")
            && !path.to_string_lossy().ends_with("_tests.rs")
        {
            out.push(path);
        }
    }
}

#[test]
fn no_status_call_needs_a_verb_the_chart_does_not_grant() {
    let mut files = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    assert!(files.len() > 50, "src/ not found: {} files", files.len());
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read a source file");
        // The code, not its unit tests.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (call, verb) in NEEDS_MORE_THAN_PATCH {
            if code.contains(call) {
                found.push(format!("{}: {call} needs {verb}", file.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "calls the chart's RBAC refuses (read the object with get, write the status with a server-side apply patch): {found:#?}"
    );
}
