//! The generated files in the repository match what the code generates today. When one fails, run
//! `make generate` and commit the result.

fn assert_current(path: &str, generated: &str) {
    let stored = std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{path}: {error}"));
    let generated = if generated.ends_with('\n') { generated.to_owned() } else { format!("{generated}\n") };
    assert!(stored == generated, "{path} is stale: run `make generate` and commit it");
}

#[test]
fn schema_graphql_is_current() {
    assert_current("schema.graphql", &provisioner::api::graphql::schema_sdl());
}

#[test]
fn openapi_document_is_current() {
    assert_current("assets/openapi.json", &provisioner::api::rest::openapi_json());
}

#[test]
fn postgres_schema_is_current() {
    assert_current("assets/database/provisioner.sql", &migrations::postgres_schema_sql());
}

/// The catalogue of error codes and failure reasons is the code's own.
#[test]
fn the_error_catalogue_is_current() {
    assert_current("docs/api/errors.md", &provisioner::api::error_catalogue::errors_markdown());
}

/// The operator's table of variables is the settings' own: each variable's default and its field's doc comment.
#[test]
fn the_table_of_variables_is_current() {
    let page = std::fs::read_to_string("docs/operator/configuration.md").unwrap();
    assert_current("docs/operator/configuration.md", &provisioner::settings::with_variables_table(&page).unwrap());
}

/// The chart's Runtime definition is the one the Rust types derive.
#[test]
fn the_runtime_definition_is_current() {
    assert_current(provisioner::declarative::crd::CHART_FILE, &provisioner::declarative::crd::runtime_crd_json());
}

/// The Runtime resource's reference page is the definition's own.
#[test]
fn the_runtime_resource_reference_is_current() {
    let page = provisioner::declarative::reference::reference_markdown();
    assert_current(provisioner::declarative::reference::REFERENCE_PAGE, &page);
}

/// `kubectl apply -k resources/` installs what the chart installs (tools/render-chart.sh).
#[test]
fn the_rendered_manifest_is_the_chart() {
    let helm = std::env::var("TEST_HELM_BIN").expect("TEST_HELM_BIN is set by `make test` (tools/build-helm.sh)");
    let output = std::process::Command::new("tools/render-chart.sh").arg(helm).output().expect("run render-chart.sh");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_current("resources/cluster-provisioner.yaml", &String::from_utf8(output.stdout).unwrap());
}

#[test]
fn graphql_enums_are_spelled_for_kyma_clients() {
    let sdl = provisioner::api::graphql::schema_sdl();
    for expected in [
        // Kyma's four values keep their spelling; AwaitingApproval appears only for runtimes whose approval
        // policy a caller chose (the default, Auto, never holds a plan back).
        "enum OperationState {\n\tPending\n\tInProgress\n",
        "\tAwaitingApproval\n\tSucceeded\n\tFailed\n}",
        "enum ApprovalPolicy {\n\tAuto\n\tManual\n\tSafeOnly\n}",
        "enum OperationType {\n\tProvision\n\tDeprovision\n",
        "\tUpgrade\n",
        "\tHibernate\n",
        "\tWakeUp\n",
        "\tRenewCertificates\n}",
        "hibernateRuntime(id: String!): OperationStatus!",
        "wakeUpRuntime(id: String!): OperationStatus!",
        "hibernationStatus: HibernationStatus!",
        "type HibernationStatus {",
        "\thibernated: Boolean!\n",
        "\thibernationPossible: Boolean!\n}",
        "enum Topology {",
        "VANILLA_KUBEADM",
        // Kyma's `provisionRuntime(config: ...)` stays valid: the dry run is an optional argument.
        "provisionRuntime(config: ProvisionRuntimeInput!, dryRun: Boolean = false): OperationStatus!",
        "upgradeCluster(id: String!, config: UpgradeClusterInput!, dryRun: Boolean = false, approvalPolicy: ApprovalPolicy): OperationStatus!",
        // Kyma's `deprovisionRuntime(id: ...)` stays valid: the confirmation and force are optional arguments.
        "deprovisionRuntime(id: String!, confirm: String, force: Boolean! = false): String!",
        "runtimeID: String!",
    ] {
        assert!(sdl.contains(expected), "missing {expected:?} in\n{sdl}");
    }
}

