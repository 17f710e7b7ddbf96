//! After an apply that names them, the cluster's administrators are bound to `cluster-admin` by one
//! ClusterRoleBinding this runner owns: applied whole each time, so whoever was taken off the list loses the
//! binding, and deleted when the list is empty.

use std::time::Duration;

use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use runner_contract::administrators::{Administrator, cluster_admin_binding};

use crate::{Error, Result};

/// The binding's name: `kubeopera:` like the other names the provisioner gives inside a cluster.
pub const BINDING: &str = "kubeopera:administrators";
/// One request's limit; a run that cannot bind fails and its retry binds again (the apply is then a no-op).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Makes the binding say exactly `administrators`, through `client` (the cluster's admin credentials).
pub async fn bind(client: kube::Client, administrators: &[Administrator]) -> Result<()> {
    let api: Api<ClusterRoleBinding> = Api::all(client);
    let request = async {
        if administrators.is_empty() {
            return match api.delete(BINDING, &DeleteParams::default()).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
                Err(error) => Err(error),
            };
        }
        let params = PatchParams::apply("terraform-runner").force();
        api.patch(BINDING, &params, &Patch::Apply(cluster_admin_binding(BINDING, administrators))).await.map(drop)
    };
    match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
        Ok(result) => result.map_err(|error| Error::Administrators(error.to_string())),
        Err(_) => {
            Err(Error::Administrators(format!("no answer within {}", humantime::format_duration(REQUEST_TIMEOUT))))
        }
    }
}
