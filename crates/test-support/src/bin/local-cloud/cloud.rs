//! The cloud around the local cluster and what the service needs in the cluster: moto as AWS, a git server with
//! the modules (over HTTPS with a private CA and credentials, as in production), the Jobs' namespace with the
//! production manifest's ServiceAccounts and Roles, the modules' credentials and the runner's variables.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use test_control_plane::ControlPlane;
use test_support::git_server::{GitServer, bare_repository};
use test_support::moto::MotoServer;

use super::Error;

/// The service's default namespace for Jobs.
const NAMESPACE: &str = "kubeopera-provisioning";
const MODULES_SECRET: &str = "modules-repo";
const MODULES_USER: (&str, &str) = ("reader", "local-cloud-token");
const MODULES_TAG: &str = "v1";
const RUNNER_ENV: &str = "terraform-runner-env";

pub struct LocalCloud {
    moto: MotoServer,
    git: GitServer,
    commit: String,
    kubeconfig: PathBuf,
    _repository: tempfile::TempDir,
}

impl LocalCloud {
    /// Starts moto and the git server and prepares the Jobs' namespace; the service's kubeconfig (the cluster's
    /// admin: its certificate does not expire as a ServiceAccount token would) goes to `kubeconfig`.
    pub async fn start(control_plane: &ControlPlane, repository: &Path, kubeconfig: &Path) -> Result<Self, Error> {
        let folder = tempfile::tempdir()?;
        let (bare, commit) =
            bare_repository(&repository.join("resources/terraform/modules"), MODULES_TAG, folder.path());
        let git = GitServer::start(&bare, Some(MODULES_USER)).await;
        let moto = MotoServer::start().await;
        control_plane.write_kubeconfig(kubeconfig)?;
        let admin = control_plane.admin_client()?;
        let namespace = Namespace { metadata: named(NAMESPACE), ..Namespace::default() };
        Api::<Namespace>::all(admin.clone()).create(&PostParams::default(), &namespace).await?;
        let manifest = std::fs::read_to_string(repository.join("resources/cluster-provisioner.yaml"))?;
        control_plane.apply_rbac_manifest(&manifest, NAMESPACE).await?;
        let (user, password) = MODULES_USER;
        let credentials = [("username", user), ("password", password), ("ca.crt", git.ca_pem())];
        let secret =
            Secret { metadata: named(MODULES_SECRET), string_data: Some(map(&credentials)), ..Secret::default() };
        Api::<Secret>::namespaced(admin.clone(), NAMESPACE).create(&PostParams::default(), &secret).await?;
        // The Jobs' pods share the node's network (no pod network here) and reach the API server directly.
        let mut runner_env = BTreeMap::from([
            ("AWS_ENDPOINT_URL".to_owned(), moto.endpoint()),
            ("AWS_EC2_METADATA_DISABLED".to_owned(), "true".to_owned()),
        ]);
        runner_env.extend(control_plane.in_cluster_variables().map(|(name, value)| (name.to_owned(), value)));
        let config_map = ConfigMap { metadata: named(RUNNER_ENV), data: Some(runner_env), ..ConfigMap::default() };
        Api::<ConfigMap>::namespaced(admin, NAMESPACE).create(&PostParams::default(), &config_map).await?;
        Ok(LocalCloud { moto, git, commit, kubeconfig: kubeconfig.to_owned(), _repository: folder })
    }

    /// What the service needs besides `make run`'s variables to run its Jobs here.
    pub fn service_variables(&self) -> Vec<(&'static str, OsString)> {
        [
            ("KUBECONFIG", self.kubeconfig.clone().into_os_string()),
            ("MODULES_REPO_URL", self.git.url().into()),
            ("MODULES_REPO_REF", MODULES_TAG.into()),
            ("MODULES_REPO_COMMIT", self.commit.clone().into()),
            ("MODULES_REPO_CREDENTIALS_SECRET", MODULES_SECRET.into()),
            ("APP_RUNNER_HOST_NETWORK", "true".into()),
            ("APP_RUNNER_ENV_CONFIGMAP", RUNNER_ENV.into()),
        ]
        .into()
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    pub fn aws_endpoint(&self) -> String {
        self.moto.endpoint()
    }
}

fn named(name: &str) -> ObjectMeta {
    ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() }
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect()
}
