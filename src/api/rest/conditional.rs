//! Change detection (RFC 9110): reads carry an `ETag` of what they answer, `If-None-Match` naming it answers 304,
//! and a change sent with `If-Match` is refused with 412 unless the resource is still what the client read.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::ApiResult;
use crate::api::error::ApiError;

/// A strong entity tag of a representation: a digest of its bytes.
fn entity_tag(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest.iter().take(16).map(|byte| format!("{byte:02x}")).collect();
    format!("\"{hex}\"")
}

/// The entity tag `body` would be answered with.
pub(super) fn entity_tag_of<T: Serialize>(body: &T) -> String {
    entity_tag(&serde_json::to_vec(body).expect("a view serializes"))
}

/// Whether a list of entity tags (`If-None-Match`, `If-Match`) names `tag`, or is `*`.
fn names(list: &HeaderValue, tag: &str) -> bool {
    let Ok(list) = list.to_str() else { return false };
    // The weak comparison of If-None-Match: `W/"x"` names `"x"`.
    list.split(',').map(str::trim).any(|listed| listed == "*" || listed.trim_start_matches("W/") == tag)
}

/// 200 with `body` and its `ETag`, or 304 with only the tag when `If-None-Match` names it.
pub(super) fn tagged<T: Serialize>(headers: &HeaderMap, body: &T) -> Response {
    let bytes = serde_json::to_vec(body).expect("a view serializes");
    let tag = entity_tag(&bytes);
    let etag = [(header::ETAG, tag.clone())];
    if headers.get(header::IF_NONE_MATCH).is_some_and(|list| names(list, &tag)) {
        return (StatusCode::NOT_MODIFIED, etag).into_response();
    }
    (etag, [(header::CONTENT_TYPE, "application/json")], bytes).into_response()
}

/// Refuses a change (412) when `If-Match` was sent and does not name `current`, the tag of what the resource's
/// read answers now.
pub(super) fn check_if_match(headers: &HeaderMap, current: &str) -> ApiResult<()> {
    match headers.get(header::IF_MATCH) {
        Some(list) if !names(list, current) => Err(ApiError::PreconditionFailed(format!(
            "If-Match does not name the runtime's current ETag {current}: it changed since it was read"
        ))),
        _ => Ok(()),
    }
}
