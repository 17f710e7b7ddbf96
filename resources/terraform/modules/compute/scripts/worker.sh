#!/usr/bin/env bash
# Bootstraps a worker node (started by the Auto Scaling Group): waits until the first control-plane node has
# published its join credentials and its control-plane/0/joined marker to SSM Parameter Store, then runs
# kubeadm join. Workers join in parallel; only control-plane joins are serialized. See lib.sh for the env file.
#
# Usage: worker.sh ENV_FILE
set -euo pipefail

# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

join_cluster() {
  wait_for_parameter control-plane/0/joined >/dev/null
  read_join_parameters

  log "kubeadm join ${JOIN_ENDPOINT}"
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
  install_node
  if already_joined; then
    log "${KUBERNETES_DIR}/kubelet.conf exists: this node is already part of the cluster"
  else
    join_cluster
  fi
  log "worker ${NODE_NAME} has joined"
}

main "$@"
