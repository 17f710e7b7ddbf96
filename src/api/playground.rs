//! The GraphQL playground (GraphiQL) and the REST reference (Swagger UI), served with every asset they use by the
//! service itself: the browser loads nothing from anywhere else, and the pages' Content-Security-Policy would
//! refuse it if it tried. The third-party files are npm packages pinned (with integrity hashes) by
//! assets/playground/package-lock.json, which tools/build-playground.sh installs into `APP_PLAYGROUND_ASSETS_DIR`
//! (the image has them); they are read once at start. The pages and their two small scripts are the crate's own, and
//! so is `introspection.json`, the schema's introspection result, which the playground reads instead of asking the
//! API: the API may refuse introspection (`APP_GRAPHQL_INTROSPECTION`), and the schema is no secret (schema.graphql).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Where the assets are served.
pub const ASSETS_PATH: &str = "/playground/assets";
/// The schema's introspection result among the assets, public as they are.
const INTROSPECTION: &str = "introspection.json";
/// The REST reference page.
pub const API_REFERENCE_PATH: &str = "/api/v1/docs";

/// The installed files the pages load (tools/build-playground.sh copies exactly these).
const INSTALLED: [&str; 7] = [
    "react.production.min.js",
    "react-dom.production.min.js",
    "graphiql.min.js",
    "graphiql.min.css",
    "graphql-ws.min.js",
    "swagger-ui-bundle.js",
    "swagger-ui.css",
];

/// The crate's own scripts: inline scripts would need the policy to allow them.
const OWN: [(&str, &str); 2] = [
    ("playground.js", include_str!("../../assets/playground/playground.js")),
    ("api-reference.js", include_str!("../../assets/playground/api-reference.js")),
];

/// Only this origin, for everything; GraphiQL and Swagger UI set inline styles, and Swagger UI shows data: images.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
     img-src 'self' data:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; \
     form-action 'none'";

/// The pages' files, read at start.
#[derive(Clone)]
pub struct PlaygroundAssets {
    files: Arc<HashMap<&'static str, Bytes>>,
    /// Why the pages cannot work, when installed files are missing.
    missing: Option<Arc<str>>,
}

impl PlaygroundAssets {
    /// Reads the installed files from `dir`. Missing ones are logged, and the pages then answer 503 saying so:
    /// the API works without its playground.
    pub fn load(dir: &Path) -> Self {
        let mut files: HashMap<&'static str, Bytes> =
            OWN.iter().map(|(name, text)| (*name, Bytes::from_static(text.as_bytes()))).collect();
        files.insert(INTROSPECTION, Bytes::from(super::graphql::introspection_json()));
        let mut missing = Vec::new();
        for name in INSTALLED {
            match std::fs::read(dir.join(name)) {
                Ok(content) => {
                    files.insert(name, Bytes::from(content));
                }
                Err(_) => missing.push(name),
            }
        }
        let missing = (!missing.is_empty()).then(|| {
            let message = format!(
                "the playground's assets are not installed in {} (APP_PLAYGROUND_ASSETS_DIR; tools/build-playground.sh \
                 installs them): {} missing",
                dir.display(),
                missing.join(", ")
            );
            tracing::warn!("{message}");
            Arc::from(message)
        });
        PlaygroundAssets { files: Arc::new(files), missing }
    }

    /// GraphiQL on `api_endpoint`, for queries and subscriptions alike, with the schema from its file.
    pub fn graphiql(&self, api_endpoint: &str) -> Response {
        let config =
            serde_json::json!({ "endpoint": api_endpoint, "introspection": format!("{ASSETS_PATH}/{INTROSPECTION}") });
        self.page(
            "Cluster provisioner GraphQL playground",
            &["graphiql.min.css"],
            &config,
            r#"<div id="graphiql">Loading the playground…</div>"#,
            &[
                "react.production.min.js",
                "react-dom.production.min.js",
                "graphiql.min.js",
                "graphql-ws.min.js",
                "playground.js",
            ],
        )
    }

