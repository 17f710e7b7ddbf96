//! What keeps a web page from using the API with a visitor's browser (with authentication off, as under
//! `make run`, the browser needs no token): state-changing requests and WebSocket upgrades from another origin are
//! refused, GraphQL POSTs must be JSON (a `text/plain` POST is a "simple" cross-site request that needs no
//! preflight), and every answer says not to sniff its type and not to be cached (answers hold kubeconfigs and
//! logs). Clients without a browser send no `Origin` and are unaffected.

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// Whether the body is declared as `application/json` (parameters such as `charset` allowed).
pub fn is_json(headers: &HeaderMap) -> bool {
    is_media_type(headers, "application/json")
}

/// Whether the body is declared as `media_type` (parameters such as `charset` allowed). Neither JSON type is one
/// a page of another site may send without a CORS preflight.
pub fn is_media_type(headers: &HeaderMap, media_type: &str) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|declared| declared.trim().eq_ignore_ascii_case(media_type))
}

/// An `Origin` other than the request's own host (a page of another site, or an opaque `null` origin).
pub fn is_cross_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else { return false };
    let origin_host = origin.to_str().ok().and_then(|origin| origin.split_once("://")).map(|(_, host)| host);
    let host = headers.get(header::HOST).and_then(|host| host.to_str().ok());
    match (origin_host, host) {
        (Some(origin_host), Some(host)) => !origin_host.eq_ignore_ascii_case(host),
        _ => true,
    }
}

/// The refusal of a request from another origin.
pub fn cross_origin_refusal() -> ApiError {
    ApiError::Forbidden("requests from another origin are refused".to_owned())
}

/// Refuses state-changing requests from another origin.
pub async fn refuse_cross_origin_changes(request: Request, next: Next) -> Response {
    let safe = matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !safe && is_cross_origin(request.headers()) {
        return cross_origin_refusal().into_response();
    }
    next.run(request).await
}

/// `X-Content-Type-Options: nosniff` on every answer, and `Cache-Control: no-store` unless it says otherwise.
pub async fn response_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        pairs.iter().map(|(name, value)| (name.clone(), HeaderValue::from_str(value).unwrap())).collect()
    }

    #[test]
    fn only_another_origin_is_cross_origin() {
        assert!(!is_cross_origin(&headers(&[(header::HOST, "127.0.0.1:3000")])), "no Origin: not a browser");
        let same = headers(&[(header::HOST, "127.0.0.1:3000"), (header::ORIGIN, "http://127.0.0.1:3000")]);
        assert!(!is_cross_origin(&same));
        let other = headers(&[(header::HOST, "127.0.0.1:3000"), (header::ORIGIN, "https://evil.example")]);
        assert!(is_cross_origin(&other));
        assert!(is_cross_origin(&headers(&[(header::HOST, "127.0.0.1:3000"), (header::ORIGIN, "null")])));
        assert!(is_json(&headers(&[(header::CONTENT_TYPE, "application/json; charset=utf-8")])));
        assert!(!is_json(&headers(&[(header::CONTENT_TYPE, "text/plain")])));
    }
}
