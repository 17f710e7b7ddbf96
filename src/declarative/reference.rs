//! The `Runtime` resource's reference page (docs/reference/runtime-resource.md), generated from the definition's
//! schema so that it says what the API server accepts: every field of the spec and the status with its type and
//! description, and the rules the API server enforces.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{JSONSchemaProps, JSONSchemaPropsOrArray};

use super::crd::runtime_crd;

/// Where `make generate` writes the page.
pub const REFERENCE_PAGE: &str = "docs/reference/runtime-resource.md";

/// The page.
pub fn reference_markdown() -> String {
    let crd = runtime_crd();
    let version = &crd.spec.versions[0];
    let root = version.schema.as_ref().and_then(|schema| schema.open_api_v3_schema.as_ref()).expect("a schema");
    let mut page = format!(
        "# The `Runtime` resource\n\nGenerated from the definition (`make generate`); the concepts are in \
         [declarative runtimes](../concepts/declarative.md).\n\n`apiVersion: {}/{}`, `kind: {}`, namespaced (the \
         namespace is the runtime's tenant), short name `{}`.\n",
        crd.spec.group,
        version.name,
        crd.spec.names.kind,
        crd.spec.names.short_names.iter().flatten().cloned().collect::<Vec<_>>().join("`, `"),
    );
    for part in ["spec", "status"] {
        let schema = root.properties.as_ref().and_then(|properties| properties.get(part)).expect("a part");
        page.push_str(&format!("\n## `{part}`\n\n| Field | Type | Description |\n|---|---|---|\n"));
        rows(schema, part, &mut page);
    }
    page
}

/// One row per field under `schema`, depth first, each named by its path.
fn rows(schema: &JSONSchemaProps, path: &str, page: &mut String) {
    let required = schema.required.clone().unwrap_or_default();
    for (name, field) in schema.properties.iter().flatten() {
        let field_path = format!("{path}.{name}");
        let mut description = field.description.clone().unwrap_or_default().replace('\n', " ");
        if required.contains(name) {
            description = format!("Required. {description}");
        }
        for rule in field.x_kubernetes_validations.iter().flatten() {
            description
                .push_str(&format!(" The API server refuses a change: {}.", rule.message.clone().unwrap_or_default()));
        }
        page.push_str(&format!(
            "| `{field_path}` | {} | {} |\n",
            type_of(field),
            description.replace('|', "\\|").trim()
        ));
        rows(field, &field_path, page);
        if let Some(JSONSchemaPropsOrArray::Schema(items)) = &field.items {
            rows(items, &format!("{field_path}[]"), page);
        }
    }
}

fn type_of(field: &JSONSchemaProps) -> String {
    let base = field.type_.clone().unwrap_or_else(|| "object".to_owned());
    match (&field.enum_, &field.items) {
        (Some(values), _) => {
            let values: Vec<String> = values.iter().map(|value| format!("`{}`", value.0)).collect();
            format!("{base}: {}", values.join(", "))
        }
        (None, Some(JSONSchemaPropsOrArray::Schema(items))) => format!("{base} of {}", type_of(items)),
        _ => base,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_every_field_with_its_type_and_the_rules() {
        let page = reference_markdown();
        assert!(
            page.contains("| `spec.topology` | string: `\"vanilla_kubeadm\"`, `\"eks\"`, `\"gke\"` | Required."),
            "{page}"
        );
        assert!(page.contains("| `spec.workerPool.maxSize` | integer |"), "{page}");
        assert!(page.contains("topology cannot change once the runtime exists"), "{page}");
        assert!(page.contains("| `status.conditions[].type` | string |"), "{page}");
    }
}
