//! Who a bearer token belongs to, asked of Kubernetes with the TokenReview API (`authentication.k8s.io/v1`).
//! Answers are cached briefly, keyed by the token's SHA-256 (the token itself is never kept), so that a busy
//! caller costs one review per [`CACHE_TTL`]; a flood of distinct tokens costs bounded memory and constant time
//! per token ([`TtlCache`]).

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::Api;
use kube::api::PostParams;
use sha2::{Digest, Sha256};

use crate::api::ttl_cache::TtlCache;
use crate::telemetry::Metrics;

/// How long an answer is reused: a revoked token keeps working at most this long.
const CACHE_TTL: Duration = Duration::from_secs(30);
/// Bounds the memory a flood of distinct tokens can take.
const CACHE_CAPACITY: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Review {
    Authenticated {
        username: String,
        /// What RBAC bindings to groups apply to.
        groups: Vec<String>,
    },
    /// Missing, malformed, expired, revoked or meant for another audience; `reason` is Kubernetes' word.
    Rejected { reason: String },
}

/// Reviews tokens for one audience with the service's own Kubernetes client.
pub struct TokenReviewer {
    api: Api<TokenReview>,
    audience: String,
    metrics: Metrics,
    cache: TtlCache<[u8; 32], Review>,
}

impl TokenReviewer {
    pub fn new(client: kube::Client, audience: String, metrics: Metrics) -> Self {
        TokenReviewer { api: Api::all(client), audience, metrics, cache: TtlCache::new(CACHE_TTL, CACHE_CAPACITY) }
    }

    /// Errors are the Kubernetes API failing (or refusing the service); they are not cached.
    pub async fn review(&self, token: &str) -> Result<Review, kube::Error> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(review) = self.cache.get(&key) {
            return Ok(review);
        }
        let request = TokenReview {
            spec: TokenReviewSpec { token: token.to_owned(), audiences: Some(vec![self.audience.clone()]) },
            ..TokenReview::default()
        };
        let status = match self.api.create(&PostParams::default(), &request).await {
            Ok(answer) => answer.status.unwrap_or_default(),
            Err(error) => {
                self.metrics.token_reviewed("error");
                return Err(error);
            }
        };
        // Authenticators that ignore audiences may still say yes, so the audience is checked here too.
        let for_us = status.audiences.is_some_and(|audiences| audiences.contains(&self.audience));
        let user = status.user.unwrap_or_default();
        let review = match user.username {
            Some(username) if status.authenticated == Some(true) && for_us => {
                Review::Authenticated { username, groups: user.groups.unwrap_or_default() }
            }
            _ => Review::Rejected {
                reason: status.error.unwrap_or_else(|| format!("not a token for audience {}", self.audience)),
            },
        };
        self.metrics.token_reviewed(match review {
            Review::Authenticated { .. } => "authenticated",
            Review::Rejected { .. } => "rejected",
        });
        self.cache.insert(key, review.clone());
        Ok(review)
    }
}
