//! Prints a generated artifact: `graphql` (schema.graphql), `openapi` (assets/openapi.json), `sql`
//! (assets/database/provisioner.sql), `errors` (docs/api/errors.md), `configuration`
//! (docs/operator/configuration.md with its table of variables as the settings give it), `crd` (the Runtime
//! resource's definition in the chart) or `crd-reference` (docs/reference/runtime-resource.md).
//! Used by gqlgen.sh and `make generate`; tests check the files are current.
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

/// The operator's page whose table of variables is generated.
const CONFIGURATION_PAGE: &str = "docs/operator/configuration.md";

fn main() -> std::process::ExitCode {
    let artifact = std::env::args().nth(1).unwrap_or_default();
    let text = match artifact.as_str() {
        "graphql" => provisioner::api::graphql::schema_sdl(),
        "openapi" => provisioner::api::rest::openapi_json(),
        "sql" => migrations::postgres_schema_sql(),
        "errors" => provisioner::api::error_catalogue::errors_markdown(),
        "crd" => provisioner::declarative::crd::runtime_crd_json(),
        "crd-reference" => provisioner::declarative::reference::reference_markdown(),
        "configuration" => {
            let page = std::fs::read_to_string(CONFIGURATION_PAGE).unwrap_or_default();
            match provisioner::settings::with_variables_table(&page) {
                Ok(page) => page,
                Err(error) => {
                    eprintln!("{CONFIGURATION_PAGE}: {error}");
                    return std::process::ExitCode::FAILURE;
                }
            }
        }
        _ => {
            eprintln!("usage: generate graphql|openapi|sql|errors|configuration|crd|crd-reference");
            return std::process::ExitCode::from(2);
        }
    };
    print!("{text}");
    if !text.ends_with('\n') {
        println!();
    }
    std::process::ExitCode::SUCCESS
}
