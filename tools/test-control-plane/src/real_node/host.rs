//! The host state a kubelet needs or changes outside its own folder, prepared before it starts and written down
//! for the node's teardown (real_node/teardown.sh), which undoes it: the node's cgroup root, three kernel
//! tunables and the host folders the kubelet creates at fixed paths.

use std::fs;
use std::path::Path;

use crate::Result;

const CGROUPS: &str = "/sys/fs/cgroup";

/// The kubelet sets kernel.panic=10, kernel.panic_on_oops=1 and vm.overcommit_memory=1 at start (with
/// protectKernelDefaults it refuses to start instead). Two real nodes at a time would restore each other's values.
const KERNEL_TUNABLES: [&str; 3] =
    ["/proc/sys/kernel/panic", "/proc/sys/kernel/panic_on_oops", "/proc/sys/vm/overcommit_memory"];

/// Fixed paths the kubelet creates whatever its root folder: the device manager's socket folder and the
/// links to container logs. Deepest first, the order the teardown removes them in.
const KUBELET_HOST_FOLDERS: [&str; 3] = ["/var/lib/kubelet/device-plugins", "/var/lib/kubelet", "/var/log/containers"];

/// Creates the cgroup `name` the kubelet is given as its cgroupRoot: it must exist in every cgroup v1 hierarchy
/// (name=systemd included, the unified one excepted), and a cpuset child needs its parent's cpus and mems.
pub(super) fn create_cgroup_root(name: &str) -> Result<()> {
    let root = Path::new(CGROUPS);
    let create = |path: &Path| {
        fs::create_dir(path).map_err(|error| format!("creating {} (the real node needs root): {error}", path.display()))
    };
    if root.join("cgroup.controllers").exists() {
        return Ok(create(&root.join(name))?);
    }
    for hierarchy in fs::read_dir(root)? {
        let hierarchy = hierarchy?;
        if hierarchy.file_type()?.is_dir() && hierarchy.file_name() != "unified" {
            create(&hierarchy.path().join(name))?;
        }
    }
    let cpuset = root.join("cpuset");
    if cpuset.is_dir() {
        for file in ["cpuset.cpus", "cpuset.mems"] {
            fs::write(cpuset.join(name).join(file), fs::read(cpuset.join(file))?)?;
        }
    }
    Ok(())
}

/// Writes the kernel tunables' current values to `<dir>/sysctls` and the kubelet's host folders that do not exist
/// yet to `<dir>/host-folders`: the teardown restores the first and removes the second (if empty).
pub(super) fn note_host_state(dir: &Path) -> Result<()> {
    let mut tunables = String::new();
    for path in KERNEL_TUNABLES {
        tunables += &format!("{path} {}\n", fs::read_to_string(path)?.trim());
    }
    fs::write(dir.join("sysctls"), tunables)?;
    let missing: String = KUBELET_HOST_FOLDERS
        .iter()
        .filter(|folder| !Path::new(folder).exists())
        .map(|folder| format!("{folder}\n"))
        .collect();
    fs::write(dir.join("host-folders"), missing)?;
    Ok(())
}
