//! [`FakeGoogleApis`]: the few calls of the GKE and Compute Engine REST APIs that terraform-runner makes to find
//! and delete what a runtime left (no emulator of either exists): listing the project's clusters and its
//! instances and disks across zones, and deleting one. Answers have the shape of Google's (see the runner's
//! recorded listings in `gcp/leftovers.rs`); listings are not filtered by the `filter` parameter, so the runner's
//! own check of the labels is what decides. Point the runner at it with [`FakeGoogleApis::env`].

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use serde_json::{Value, json};

/// One resource the fake holds.
#[derive(Debug, Clone)]
struct Resource {
    /// `clusters`, `instances` or `disks`.
    collection: String,
    project: String,
    /// A cluster's location, an instance's or a disk's zone.
    place: String,
    name: String,
    labels: Value,
}

impl Resource {
    fn self_link(&self) -> String {
        let Resource { collection, project, place, name, .. } = self;
        match collection.as_str() {
            "clusters" => {
                format!("https://container.googleapis.com/v1/projects/{project}/locations/{place}/clusters/{name}")
            }
            _ => format!("https://www.googleapis.com/compute/v1/projects/{project}/zones/{place}/{collection}/{name}"),
        }
    }

    fn json(&self) -> Value {
        let labels_key = if self.collection == "clusters" { "resourceLabels" } else { "labels" };
        json!({"name": self.name, "status": "RUNNING", labels_key: self.labels, "selfLink": self.self_link()})
    }
}

#[derive(Default)]
struct ApisState {
    resources: Mutex<Vec<Resource>>,
    /// `METHOD path` and the bearer token (`-` for none) of every request, in order.
    requests: Mutex<Vec<(String, String)>>,
}

pub struct FakeGoogleApis {
    state: Arc<ApisState>,
    base: String,
    task: tokio::task::JoinHandle<()>,
}

impl FakeGoogleApis {
    pub async fn start() -> FakeGoogleApis {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the Google APIs");
        let base = format!("http://{}", listener.local_addr().expect("Google APIs address"));
        let state = Arc::new(ApisState::default());
        let router = Router::new()
            .route("/container/v1/projects/{project}/locations/-/clusters", get(list_clusters))
            .route("/container/v1/projects/{project}/locations/{place}/clusters/{name}", delete(delete_cluster))
            .route("/compute/v1/projects/{project}/aggregated/{collection}", get(list_in_zones))
            .route("/compute/v1/projects/{project}/zones/{place}/{collection}/{name}", delete(delete_in_zone))
            .with_state(state.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.expect("Google APIs");
        });
        FakeGoogleApis { state, base, task }
    }

    /// The runner's endpoint variables (the Google provider's names) pointing here.
    pub fn env(&self) -> [(&'static str, String); 2] {
        [
            ("GOOGLE_CONTAINER_CUSTOM_ENDPOINT", format!("{}/container/v1/", self.base)),
            ("GOOGLE_COMPUTE_CUSTOM_ENDPOINT", format!("{}/compute/v1/", self.base)),
        ]
    }

    /// Adds a GKE cluster with `labels` (its `resourceLabels`); returns its self link.
    pub fn add_cluster(&self, project: &str, location: &str, name: &str, labels: Value) -> String {
        self.add("clusters", project, location, name, labels)
    }

    /// Adds a Compute Engine instance with `labels`; returns its self link.
    pub fn add_instance(&self, project: &str, zone: &str, name: &str, labels: Value) -> String {
        self.add("instances", project, zone, name, labels)
    }

    fn add(&self, collection: &str, project: &str, place: &str, name: &str, labels: Value) -> String {
        let resource = Resource {
            collection: collection.to_owned(),
            project: project.to_owned(),
            place: place.to_owned(),
            name: name.to_owned(),
            labels,
        };
        let link = resource.self_link();
        self.state.resources.lock().unwrap().push(resource);
        link
    }

    /// The self links of what exists, sorted.
    pub fn self_links(&self) -> Vec<String> {
        let mut links: Vec<String> = self.state.resources.lock().unwrap().iter().map(Resource::self_link).collect();
        links.sort();
        links
    }

    /// `METHOD path` of every request, in order.
    pub fn requests(&self) -> Vec<String> {
        self.state.requests.lock().unwrap().iter().map(|(request, _)| request.clone()).collect()
    }

    /// The bearer token of every request, in order (`-` for none).
    pub fn bearer_tokens(&self) -> Vec<String> {
        self.state.requests.lock().unwrap().iter().map(|(_, bearer)| bearer.clone()).collect()
    }
}

