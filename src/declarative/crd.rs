//! The CustomResourceDefinition of [`RuntimeResource`] as the chart installs it (`make generate` writes it): the
//! schema kube derives from the Rust types, and the rules the API server enforces itself, so that an edit of
//! what cannot change once the runtime exists is refused by `kubectl apply`, naming the field.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, ValidationRule,
};
use kube::CustomResourceExt;

use super::resource::RuntimeResource;

/// Where the chart keeps the generated definition; a template installs it when `crds.install` is on.
pub const CHART_FILE: &str = "charts/cluster-provisioner/files/crds/runtimes.provisioner.kubeopera.io.json";

/// The spec fields fixed at creation, by their path under `spec`, each with why: another topology, region,
/// environment (it names the state bucket) or project is another cluster, not a change of this one.
const IMMUTABLE: [(&[&str], &str); 4] = [
    (&["topology"], "topology cannot change once the runtime exists: create another Runtime"),
    (&["region"], "region cannot change once the runtime exists: create another Runtime"),
    (&["environment"], "environment names the runtime's state and cannot change once the runtime exists"),
    (&["gcp", "projectId"], "gcp.projectId cannot change once the runtime exists: create another Runtime"),
];

/// The definition, with its immutability rules. Helm keeps it when the chart is uninstalled: deleting it would
/// delete every Runtime, and with them their clusters.
pub fn runtime_crd() -> CustomResourceDefinition {
    let mut crd = RuntimeResource::crd();
    crd.metadata.annotations = Some([("helm.sh/resource-policy".to_owned(), "keep".to_owned())].into());
    for version in &mut crd.spec.versions {
        let spec = version
            .schema
            .as_mut()
            .and_then(|validation| validation.open_api_v3_schema.as_mut())
            .and_then(|root| property(root, "spec"))
            .expect("the derived schema has a spec");
        for (path, message) in IMMUTABLE {
            let field = path.iter().try_fold(&mut *spec, |schema, name| property(schema, name));
            let field = field.unwrap_or_else(|| panic!("the spec has no field {}", path.join(".")));
            field.x_kubernetes_validations = Some(vec![ValidationRule {
                rule: "self == oldSelf".to_owned(),
                message: Some(message.to_owned()),
                ..ValidationRule::default()
            }]);
        }
        pool_rules(spec);
    }
    crd
}

/// One shape of pools, and pools told apart by name: `kubectl apply` merges a list of pools by name, and the
/// API server refuses two pools of one name or both shapes before the service sees them.
fn pool_rules(spec: &mut JSONSchemaProps) {
    spec.x_kubernetes_validations.get_or_insert_with(Vec::new).push(ValidationRule {
        rule: "has(self.workerPool) != has(self.workerPools)".to_owned(),
        message: Some("give workerPool (one pool) or workerPools (named pools), not both".to_owned()),
        ..ValidationRule::default()
    });
    let pools = property(spec, "workerPools").expect("the spec has workerPools");
    pools.x_kubernetes_list_type = Some("map".to_owned());
    pools.x_kubernetes_list_map_keys = Some(vec!["name".to_owned()]);
    pools.min_items = Some(1);
    pools.max_items = Some(10);
}

fn property<'a>(schema: &'a mut JSONSchemaProps, name: &str) -> Option<&'a mut JSONSchemaProps> {
    schema.properties.as_mut()?.get_mut(name)
}

/// The definition as the chart's file holds it.
pub fn runtime_crd_json() -> String {
    serde_json::to_string_pretty(&runtime_crd()).expect("a CustomResourceDefinition serialises")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_fixed_at_creation_carry_a_transition_rule_naming_why() {
        let crd = serde_json::to_value(runtime_crd()).unwrap();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        let rule = &spec["properties"]["topology"]["x-kubernetes-validations"][0];
        assert_eq!(rule["rule"], "self == oldSelf");
        assert!(rule["message"].as_str().unwrap().starts_with("topology cannot change"));
        let project = &spec["properties"]["gcp"]["properties"]["projectId"]["x-kubernetes-validations"][0];
        assert_eq!(project["rule"], "self == oldSelf");
        assert!(spec["properties"]["kubernetesVersion"].get("x-kubernetes-validations").is_none());
    }

    #[test]
    fn pools_come_in_one_shape_and_are_merged_by_name() {
        let crd = serde_json::to_value(runtime_crd()).unwrap();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["x-kubernetes-validations"][0]["rule"], "has(self.workerPool) != has(self.workerPools)");
        let pools = &spec["properties"]["workerPools"];
        assert_eq!(
            (&pools["x-kubernetes-list-type"], &pools["x-kubernetes-list-map-keys"]),
            (&"map".into(), &serde_json::json!(["name"]))
        );
    }

    #[test]
    fn kubectl_shows_state_topology_version_region_and_age() {
        let crd = runtime_crd();
        let columns: Vec<&str> = crd.spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|column| column.name.as_str())
            .collect();
        assert_eq!(columns, ["State", "Topology", "Version", "Region", "Age"]);
        assert!(crd.spec.versions[0].subresources.as_ref().and_then(|sub| sub.status.as_ref()).is_some());
        assert_eq!(crd.spec.scope, "Namespaced");
    }
}
