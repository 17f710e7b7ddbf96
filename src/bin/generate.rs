//! Prints a generated artifact: `graphql` (schema.graphql), `openapi` (assets/openapi.json) or `sql`
//! (assets/database/provisioner.sql). Used by gqlgen.sh and `make generate`; tests check the files are current.
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    let artifact = std::env::args().nth(1).unwrap_or_default();
    let text = match artifact.as_str() {
        "graphql" => provisioner::api::graphql::schema_sdl(),
        "openapi" => provisioner::api::rest::openapi_json(),
        "sql" => migrations::postgres_schema_sql(),
        _ => {
            eprintln!("usage: generate graphql|openapi|sql");
            return std::process::ExitCode::from(2);
        }
    };
    print!("{text}");
    if !text.ends_with('\n') {
        println!();
    }
    std::process::ExitCode::SUCCESS
}
