//! Applying a service's RBAC manifest to a test namespace, so tests run with exactly the production
//! permissions.

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::Api;
use kube::api::PostParams;
use serde_json::Value;
use yaml_rust2::{Yaml, YamlLoader};

use crate::{ControlPlane, Result};

impl ControlPlane {
    /// Creates the ServiceAccounts, Roles, RoleBindings, ClusterRoles and ClusterRoleBindings of a YAML
    /// manifest (other kinds are skipped) in `namespace`. Namespaced objects and binding subjects move to
    /// `namespace`; cluster-scoped objects get `-<namespace>` appended to their names, so that tests sharing the
    /// control plane do not collide.
    pub async fn apply_rbac_manifest(&self, manifest: &str, namespace: &str) -> Result<()> {
        let client = self.admin_client()?;
        let params = PostParams::default();
        let unique = |name: &Value| Value::from(format!("{}-{namespace}", name.as_str().unwrap_or_default()));
        for document in YamlLoader::load_from_str(manifest)? {
            let mut object = yaml_to_json(&document);
            if let Some(subjects) = object["subjects"].as_array_mut() {
                for subject in subjects {
                    subject["namespace"] = Value::from(namespace);
                }
            }
            match object["kind"].as_str().unwrap_or_default() {
                "ServiceAccount" => {
                    object["metadata"]["namespace"] = Value::from(namespace);
                    let account: ServiceAccount = serde_json::from_value(object)?;
                    Api::<ServiceAccount>::namespaced(client.clone(), namespace).create(&params, &account).await?;
                }
                "Role" => {
                    object["metadata"]["namespace"] = Value::from(namespace);
                    let role: Role = serde_json::from_value(object)?;
                    Api::<Role>::namespaced(client.clone(), namespace).create(&params, &role).await?;
                }
                "RoleBinding" => {
                    object["metadata"]["namespace"] = Value::from(namespace);
                    let binding: RoleBinding = serde_json::from_value(object)?;
                    Api::<RoleBinding>::namespaced(client.clone(), namespace).create(&params, &binding).await?;
                }
                "ClusterRole" => {
                    object["metadata"]["name"] = unique(&object["metadata"]["name"]);
                    let role: ClusterRole = serde_json::from_value(object)?;
                    Api::<ClusterRole>::all(client.clone()).create(&params, &role).await?;
                }
                "ClusterRoleBinding" => {
                    object["metadata"]["name"] = unique(&object["metadata"]["name"]);
                    object["roleRef"]["name"] = unique(&object["roleRef"]["name"]);
                    let binding: ClusterRoleBinding = serde_json::from_value(object)?;
                    Api::<ClusterRoleBinding>::all(client.clone()).create(&params, &binding).await?;
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn yaml_to_json(yaml: &Yaml) -> Value {
    match yaml {
        Yaml::Hash(hash) => Value::Object(
            hash.iter()
                .map(|(key, value)| (key.as_str().unwrap_or_default().to_owned(), yaml_to_json(value)))
                .collect(),
        ),
        Yaml::Array(items) => Value::Array(items.iter().map(yaml_to_json).collect()),
        Yaml::String(text) => Value::from(text.as_str()),
        Yaml::Integer(number) => Value::from(*number),
        Yaml::Boolean(flag) => Value::from(*flag),
        Yaml::Real(text) => text.parse::<f64>().map(Value::from).unwrap_or(Value::Null),
        _ => Value::Null,
    }
}
