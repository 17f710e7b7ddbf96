//! What a GKE runtime left in Google Cloud (see [`crate::leftovers`]). The modules label the cluster and its
//! nodes with [`RUNTIME_ID_LABEL`]: the GKE API lists the project's clusters with their labels, the Compute
//! Engine API its instances and disks by label. An instance or disk of a GKE node pool (GKE labels it
//! [`GKE_NODE_LABEL`]) belongs to its cluster, which deletes it, so only the cluster is a leftover. Networks and
//! subnetworks take no labels: a network left by a killed run is not found here.

use reqwest::{Method, StatusCode, Url};
use runner_contract::failure::RUNTIME_ID_LABEL;
use serde_json::Value;
use uuid::Uuid;

use super::{GcpSession, describe, gcp_error, joined};
use crate::Result;
use crate::creations::Creations;
use crate::leftovers::{Deleted, RuntimeResources};

/// The label GKE puts on every instance and disk of its node pools.
const GKE_NODE_LABEL: &str = "goog-gke-node";

/// A leftover the runner deletes itself, read from its self link. The order of the variants is the order of
/// deletion: a cluster takes its node pools' instances with it, and a disk is deleted after its instance.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum GcpLeftover {
    Cluster { project: String, location: String, name: String },
    Instance { project: String, zone: String, name: String },
    Disk { project: String, zone: String, name: String },
}

impl GcpLeftover {
    /// The leftover a self link names (`https://…/v1/projects/P/zones/Z/instances/N`; a cluster's location is under
    /// `zones` or `locations`), when it is of a kind the runner deletes.
    pub(crate) fn of_self_link(link: &str) -> Option<GcpLeftover> {
        let path = link.split_once("/projects/")?.1;
        let segments: Vec<&str> = path.split('/').collect();
        let [project, scope, place, kind, name] = segments.as_slice() else { return None };
        if [project, place, name].iter().any(|segment| segment.is_empty()) {
            return None;
        }
        let (project, place, name) = ((*project).to_owned(), (*place).to_owned(), (*name).to_owned());
        Some(match (*scope, *kind) {
            ("zones" | "locations", "clusters") => GcpLeftover::Cluster { project, location: place, name },
            ("zones", "instances") => GcpLeftover::Instance { project, zone: place, name },
            ("zones", "disks") => GcpLeftover::Disk { project, zone: place, name },
            _ => return None,
        })
    }

    /// Terraform's resource type and id of this leftover.
    fn terraform_identity(&self) -> (&'static str, String) {
        match self {
            GcpLeftover::Cluster { project, location, name } => {
                ("google_container_cluster", format!("projects/{project}/locations/{location}/clusters/{name}"))
            }
            GcpLeftover::Instance { project, zone, name } => {
                ("google_compute_instance", format!("projects/{project}/zones/{zone}/instances/{name}"))
            }
            GcpLeftover::Disk { project, zone, name } => {
                ("google_compute_disk", format!("projects/{project}/zones/{zone}/disks/{name}"))
            }
        }
    }

    fn project(&self) -> &str {
        match self {
            GcpLeftover::Cluster { project, .. }
            | GcpLeftover::Instance { project, .. }
            | GcpLeftover::Disk { project, .. } => project,
        }
    }
}

/// The Compute Engine collections listed by label.
#[derive(Debug, Clone, Copy)]
enum Collection {
    Instances,
    Disks,
}

impl Collection {
    const ALL: [Collection; 2] = [Collection::Instances, Collection::Disks];

    fn as_str(self) -> &'static str {
        match self {
            Collection::Instances => "instances",
            Collection::Disks => "disks",
        }
    }

    fn list_operation(self) -> &'static str {
        match self {
            Collection::Instances => "compute.instances.aggregatedList",
            Collection::Disks => "compute.disks.aggregatedList",
        }
    }
}

