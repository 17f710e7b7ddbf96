//! The real kubectl (`TEST_KUBECTL_BIN`, built by `make kubectl` at the control plane's Kubernetes version), as an
//! operator runs it against the shared test control plane: an admin kubeconfig of its own, its cache beside it,
//! and no user preferences (kuberc) or `KUBECONFIG` of the machine.

use std::path::Path;
use std::process::{Command, Output};

use test_control_plane::ControlPlane;

pub struct Kubectl {
    folder: tempfile::TempDir,
}

impl Kubectl {
    /// kubectl as the control plane's admin.
    pub fn admin(control_plane: &ControlPlane) -> Kubectl {
        let folder = tempfile::tempdir().expect("kubectl's folder");
        control_plane.write_kubeconfig(&folder.path().join("kubeconfig")).expect("the admin kubeconfig");
        Kubectl { folder }
    }

    /// Runs `kubectl <arguments>` and returns its stdout; panics with its output when it fails.
    pub fn run(&self, arguments: &[&str]) -> String {
        let output = self.output(arguments);
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "kubectl {arguments:?}: {stdout}{}", String::from_utf8_lossy(&output.stderr));
        stdout
    }

    /// Runs `kubectl <arguments>` whatever it answers.
    pub fn output(&self, arguments: &[&str]) -> Output {
        let kubectl =
            std::env::var("TEST_KUBECTL_BIN").expect("TEST_KUBECTL_BIN is set by `make test` (tools/build-kubectl.sh)");
        Command::new(kubectl)
            .arg("--kubeconfig")
            .arg(self.folder.path().join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.folder.path().join("cache"))
            .args(arguments)
            .env("KUBERC", "off")
            .env_remove("KUBECONFIG")
            .output()
            .expect("run kubectl")
    }

    /// A folder of the kubectl's own, for files it applies.
    pub fn folder(&self) -> &Path {
        self.folder.path()
    }
}
