# A regional GKE cluster (VPC-native, private nodes, a public endpoint for the authorized networks only) without
# its default node pool, and a separately managed autoscaling node pool per worker pool. Workload Identity is not
# enabled.

data "google_client_config" "current" {}

locals {
  project = data.google_client_config.current.project
}

resource "google_service_account" "nodes" {
  count = var.create_node_service_account ? 1 : 0

  account_id   = "gke-${substr(sha1(var.cluster_name), 0, 20)}"
  display_name = "Nodes of GKE cluster ${var.cluster_name}"
}

resource "google_project_iam_member" "nodes" {
  for_each = toset(var.create_node_service_account ? [
    "roles/logging.logWriter",
    "roles/monitoring.metricWriter",
    "roles/monitoring.viewer",
    "roles/stackdriver.resourceMetadata.writer",
    "roles/autoscaling.metricsWriter",
    "roles/artifactregistry.reader",
  ] : [])

  project = local.project
  role    = each.value
  member  = google_service_account.nodes[0].member
}

resource "google_container_cluster" "this" {
  name               = var.cluster_name
  description        = var.description
  location           = var.region
  node_locations     = var.node_locations
  min_master_version = var.kubernetes_version

  network         = var.network
  subnetwork      = var.subnetwork
  networking_mode = "VPC_NATIVE"

  ip_allocation_policy {
    cluster_secondary_range_name  = var.pods_range_name
    services_secondary_range_name = var.services_range_name
  }

  # The node pools below replace the default one, which GKE insists on creating first.
  remove_default_node_pool = true
  initial_node_count       = 1

  release_channel {
    channel = "REGULAR"
  }

  master_auth {
    client_certificate_config {
      issue_client_certificate = false
    }
  }

  # Only these ranges reach the public endpoint, and not Google Cloud's own public addresses (any project's Cloud
  # Build or Compute Engine).
  master_authorized_networks_config {
    gcp_public_cidrs_access_enabled = false

    dynamic "cidr_blocks" {
      for_each = var.master_authorized_cidrs

      content {
        cidr_block = cidr_blocks.value
      }
    }
  }

  resource_labels = var.labels

  # terraform-runner destroys clusters when their runtime is deleted.
  deletion_protection = false
}

locals {
  # The pool named default keeps the node pool clusters had before pools had names (GKE replaces a pool whose
  # name changes). The others are pool-<name>: GKE's names start with a letter, a pool's name may not.
  node_pool_names = {
    for name in keys(var.worker_pools) : name => name == "default" ? "workers" : "pool-${name}"
  }

  # Each pool's zones: its own, or every zone of the cluster.
  pool_zones = {
    for name, pool in var.worker_pools : name => length(pool.zones) > 0 ? pool.zones : var.node_locations
  }

  # Kubernetes spells taint effects NoSchedule, the GKE API NO_SCHEDULE.
  taint_effects = {
    NoSchedule       = "NO_SCHEDULE"
    PreferNoSchedule = "PREFER_NO_SCHEDULE"
    NoExecute        = "NO_EXECUTE"
  }
}

resource "google_container_node_pool" "workers" {
  for_each = var.worker_pools

  name           = local.node_pool_names[each.key]
  cluster        = google_container_cluster.this.id
  location       = var.region
  node_locations = local.pool_zones[each.key]

  # Upgrades go the platform's way: the master first (the cluster above), then the pool to the master's exact
  # version, rolled with one surge node at a time and none taken away before its replacement is ready.
  version = google_container_cluster.this.master_version

  upgrade_settings {
    strategy        = "SURGE"
    max_surge       = 1
    max_unavailable = 0
  }

  # The smallest per-zone start that reaches the pool's total minimum; the autoscaler takes over from there. A
  # cluster's only pool starts with a node per zone at least, for the system pods; another pool may start empty.
  initial_node_count = max(length(var.worker_pools) == 1 ? 1 : 0, ceil(each.value.min_size / length(local.pool_zones[each.key])))
  # Set only to hibernate (no nodes) and to wake up (back at the minimum); otherwise the autoscaler's count stays.
  node_count = (
    var.worker_scaling == "zero" ? 0 :
    var.worker_scaling == "minimum" ? ceil(each.value.min_size / length(local.pool_zones[each.key])) :
    null
  )

  # Hibernated, there is no autoscaler: it would start nodes for the system pods left pending.
  dynamic "autoscaling" {
    for_each = var.worker_scaling == "zero" ? [] : [1]

    content {
      total_min_node_count = each.value.min_size
      total_max_node_count = each.value.max_size
      location_policy      = "BALANCED"
    }
  }

  management {
    auto_repair  = true
    auto_upgrade = true
  }

  network_config {
    enable_private_nodes = true
  }

  node_config {
    machine_type    = each.value.machine_type
    disk_size_gb    = each.value.disk_size_gb
    disk_type       = "pd-balanced"
    image_type      = "COS_CONTAINERD"
    service_account = var.create_node_service_account ? google_service_account.nodes[0].email : null
    oauth_scopes    = ["https://www.googleapis.com/auth/cloud-platform"]
    resource_labels = var.labels
    spot            = each.value.spot

    # The nodes register with these (GKE adds its own cloud.google.com/ labels, the pool's name among them, and
    # taints of its own, such as the GPU one, which effective_taints lists).
    labels = each.value.labels

    dynamic "taint" {
      for_each = each.value.taints

      content {
        key    = taint.value.key
        value  = taint.value.value
        effect = local.taint_effects[taint.value.effect]
      }
    }

    shielded_instance_config {
      enable_secure_boot          = true
      enable_integrity_monitoring = true
    }

    metadata = {
      disable-legacy-endpoints = "true"
    }
  }

  lifecycle {
    # Only the start size; changing it would recreate the pool.
    ignore_changes = [initial_node_count]

    precondition {
      condition     = alltrue([for zone in each.value.zones : contains(var.node_locations, zone)])
      error_message = "The zones of worker pool ${each.key} must be among node_locations."
    }

    precondition {
      condition     = length(local.node_pool_names[each.key]) <= 40
      error_message = "The name of worker pool ${each.key} is too long for a GKE node pool name (pool-<name>, 40 characters)."
    }
  }

  depends_on = [google_project_iam_member.nodes]
}

# The single node pool before pools had names is the default pool's, with the same name.
moved {
  from = google_container_node_pool.workers
  to   = google_container_node_pool.workers["default"]
}