#[test]
fn the_openapi_document_is_served_and_names_every_path() {
    let document: serde_json::Value = serde_json::from_str(&provisioner::api::rest::openapi_json()).unwrap();
    let paths = document["paths"].as_object().unwrap();
    for path in [
        "/api/v1/provisions",
        "/api/v1/provisions/{id}",
        "/api/v1/provisions/{id}/logs",
        "/api/v1/provisions/{id}/kubeconfig",
        "/api/v1/provisions/{id}/hibernate",
        "/api/v1/provisions/{id}/wake",
        "/healthz",
        "/livez",
        "/readyz",
    ] {
        assert!(paths.contains_key(path), "{path} missing from the OpenAPI document");
    }
    assert!(document["components"]["schemas"]["ProvisionRequest"].is_object());
    let runtime = &paths["/api/v1/provisions/{id}"];
    assert!(runtime["patch"]["requestBody"].is_object(), "the upgrade is PATCH on the runtime: {runtime}");
    assert!(document["components"]["schemas"]["UpgradeClusterInput"].is_object());
}

/// The OpenAPI document tells a client what it needs to generate code: every operation has a tag and a summary,
/// the closed sets (stage, failure reason, component, runtime state, condition fields) are enums of the values
/// the server sends, and PATCH takes a JSON merge patch.
#[test]
fn the_openapi_document_has_tags_summaries_and_enums() {
    let document: serde_json::Value = serde_json::from_str(&provisioner::api::rest::openapi_json()).unwrap();
    for (path, operations) in document["paths"].as_object().unwrap() {
        for (method, operation) in operations.as_object().unwrap() {
            assert!(operation["tags"].as_array().is_some_and(|tags| !tags.is_empty()), "{method} {path}: no tag");
            assert!(
                operation["summary"].as_str().is_some_and(|summary| !summary.is_empty()),
                "{method} {path}: no summary"
            );
        }
    }
    let schemas = &document["components"]["schemas"];
    let values = |name: &str| -> Vec<String> {
        let values = schemas[name]["enum"].as_array().unwrap_or_else(|| panic!("{name} is no enum: {}", schemas[name]));
        values.iter().map(|value| value.as_str().unwrap().to_owned()).collect()
    };
    assert!(values("Stage").iter().any(|stage| stage == "WaitForJob"));
    assert!(values("FailureReason").iter().any(|reason| reason == "destructive_plan"));
    assert_eq!(
        values("Component"),
        ["provisioner", "kubernetes", "auth-service", "database", "renderer", "terraform-runner", "cloud", "cluster"]
    );
    assert_eq!(values("RuntimeState").len(), 8);
    for name in ["ConditionType", "ConditionStatus", "ConditionReason", "OperationOutcome"] {
        assert!(!values(name).is_empty(), "{name}");
    }
    let stage = &schemas["OperationRecord"]["properties"]["stage"]["$ref"];
    assert_eq!(stage, "#/components/schemas/Stage");
    for path in ["/api/v1/provisions/{id}", "/api/v1/runtimes/{id}"] {
        let content = &document["paths"][path]["patch"]["requestBody"]["content"];
        assert!(content["application/merge-patch+json"].is_object(), "{path}: {content}");
    }
}

/// The upgrade body offers no `null`: the server refuses it (in a merge patch it would remove the field), so a
/// client generated from the document must not send it (day_two::upgrades_name_every_field_they_may_not_change).
#[test]
fn the_upgrade_schema_offers_no_null_the_server_refuses() {
    let document: serde_json::Value = serde_json::from_str(&provisioner::api::rest::openapi_json()).unwrap();
    for schema in ["UpgradeClusterInput", "WorkerPoolUpgrade", "ControlPlaneUpgrade"] {
        let properties = document["components"]["schemas"][schema]["properties"].as_object().unwrap();
        for (name, property) in properties {
            assert!(!property.to_string().contains(r#""null""#), "{schema}.{name} is nullable: {property}");
        }
    }
}
