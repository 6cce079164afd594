//! The deployment artefacts validated offline (Helm lint and render with
//! several values files, Kubernetes 1.32 schemas, yamllint, hadolint, the
//! kustomize base), including that every configuration the chart renders
//! is accepted by this binary's own `--check-config`.

use crate::support;

use support::*;

#[test]
fn helm_chart_kustomize_base_compose_and_dockerfile_validate_offline() {
    let root = repo_root();
    let out = run(
        std::process::Command::new(root.join("scripts/validate-deploy"))
            .current_dir(&root)
            .env("CORKBOARD_BIN", corkboard_bin()),
    );
    let stdout = stdout_of(&out);
    assert!(
        out.status.success(),
        "scripts/validate-deploy failed:\n{stdout}\n{}",
        stderr_of(&out)
    );
    let summary = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("deploy validation:"))
        .unwrap_or_default();
    assert!(summary.ends_with(", 0 failed"), "{summary}");
    assert!(
        !stdout.contains("SKIPPED"),
        "a check was skipped:\n{stdout}"
    );
}
