# The real node's janitor (see process.rs and real_node.rs): runs when the test drops the RealNode or its process
# exits in any way, and leaves nothing of the node behind. containerd's shims and containers outlive containerd by
# design and the folder holds mounts, so killing everything and removing the folder is not enough; this order is.
# Arguments: the node's folder, the folder of its binaries, its cgroup name. Stdin: "<pid> <name>" per server.
dir=$1 bin=$2 cgroup=$3 kubelet='' containerd=''
while read -r pid name; do
  case $name in
    kubelet) kubelet=$pid ;;
    containerd) containerd=$pid ;;
  esac
done

# SIGTERM, then SIGKILL if the process is still there after 10 s.
stop() {
  [ -n "$1" ] || return 0
  kill -TERM "$1" 2>/dev/null || return 0
  for _ in $(seq 50); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.2
  done
  kill -KILL "$1" 2>/dev/null
}
ctr() { "$bin/ctr" -a "$dir/containerd/containerd.sock" -n k8s.io "$@"; }

# 1. The kubelet first, or it recreates what is removed next.
stop "$kubelet"
# 2. While containerd runs, kill and delete every container: that unmounts their root filesystems and ends their shims.
if [ -n "$containerd" ] && kill -0 "$containerd" 2>/dev/null; then
  for task in $(ctr tasks ls -q 2>/dev/null); do ctr tasks kill -s SIGKILL "$task" 2>/dev/null; done
  for _ in $(seq 25); do
    tasks=$(ctr tasks ls -q 2>/dev/null)
    [ -z "$tasks" ] && break
    for task in $tasks; do ctr tasks delete -f "$task" >/dev/null 2>&1; done
    sleep 0.2
  done
  for container in $(ctr containers ls -q 2>/dev/null); do ctr containers delete "$container" >/dev/null 2>&1; done
fi
stop "$containerd"
# 3. What outlived containerd (when it was killed): the containers through runc itself, then their shims, never the
#    other way round (a container survives its shim).
for root in "$dir"/containerd/runc/*/; do
  [ -d "$root" ] || continue
  for id in $(/usr/sbin/runc --root "$root" list -q 2>/dev/null); do
    /usr/sbin/runc --root "$root" delete --force "$id" 2>/dev/null
  done
done
for pid_file in "$dir"/containerd/state/io.containerd.runtime.v2.task/*/*/shim.pid; do
  [ -f "$pid_file" ] && kill -KILL "$(cat "$pid_file")" 2>/dev/null
done
# 4. Mounts under the folder (kubelet's root bind mount, volumes, sandbox shm, root filesystems), deepest first.
awk -v dir="$dir/" 'index($2, dir) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r mount; do
  umount "$mount" 2>/dev/null || umount -l "$mount"
done
# 5. The node's cgroups in every hierarchy (kubelet's QoS and pod cgroups, runc's), bottom-up.
for hierarchy in /sys/fs/cgroup /sys/fs/cgroup/*; do
  [ -d "$hierarchy/$cgroup" ] && find "$hierarchy/$cgroup" -depth -type d -exec rmdir {} + 2>/dev/null
done
# 6. What the kubelet changes outside its folder (see real_node/host.rs): links to container logs, the kernel
#    tunables (restored from "sysctls") and the folders it created (listed in "host-folders", deepest first).
find /var/log/containers -maxdepth 1 -type l -lname "$dir/*" -delete 2>/dev/null
if [ -f "$dir/sysctls" ]; then
  while read -r path value; do echo "$value" > "$path"; done < "$dir/sysctls"
fi
if [ -f "$dir/host-folders" ]; then
  while read -r folder; do
    case $folder in */device-plugins) rm -f "$folder/kubelet.sock" "$folder/kubelet_internal_checkpoint" ;; esac
    rmdir "$folder" 2>/dev/null
  done < "$dir/host-folders"
fi
rm -rf "$dir" 2>/dev/null || { sleep 1; rm -rf "$dir"; }