    /// Swagger UI on `openapi_path`, which needs the caller's bearer token like the API itself.
    pub fn api_reference(&self, openapi_path: &str) -> Response {
        let config = serde_json::json!({ "openapi": openapi_path });
        self.page(
            "Cluster provisioner REST API",
            &["swagger-ui.css"],
            &config,
            r#"<form id="token-form" class="token-form">
  <label for="token">Bearer token</label>
  <input id="token" name="token" type="password" autocomplete="off" placeholder="a ServiceAccount token the service allows">
  <button type="submit">Use</button>
</form>
<div id="swagger-ui"></div>"#,
            &["swagger-ui-bundle.js", "api-reference.js"],
        )
    }

    fn page(&self, title: &str, styles: &[&str], config: &serde_json::Value, body: &str, scripts: &[&str]) -> Response {
        if let Some(missing) = &self.missing {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                missing.to_string(),
            )
                .into_response();
        }
        let styles: String =
            styles.iter().map(|name| format!(r#"<link rel="stylesheet" href="{ASSETS_PATH}/{name}">"#)).collect();
        let scripts: String =
            scripts.iter().map(|name| format!(r#"<script src="{ASSETS_PATH}/{name}"></script>"#)).collect();
        // Data, not script: a JSON block the policy lets through unexecuted. `<` escaped so no value ends the block.
        let config = config.to_string().replace('<', "\\u003c");
        let html = format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{title}</title>\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n{styles}\n\
             <style>html, body {{ height: 100%; margin: 0; }} #graphiql {{ height: 100vh; }}\n\
             .token-form {{ display: flex; gap: .5em; align-items: center; padding: .75em 1.25em; font-family: sans-serif; }}\n\
             .token-form input {{ flex: 1; max-width: 40em; }}</style>\n</head>\n<body>\n\
             <script type=\"application/json\" id=\"page-config\">{config}</script>\n{body}\n{scripts}\n</body>\n</html>\n"
        );
        let mut response = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
        response
    }
}

/// `GET /playground/assets/{name}`: one of the pages' files, and nothing else.
pub async fn asset(State(assets): State<PlaygroundAssets>, UrlPath(name): UrlPath<String>) -> Response {
    let Some(content) = assets.files.get(name.as_str()) else {
        return (StatusCode::NOT_FOUND, "no such playground asset").into_response();
    };
    let content_type = match name.rsplit_once('.').map(|(_, extension)| extension) {
        Some("css") => "text/css; charset=utf-8",
        Some("json") => "application/json",
        _ => "text/javascript; charset=utf-8",
    };
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "public, max-age=3600")], content.clone())
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_its_installed_files_a_page_says_what_is_missing() {
        let empty = tempfile::tempdir().unwrap();
        let assets = PlaygroundAssets::load(empty.path());
        let page = assets.graphiql("/graphql");
        assert_eq!(page.status(), StatusCode::SERVICE_UNAVAILABLE);
        let message = assets.missing.as_deref().unwrap();
        assert!(message.contains("APP_PLAYGROUND_ASSETS_DIR") && message.contains("graphiql.min.js"), "{message}");
        // The crate's own scripts are always there.
        assert!(assets.files.contains_key("playground.js") && assets.files.contains_key("api-reference.js"));
        assert!(assets.files[INTROSPECTION].starts_with(br#"{"data":{"__schema":"#));
    }

    #[test]
    fn a_page_loads_only_this_origins_files_under_its_policy() {
        let folder = tempfile::tempdir().unwrap();
        for name in INSTALLED {
            std::fs::write(folder.path().join(name), "/* test */").unwrap();
        }
        let page = PlaygroundAssets::load(folder.path()).graphiql("/graph</script>ql");
        assert_eq!(page.status(), StatusCode::OK);
        assert_eq!(page.headers()[header::CONTENT_SECURITY_POLICY], CONTENT_SECURITY_POLICY);
        let html = futures::executor::block_on(axum::body::to_bytes(page.into_body(), usize::MAX)).unwrap();
        let html = String::from_utf8(html.to_vec()).unwrap();
        let config = r#"{"endpoint":"/graph\u003c/script>ql","introspection":"/playground/assets/introspection.json"}"#;
        assert!(html.contains(config), "{html}");
        let sources: Vec<&str> = html.split(r#"src=""#).skip(1).filter_map(|rest| rest.split('"').next()).collect();
        assert_eq!(sources.len(), 5, "{html}");
        assert!(sources.iter().all(|source| source.starts_with("/playground/assets/")), "{sources:?}");
    }
}
