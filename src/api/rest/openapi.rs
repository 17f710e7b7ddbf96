//! The OpenAPI document of the REST API, served and kept in `assets/openapi.json`.

use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::link::LinkBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{Content, ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use crate::api::problem::PROBLEM_JSON;

#[derive(OpenApi)]
#[openapi(
    info(title = "cluster-provisioner", description = "Provisions and deprovisions Kubernetes clusters."),
    paths(
        super::runtimes::list_runtimes,
        super::runtimes::create_runtime,
        super::runtimes::get_runtime,
        super::runtimes::patch_runtime,
        super::runtimes::hibernate_runtime,
        super::runtimes::wake_runtime,
        super::runtimes::rotate_kubeconfig,
        super::certificates::renew_certificates,
        super::runtimes::delete_runtime,
        super::provisions::list_provisions,
        super::provisions::create_provision,
        super::provisions::get_provision,
        super::provisions::patch_provision,
        super::provisions::hibernate_provision,
        super::provisions::wake_provision,
        super::logs::get_logs,
        super::logs::get_operation_logs,
        super::provisions::get_kubeconfig,
        super::provisions::delete_provision,
        super::operations::list_operations,
        super::operations::get_operation,
        super::operations::cancel_operation,
        super::operations::retry_operation,
        super::approvals::approve_operation,
        super::approvals::reject_operation,
        super::events::get_operation_events,
        super::problems::get_problem_type,
        crate::api::probes::healthz,
        crate::api::probes::livez,
        crate::api::probes::readyz,
        crate::api::probes::version
    ),
    modifiers(&BearerToken),
    security(("bearer" = []))
)]
pub struct ApiDoc;

struct BearerToken;

impl Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let scheme = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some(
                "A Kubernetes ServiceAccount token for the audience APP_AUTH_AUDIENCE, of a user in \
                 APP_AUTH_ALLOWED_USERS: 401 `unauthenticated` without a valid one, 403 `forbidden` for another user",
            ))
            .build();
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme("bearer", SecurityScheme::Http(scheme));

        // Every operation that keeps the document's bearer requirement (all but those that opt out with an
        // empty one) can answer 401 and 403; listed here once rather than on every path.
        let refusals =
            [("401", "No valid bearer token (`unauthenticated`)"), ("403", "Not an allowed caller (`forbidden`)")];
        for item in openapi.paths.paths.values_mut() {
            let operations = [&mut item.get, &mut item.post, &mut item.put, &mut item.patch, &mut item.delete];
            for operation in operations.into_iter().flatten() {
                if operation.security.as_ref().is_some_and(|requirements| !requirements.is_empty()) {
                    continue;
                }
                for (status, description) in refusals {
                    let body = ContentBuilder::new().schema(Some(Ref::from_schema_name("Problem"))).build();
                    let response = ResponseBuilder::new().description(description).content(PROBLEM_JSON, body);
                    operation.responses.responses.entry(status.to_owned()).or_insert(response.build().into());
                }
            }
        }

        // Every operation can be turned away by the request limits, or find a dependency down: listed here once.
        let limits = [
            (
                "429",
                "More requests at once than APP_MAX_CONCURRENT_REQUESTS (`overloaded`); try again after `Retry-After`",
            ),
            (
                "503",
                "A dependency did not answer (`unavailable`, with its `component`) or the request ran out of time (`timeout`); try again after `Retry-After`",
            ),
        ];
        for item in openapi.paths.paths.values_mut() {
            let operations = [&mut item.get, &mut item.post, &mut item.put, &mut item.patch, &mut item.delete];
            for operation in operations.into_iter().flatten() {
                for (status, description) in limits {
                    let body = ContentBuilder::new().schema(Some(Ref::from_schema_name("Problem"))).build();
                    let retry_after = HeaderBuilder::new()
                        .schema(ObjectBuilder::new().schema_type(Type::Integer))
                        .description(Some("Seconds to wait before trying again"))
                        .build();
                    let response = ResponseBuilder::new()
                        .description(description)
                        .header("Retry-After", retry_after)
                        .content(PROBLEM_JSON, body);
                    operation.responses.responses.entry(status.to_owned()).or_insert(response.build().into());
                }
            }
        }
        problems_as_problem_json(openapi);
        lifecycle_links(openapi);
    }
}

/// Links from a created runtime's answer to what a client does next with it (read, upgrade, hibernate, wake,
/// delete, follow the operation): a generated client and Schemathesis's stateful phase walk a runtime's life by
/// them.
fn lifecycle_links(openapi: &mut utoipa::openapi::OpenApi) {
    let next = [
        ("ReadRuntime", "get_runtime"),
        ("UpgradeRuntime", "patch_runtime"),
        ("HibernateRuntime", "hibernate_runtime"),
        ("WakeRuntime", "wake_runtime"),
        ("DeleteRuntime", "delete_runtime"),
    ];
    let Some(created) = openapi.paths.paths.get_mut("/api/v1/runtimes").and_then(|item| item.post.as_mut()) else {
        return;
    };
    let Some(RefOr::T(accepted)) = created.responses.responses.get_mut("202") else { return };
    for (name, operation_id) in next {
        let link = LinkBuilder::new().operation_id(operation_id).parameter("id", "$response.body#/runtimeId");
        accepted.links.insert(name.to_owned(), RefOr::T(link.build()));
    }
    let operation = LinkBuilder::new().operation_id("get_operation").parameter("operationId", "$response.body#/id");
    accepted.links.insert("ReadOperation".to_owned(), RefOr::T(operation.build()));
}

/// Every error body is served as `application/problem+json`; the paths declare their error bodies with the
/// `Problem` schema, which utoipa files under `application/json`.
fn problems_as_problem_json(openapi: &mut utoipa::openapi::OpenApi) {
    let problem = RefOr::Ref(Ref::from_schema_name("Problem"));
    for item in openapi.paths.paths.values_mut() {
        let operations = [&mut item.get, &mut item.post, &mut item.put, &mut item.patch, &mut item.delete];
        for operation in operations.into_iter().flatten() {
            for response in operation.responses.responses.values_mut() {
                let RefOr::T(response) = response else { continue };
                let is_problem = |content: &Content| content.schema.as_ref() == Some(&problem);
                if let Some(content) = response.content.shift_remove("application/json") {
                    let media_type = if is_problem(&content) { PROBLEM_JSON } else { "application/json" };
                    response.content.insert(media_type.to_owned(), content);
                }
            }
        }
    }
}

/// Where the OpenAPI document is served.
pub const OPENAPI_PATH: &str = "/api/v1/openapi.json";

/// The OpenAPI document served at [`OPENAPI_PATH`] and kept in `assets/openapi.json`.
pub fn openapi_json() -> String {
    let document = ApiDoc::openapi().to_pretty_json().expect("the OpenAPI document serializes");
    // utoipa 5.5 writes a Link's `operationId` in snake case, which no OpenAPI tool reads.
    document.replace(r#""operation_id": "#, r#""operationId": "#)
}

pub async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], openapi_json()).into_response()
}
