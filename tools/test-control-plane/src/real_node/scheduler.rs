//! The control plane runs no kube-scheduler (the fake node's tests bind their pods themselves), but a real node's
//! pods come from controllers: Deployments, Jobs, Helm's hooks. With one node, scheduling is binding every pod that
//! has none to it, once its host ports are free there (kube-scheduler's NodePorts filter: a host-network pod
//! replacing another waits until the old one has stopped, instead of failing the kubelet's admission).

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, Client};

/// How often unbound pods are looked for: a pod waits at most this long for its node.
const INTERVAL: Duration = Duration::from_millis(200);

/// Binds new pods to its node until dropped.
pub struct Scheduler(tokio::task::JoinHandle<()>);

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub(super) fn start(client: Client, node: String) -> Scheduler {
    Scheduler(tokio::spawn(async move {
        let pods = Api::<Pod>::all(client.clone());
        let (unbound, bound) = (
            ListParams::default().fields("spec.nodeName="),
            ListParams::default().fields(&format!("spec.nodeName={node}")),
        );
        loop {
            let mut taken: BTreeSet<i32> = pods
                .list(&bound)
                .await
                .map(|list| list.items)
                .unwrap_or_default()
                .iter()
                .flat_map(held_ports)
                .collect();
            for pod in pods.list(&unbound).await.map(|list| list.items).unwrap_or_default() {
                let wanted = host_ports(&pod);
                let metadata = pod.metadata;
                let (Some(namespace), Some(name)) = (metadata.namespace, metadata.name) else { continue };
                if metadata.deletion_timestamp.is_some() || wanted.iter().any(|port| taken.contains(port)) {
                    continue;
                }
                // A pod deleted or bound meanwhile is refused; the next round sees the truth.
                if crate::node::bind(&client, &namespace, &name, &node).await.is_ok() {
                    taken.extend(wanted);
                }
            }
            tokio::time::sleep(INTERVAL).await;
        }
    }))
}

/// The host ports a pod asks for (a host-network pod's container ports are host ports).
fn host_ports(pod: &Pod) -> Vec<i32> {
    let Some(spec) = &pod.spec else { return Vec::new() };
    let ports = spec.containers.iter().flat_map(|container| container.ports.iter().flatten());
    ports.filter_map(|port| port.host_port.filter(|port| *port > 0)).collect()
}

/// The host ports a bound pod still holds: until its containers have stopped, a terminating pod holds them too.
fn held_ports(pod: &Pod) -> Vec<i32> {
    let phase = pod.status.as_ref().and_then(|status| status.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return Vec::new();
    }
    host_ports(pod)
}
