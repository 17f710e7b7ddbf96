//! GraphQL documents more than one test sends, written once.

/// Provisions `$config`; answers the operation's id.
pub const PROVISION: &str = "mutation($config: ProvisionRuntimeInput!) { provisionRuntime(config: $config) { id } }";

/// Deprovisions runtime `$id`; answers the operation's id.
pub const DEPROVISION: &str = "mutation($id: String!) { deprovisionRuntime(id: $id) }";

/// The kubeconfig of runtime `$id`.
pub const KUBECONFIG: &str = "query($id: String!) { runtimeStatus(id: $id) { runtimeConfiguration { kubeconfig } } }";

/// The configured maximum of runtime `$id`'s worker pool.
pub const WORKER_MAX_SIZE: &str = "query($id: String!) { runtimeStatus(id: $id) { runtimeConfiguration { clusterConfig { workerPool { maxSize } } } } }";
