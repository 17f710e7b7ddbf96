//! docs/operator/quick-start.md as a script the end-to-end test runs: each `sh` block of the page is marked
//! `<!-- quick-start: NAME -->` (run by the test under that name) or `<!-- quick-start: not run: WHY -->`, and a
//! block without a marker fails the test, so that the page cannot grow a step nobody runs. A step runs in bash with
//! `-euo pipefail` in a folder of its own (the page's files land there, the chart is reached as
//! `charts/cluster-provisioner`), with the real kubectl, helm and provisionerctl on the `PATH` and the page's
//! variables set to the test's surroundings.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The page's marked blocks, in order: (marker, code).
pub fn blocks(page: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut marker: Option<String> = None;
    let mut lines = page.lines();
    while let Some(line) = lines.next() {
        if let Some(name) = line.trim().strip_prefix("<!-- quick-start:").and_then(|rest| rest.strip_suffix("-->")) {
            marker = Some(name.trim().to_owned());
        } else if line.trim() == "```sh" {
            let code: Vec<&str> = lines.by_ref().take_while(|line| line.trim() != "```").collect();
            let marker = marker.take().unwrap_or_else(|| panic!("an unmarked sh block:\n{}", code.join("\n")));
            blocks.push((marker, code.join("\n") + "\n"));
        } else if !line.trim().is_empty() {
            marker = None;
        }
    }
    blocks
}

/// Where and with what the page's steps run.
pub struct QuickStart {
    steps: BTreeMap<String, String>,
    folder: tempfile::TempDir,
    variables: Vec<(String, String)>,
}

impl QuickStart {
    /// The page's steps with `variables`; `kubeconfig` for kubectl and helm, `extra_values` appended to every
    /// `helm install` (what the surroundings need beyond the page).
    pub fn new(page: &Path, kubeconfig: &Path, extra_values: &Path, variables: &[(&str, &str)]) -> QuickStart {
        let page = std::fs::read_to_string(page).expect("the quick start page");
        let steps = blocks(&page).into_iter().filter(|(marker, _)| !marker.starts_with("not run:")).collect();
        let folder = tempfile::tempdir().unwrap();
        let bin = folder.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let tool =
            |variable: &str| std::env::var(variable).unwrap_or_else(|_| panic!("{variable} is set by `make test`"));
        std::os::unix::fs::symlink(tool("TEST_KUBECTL_BIN"), bin.join("kubectl")).unwrap();
        std::os::unix::fs::symlink(crate::provisionerctl_support::binary(), bin.join("provisionerctl")).unwrap();
        let helm = format!(
            "#!/bin/sh\ncase \"$1\" in install|upgrade) exec '{}' \"$@\" --values '{}';; esac\nexec '{}' \"$@\"\n",
            tool("TEST_HELM_BIN"),
            extra_values.display(),
            tool("TEST_HELM_BIN"),
        );
        std::fs::write(bin.join("helm"), helm).unwrap();
        std::fs::set_permissions(bin.join("helm"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let charts = Path::new(env!("CARGO_MANIFEST_DIR")).join("charts");
        std::os::unix::fs::symlink(charts, folder.path().join("charts")).unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        let mut all = vec![("PATH".to_owned(), path), ("KUBECONFIG".to_owned(), kubeconfig.display().to_string())];
        for home in ["HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"] {
            all.push((home.to_owned(), folder.path().join(home.to_lowercase()).display().to_string()));
        }
        all.extend(variables.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())));
        QuickStart { steps, folder, variables: all }
    }

    /// Runs the step `name`; its output, or an error with everything it printed.
    pub fn run(&self, name: &str) -> Result<String, String> {
        let code = self.steps.get(name).unwrap_or_else(|| panic!("the page has no step {name:?}"));
        let output = Command::new("bash")
            .args(["-euo", "pipefail", "-c", code])
            .current_dir(self.folder.path())
            .envs(self.variables.iter().map(|(name, value)| (name, value)))
            .output()
            .expect("run bash");
        let printed = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        if output.status.success() { Ok(printed) } else { Err(format!("step {name}: {}\n{printed}", output.status)) }
    }

    /// The names of the steps the page asks to run, in the page's order.
    pub fn names(page: &Path) -> Vec<String> {
        let page = std::fs::read_to_string(page).expect("the quick start page");
        blocks(&page).into_iter().map(|(marker, _)| marker).filter(|marker| !marker.starts_with("not run:")).collect()
    }
}

#[test]
fn every_sh_block_of_the_quick_start_is_run_or_says_why_not() {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operator/quick-start.md");
    let names = QuickStart::names(&page);
    assert_eq!(names, ["secrets", "install", "caller", "first-runtime"], "the steps end_to_end runs, in this order");
    let unmarked = "intro\n\n```sh\necho hi\n```\n";
    assert!(std::panic::catch_unwind(|| blocks(unmarked)).is_err(), "an unmarked block fails");
    let marked = "<!-- quick-start: greet -->\n```sh\necho hi\n```\n";
    assert_eq!(blocks(marked), [("greet".to_owned(), "echo hi\n".to_owned())]);
}
