#!/usr/bin/env bash
# Bootstraps a worker node (started by the Auto Scaling Group): waits until the first control-plane node has
# published its join credentials and its control-plane/0/joined marker to SSM Parameter Store, then runs
# kubeadm join, its kubelet registering with the pool's node labels and taints (NODE_LABELS, NODE_TAINTS).
# Workers join in parallel; only control-plane joins are serialized. See lib.sh for the env file.
#
# Usage: worker.sh ENV_FILE
set -euo pipefail

# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# KUBELET_NODE_FLAGS for install_node: the kubelet flags that register the node with its pool's labels and
# taints. kubeadm join has no flags of its own for them, and its --config would replace the discovery flags
# below; the kubelet applies them when the node registers (values follow the label rules: no spaces).
pool_kubelet_flags() {
  KUBELET_NODE_FLAGS=''
  if [[ -n ${NODE_LABELS:-} ]]; then
    KUBELET_NODE_FLAGS+=" --node-labels=${NODE_LABELS}"
  fi
  if [[ -n ${NODE_TAINTS:-} ]]; then
    KUBELET_NODE_FLAGS+=" --register-with-taints=${NODE_TAINTS}"
  fi
  KUBELET_NODE_FLAGS=${KUBELET_NODE_FLAGS# }
}

join_cluster() {
  wait_for_parameter control-plane/0/joined >/dev/null
  read_join_parameters

  log "kubeadm join ${JOIN_ENDPOINT} (labels '${NODE_LABELS:-}', taints '${NODE_TAINTS:-}')"
  kubeadm join "$JOIN_ENDPOINT" \
    --token "$JOIN_TOKEN" \
    --discovery-token-ca-cert-hash "$JOIN_CA_CERT_HASH" \
    --node-name "$NODE_NAME"
}

main() {
  load_settings "${1:-}"
  LOG_TAG=worker
  discover_node
  LOG_TAG="worker ${NODE_NAME}"
  pool_kubelet_flags
  install_node
  if already_joined; then
    log "${KUBERNETES_DIR}/kubelet.conf exists: this node is already part of the cluster"
  else
    join_cluster
  fi
  log "worker ${NODE_NAME} has joined"
}

main "$@"
