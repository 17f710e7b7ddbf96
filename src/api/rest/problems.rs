//! The problem type pages: what a code a request was answered with means and what to do about it, at the
//! address every error body's `type` names.

use axum::Json;
use axum::extract::Path;
use serde::Serialize;
use utoipa::ToSchema;

use super::ApiResult;
use crate::api::error::ApiError;
use crate::api::error_code::ErrorCode;
use crate::api::problem::Problem;

/// One code of the catalogue.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProblemType {
    code: ErrorCode,
    /// The HTTP status a request answered with this code gets.
    status: u16,
    title: &'static str,
    meaning: &'static str,
    /// Whether the same request may simply be sent again: `no`, `after the state changes`, `after Retry-After`.
    retry: &'static str,
    /// What the caller should do.
    action: &'static str,
}

impl ProblemType {
    pub fn of(code: ErrorCode) -> ProblemType {
        let entry = code.entry();
        ProblemType {
            code,
            status: code.status().as_u16(),
            title: entry.title,
            meaning: entry.meaning,
            retry: entry.retry.as_str(),
            action: entry.action,
        }
    }
}

/// What one error code means: the page an error body's `type` points at.
#[utoipa::path(
    get,
    path = "/api/v1/problems/{code}",
    tag = "errors",
    summary = "What an error code means",
    params(("code" = ErrorCode, Path, description = "An error body's `code`")),
    responses(
        (status = 200, description = "The code's meaning, whether to retry and what to do", body = ProblemType),
        (status = 404, description = "No such code", body = Problem),
    )
)]
pub async fn get_problem_type(Path(code): Path<String>) -> ApiResult<Json<ProblemType>> {
    match ErrorCode::parse(&code) {
        Some(code) => Ok(Json(ProblemType::of(code))),
        None => Err(ApiError::NoRoute(format!("{}/{code}", crate::api::error_code::PROBLEM_TYPES_PATH))),
    }
}
