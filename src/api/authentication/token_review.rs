//! Who a bearer token belongs to, asked of Kubernetes with the TokenReview API (`authentication.k8s.io/v1`).
//! Answers are cached briefly, keyed by the token's SHA-256 (the token itself is never kept), so that a busy
//! caller costs one review per [`CACHE_TTL`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::Api;
use kube::api::PostParams;
use sha2::{Digest, Sha256};

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
    cache: Mutex<HashMap<[u8; 32], (Instant, Review)>>,
}

impl TokenReviewer {
    pub fn new(client: kube::Client, audience: String, metrics: Metrics) -> Self {
        TokenReviewer { api: Api::all(client), audience, metrics, cache: Mutex::default() }
    }

    /// Errors are the Kubernetes API failing (or refusing the service); they are not cached.
    pub async fn review(&self, token: &str) -> Result<Review, kube::Error> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(review) = self.cached(&key) {
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
        self.remember(key, review.clone());
        Ok(review)
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Review> {
        let cache = self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        cache.get(key).filter(|(reviewed, _)| reviewed.elapsed() < CACHE_TTL).map(|(_, review)| review.clone())
    }

    fn remember(&self, key: [u8; 32], review: Review) {
        let mut cache = self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if cache.len() >= CACHE_CAPACITY {
            cache.retain(|_, (reviewed, _)| reviewed.elapsed() < CACHE_TTL);
        }
        if cache.len() >= CACHE_CAPACITY
            && let Some(oldest) = cache.iter().min_by_key(|(_, (reviewed, _))| *reviewed).map(|(key, _)| *key)
        {
            cache.remove(&oldest);
        }
        cache.insert(key, (Instant::now(), review));
    }
}