/// The self links of the clusters of a `projects.locations.clusters.list` answer that carry `runtime_id`'s label.
fn clusters_carrying(listing: &Value, runtime_id: &str) -> Vec<String> {
    listing["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|cluster| carries(&cluster["resourceLabels"], runtime_id))
        .filter_map(|cluster| cluster["selfLink"].as_str().map(str::to_owned))
        .collect()
}

/// The self links in one page of an `aggregatedList` answer (`items` by zone: the collection's list, or a warning
/// when the zone has none) that carry `runtime_id`'s label and are not part of a GKE node pool.
fn items_carrying(page: &Value, collection: Collection, runtime_id: &str) -> Vec<String> {
    page["items"]
        .as_object()
        .into_iter()
        .flat_map(|zones| zones.values())
        .flat_map(|zone| zone[collection.as_str()].as_array().into_iter().flatten())
        .filter(|item| carries(&item["labels"], runtime_id) && item["labels"].get(GKE_NODE_LABEL).is_none())
        .filter_map(|item| item["selfLink"].as_str().map(str::to_owned))
        .collect()
}

/// The label is checked here even where the API was asked to filter by it: an answer is not trusted.
fn carries(labels: &Value, runtime_id: &str) -> bool {
    labels.get(RUNTIME_ID_LABEL).and_then(Value::as_str) == Some(runtime_id)
}

impl RuntimeResources for GcpSession {
    type Leftover = GcpLeftover;

    fn leftover(self_link: &str) -> Option<GcpLeftover> {
        GcpLeftover::of_self_link(self_link)
    }

    /// A kind the runner deletes by its type and id; any other by the path its self link ends with (`projects/…`,
    /// Terraform's id of most Google resources).
    fn created_by_a_run(self_link: &str, creations: &Creations) -> bool {
        match GcpLeftover::of_self_link(self_link) {
            Some(leftover) => {
                let (resource_type, id) = leftover.terraform_identity();
                creations.holds(resource_type, &id)
            }
            None => self_link
                .split_once("/projects/")
                .is_some_and(|(_, path)| creations.holds_id(&format!("projects/{path}"))),
        }
    }

    /// The self links of this project's clusters, instances and disks that carry `runtime_id`'s label.
    async fn left_of_runtime(&self, runtime_id: Uuid) -> Result<Vec<String>> {
        let runtime_id = runtime_id.to_string();
        let mut left = self.labelled_clusters(&runtime_id).await?;
        for collection in Collection::ALL {
            left.extend(self.labelled_in_zones(collection, &runtime_id).await?);
        }
        left.sort();
        Ok(left)
    }

    async fn delete(&self, leftover: &GcpLeftover) -> Result<Deleted> {
        // Self links come from the cloud's answer: only this project's resources are deleted, at this session's
        // endpoints.
        if leftover.project() != self.project {
            return Ok(Deleted::Refused(format!("of project {}, not {}", leftover.project(), self.project)));
        }
        let (operation, url) = self.deletion(leftover);
        match self.call(operation, Method::DELETE, url, None).await? {
            (status, _) if status.is_success() || status == StatusCode::NOT_FOUND => Ok(Deleted::Yes),
            // In use (a disk still attached), or busy with another operation (a cluster being changed).
            (status @ (StatusCode::BAD_REQUEST | StatusCode::CONFLICT | StatusCode::PRECONDITION_FAILED), body) => {
                Ok(Deleted::Refused(describe(status, &body)))
            }
            (status, body) => Err(gcp_error(operation, describe(status, &body))),
        }
    }
}

impl GcpSession {
    async fn labelled_clusters(&self, runtime_id: &str) -> Result<Vec<String>> {
        let url = joined(&self.container, &["projects", &self.project, "locations", "-", "clusters"]);
        match self.call("container.clusters.list", Method::GET, url, None).await? {
            (status, listing) if status.is_success() => Ok(clusters_carrying(&listing, runtime_id)),
            (status, body) => Err(gcp_error("container.clusters.list", describe(status, &body))),
        }
    }

    async fn labelled_in_zones(&self, collection: Collection, runtime_id: &str) -> Result<Vec<String>> {
        let operation = collection.list_operation();
        let mut found = Vec::new();
        let mut page_token: Option<String> = None;
        loop {
            let mut url = joined(&self.compute, &["projects", &self.project, "aggregated", collection.as_str()]);
            url.query_pairs_mut().append_pair("filter", &format!("labels.{RUNTIME_ID_LABEL}=\"{runtime_id}\""));
            if let Some(token) = &page_token {
                url.query_pairs_mut().append_pair("pageToken", token);
            }
            let page = match self.call(operation, Method::GET, url, None).await? {
                (status, page) if status.is_success() => page,
                (status, body) => return Err(gcp_error(operation, describe(status, &body))),
            };
            found.extend(items_carrying(&page, collection, runtime_id));
            page_token = page["nextPageToken"].as_str().filter(|token| !token.is_empty()).map(str::to_owned);
            if page_token.is_none() {
                return Ok(found);
            }
        }
    }

    fn deletion(&self, leftover: &GcpLeftover) -> (&'static str, Url) {
        match leftover {
            GcpLeftover::Cluster { project, location, name } => (
                "container.clusters.delete",
                joined(&self.container, &["projects", project, "locations", location, "clusters", name]),
            ),
            GcpLeftover::Instance { project, zone, name } => (
                "compute.instances.delete",
                joined(&self.compute, &["projects", project, "zones", zone, "instances", name]),
            ),
            GcpLeftover::Disk { project, zone, name } => {
                ("compute.disks.delete", joined(&self.compute, &["projects", project, "zones", zone, "disks", name]))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUNTIME: &str = "0190b8a6-7f3e-7c4a-9a41-3f2d3c1b2a10";

    /// A `projects.locations.clusters.list` answer as the GKE API gives it (fields the runner does not read left
    /// out): this runtime's cluster, another runtime's, and one without labels.
    const CLUSTERS: &str = r#"{"clusters":[
      {"name":"team-a-gke","location":"europe-west3","status":"RUNNING",
       "resourceLabels":{"kubeopera-runtime-id":"0190b8a6-7f3e-7c4a-9a41-3f2d3c1b2a10","owner":"team-a"},
       "selfLink":"https://container.googleapis.com/v1/projects/my-project-1/locations/europe-west3/clusters/team-a-gke"},
      {"name":"team-b-gke","location":"europe-west3","status":"RUNNING",
       "resourceLabels":{"kubeopera-runtime-id":"0190b8a6-0000-7000-8000-000000000002"},
       "selfLink":"https://container.googleapis.com/v1/projects/my-project-1/locations/europe-west3/clusters/team-b-gke"},
      {"name":"hand-made","location":"europe-west3-a","status":"RUNNING",
       "selfLink":"https://container.googleapis.com/v1/projects/my-project-1/zones/europe-west3-a/clusters/hand-made"}]}"#;

    /// An `instances.aggregatedList` page as the Compute Engine API gives it: a zone with a node of the GKE cluster
    /// (labelled by GKE too) and a stray instance of the runtime, a zone with another runtime's instance, and a
    /// zone without instances (a warning instead).
    const INSTANCES: &str = r#"{"kind":"compute#instanceAggregatedList","items":{
      "zones/europe-west3-a":{"instances":[
        {"name":"gke-team-a-gke-workers-1a2b3c4d-x9z8","labels":{"goog-gke-node":"","kubeopera-runtime-id":"0190b8a6-7f3e-7c4a-9a41-3f2d3c1b2a10"},
         "selfLink":"https://www.googleapis.com/compute/v1/projects/my-project-1/zones/europe-west3-a/instances/gke-team-a-gke-workers-1a2b3c4d-x9z8"},
        {"name":"stray","labels":{"kubeopera-runtime-id":"0190b8a6-7f3e-7c4a-9a41-3f2d3c1b2a10"},
         "selfLink":"https://www.googleapis.com/compute/v1/projects/my-project-1/zones/europe-west3-a/instances/stray"}]},
      "zones/europe-west3-b":{"instances":[
        {"name":"other","labels":{"kubeopera-runtime-id":"0190b8a6-0000-7000-8000-000000000002"},
         "selfLink":"https://www.googleapis.com/compute/v1/projects/my-project-1/zones/europe-west3-b/instances/other"}]},
      "zones/europe-west3-c":{"warning":{"code":"NO_RESULTS_ON_PAGE","message":"There are no results for scope 'zones/europe-west3-c' on this page."}}},
      "nextPageToken":"CkQ"}"#;

    #[test]
    fn the_runtimes_cluster_is_found_by_its_label_and_no_other() {
        let listing: Value = serde_json::from_str(CLUSTERS).unwrap();
        assert_eq!(
            clusters_carrying(&listing, RUNTIME),
            ["https://container.googleapis.com/v1/projects/my-project-1/locations/europe-west3/clusters/team-a-gke"]
        );
        assert!(clusters_carrying(&serde_json::json!({}), RUNTIME).is_empty(), "a project without clusters");
    }

    #[test]
    fn nodes_of_a_gke_pool_go_with_their_cluster_and_only_the_runtimes_stray_instance_is_found() {
        let page: Value = serde_json::from_str(INSTANCES).unwrap();
        assert_eq!(
            items_carrying(&page, Collection::Instances, RUNTIME),
            ["https://www.googleapis.com/compute/v1/projects/my-project-1/zones/europe-west3-a/instances/stray"]
        );
        assert!(items_carrying(&page, Collection::Disks, RUNTIME).is_empty(), "no disks on an instances page");
    }

    #[test]
    fn a_labelled_resource_is_ours_only_when_a_run_recorded_creating_it_by_its_type_and_id() {
        let creations: Creations = serde_json::from_value(serde_json::json!({"created": [
            {"type": "google_container_cluster", "id": "projects/p/locations/europe-west3/clusters/team-a-gke",
             "address": "module.gke.google_container_cluster.this"},
            {"type": "google_compute_address", "id": "projects/p/regions/europe-west3/addresses/nat",
             "address": "google_compute_address.nat"},
        ]}))
        .unwrap();
        let ours = |link: &str| GcpSession::created_by_a_run(link, &creations);
        assert!(ours("https://container.googleapis.com/v1/projects/p/locations/europe-west3/clusters/team-a-gke"));
        assert!(
            ours("https://container.googleapis.com/v1/projects/p/zones/europe-west3/clusters/team-a-gke"),
            "a cluster's self link may name its location a zone"
        );
        assert!(ours("https://www.googleapis.com/compute/v1/projects/p/regions/europe-west3/addresses/nat"));
        assert!(!ours("https://container.googleapis.com/v1/projects/p/locations/europe-west3/clusters/team-b-gke"));
        assert!(!ours("https://www.googleapis.com/compute/v1/projects/p/zones/europe-west3-a/instances/team-a-gke"));
    }

    #[test]
    fn self_links_name_the_kinds_the_runner_deletes_cluster_first() {
        let mut leftovers: Vec<GcpLeftover> = [
            "https://compute.googleapis.com/compute/v1/projects/p/zones/europe-west3-a/disks/stray-data",
            "https://www.googleapis.com/compute/v1/projects/p/zones/europe-west3-a/instances/stray",
            "https://container.googleapis.com/v1/projects/p/zones/europe-west3/clusters/team-a-gke",
        ]
        .iter()
        .map(|link| GcpLeftover::of_self_link(link).unwrap())
        .collect();
        leftovers.sort();
        let project = || "p".to_owned();
        assert_eq!(
            leftovers,
            [
                GcpLeftover::Cluster { project: project(), location: "europe-west3".into(), name: "team-a-gke".into() },
                GcpLeftover::Instance { project: project(), zone: "europe-west3-a".into(), name: "stray".into() },
                GcpLeftover::Disk { project: project(), zone: "europe-west3-a".into(), name: "stray-data".into() },
            ]
        );
        for link in [
            "https://www.googleapis.com/compute/v1/projects/p/global/networks/team-a-gke",
            "https://www.googleapis.com/compute/v1/projects/p/regions/europe-west3/subnetworks/team-a-gke",
            "https://www.googleapis.com/compute/v1/projects/p/zones/europe-west3-a/instances/",
            "https://www.googleapis.com/compute/v1/projects/p/zones/europe-west3-a/instances/a/extra",
            "not a link",
        ] {
            assert_eq!(GcpLeftover::of_self_link(link), None, "{link}");
        }
    }
}