impl Drop for FakeGoogleApis {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn record(state: &ApisState, method: &str, path: String, headers: &HeaderMap) {
    let bearer = headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or("-");
    state.requests.lock().unwrap().push((format!("{method} {path}"), bearer.to_owned()));
}

async fn list_clusters(
    State(state): State<Arc<ApisState>>,
    Path(project): Path<String>,
    headers: HeaderMap,
) -> Response {
    record(&state, "GET", format!("/container/v1/projects/{project}/locations/-/clusters"), &headers);
    let resources = state.resources.lock().unwrap();
    let clusters: Vec<Value> = resources
        .iter()
        .filter(|resource| resource.collection == "clusters" && resource.project == project)
        .map(Resource::json)
        .collect();
    // A project without clusters answers `{}`, as GKE does.
    if clusters.is_empty() { json!({}) } else { json!({"clusters": clusters}) }.to_string().into_response()
}

async fn list_in_zones(
    State(state): State<Arc<ApisState>>,
    Path((project, collection)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    record(&state, "GET", format!("/compute/v1/projects/{project}/aggregated/{collection}"), &headers);
    let resources = state.resources.lock().unwrap();
    let mut zones = serde_json::Map::new();
    for resource in resources.iter().filter(|resource| resource.collection == collection && resource.project == project)
    {
        let zone = zones.entry(format!("zones/{}", resource.place)).or_insert_with(|| json!({collection.clone(): []}));
        zone[collection.as_str()].as_array_mut().expect("a list").push(resource.json());
    }
    // Google lists every zone; one without items carries a warning instead.
    zones.entry("zones/europe-west1-d").or_insert_with(|| json!({"warning": {"code": "NO_RESULTS_ON_PAGE"}}));
    json!({"kind": format!("compute#{collection}AggregatedList"), "items": zones}).to_string().into_response()
}

async fn delete_cluster(
    State(state): State<Arc<ApisState>>,
    Path((project, place, name)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    record(&state, "DELETE", format!("/container/v1/projects/{project}/locations/{place}/clusters/{name}"), &headers);
    remove(&state, "clusters", &project, &place, &name)
}

async fn delete_in_zone(
    State(state): State<Arc<ApisState>>,
    Path((project, place, collection, name)): Path<(String, String, String, String)>,
    headers: HeaderMap,
) -> Response {
    record(&state, "DELETE", format!("/compute/v1/projects/{project}/zones/{place}/{collection}/{name}"), &headers);
    remove(&state, &collection, &project, &place, &name)
}

/// Deletes at once (Google answers with a running operation and deletes later) or answers 404.
fn remove(state: &ApisState, collection: &str, project: &str, place: &str, name: &str) -> Response {
    let mut resources = state.resources.lock().unwrap();
    let before = resources.len();
    resources.retain(|resource| {
        (resource.collection.as_str(), resource.project.as_str(), resource.place.as_str(), resource.name.as_str())
            != (collection, project, place, name)
    });
    if resources.len() == before {
        return (StatusCode::NOT_FOUND, json!({"error": {"code": 404, "message": "not found"}}).to_string())
            .into_response();
    }
    json!({"name": "operation-1", "operationType": "DELETE", "status": "RUNNING"}).to_string().into_response()
}
