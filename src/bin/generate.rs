//! Prints a generated artifact: `graphql` (schema.graphql), `openapi` (assets/openapi.json), `sql`
//! (assets/database/provisioner.sql), `errors` (docs/api/errors.md) or `readme` (README.md with its table of
//! variables as the settings give it).
//! Used by gqlgen.sh and `make generate`; tests check the files are current.
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    let artifact = std::env::args().nth(1).unwrap_or_default();
    let text = match artifact.as_str() {
        "graphql" => provisioner::api::graphql::schema_sdl(),
        "openapi" => provisioner::api::rest::openapi_json(),
        "sql" => migrations::postgres_schema_sql(),
        "errors" => provisioner::api::error_catalogue::errors_markdown(),
        "readme" => {
            let readme = std::fs::read_to_string("README.md").unwrap_or_default();
            match provisioner::settings::readme_with_variables(&readme) {
                Ok(readme) => readme,
                Err(error) => {
                    eprintln!("README.md: {error}");
                    return std::process::ExitCode::FAILURE;
                }
            }
        }
        _ => {
            eprintln!("usage: generate graphql|openapi|sql|errors|readme");
            return std::process::ExitCode::from(2);
        }
    };
    print!("{text}");
    if !text.ends_with('\n') {
        println!();
    }
    std::process::ExitCode::SUCCESS
}
