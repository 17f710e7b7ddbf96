//! What a cluster is made of in its cloud, as its last apply left it: the runner reads it from the state after
//! each apply and publishes it beside the kubeconfig; the service keeps it when a runtime whose credential is gone
//! is deprovisioned by force, since nobody can then list what remains.

use serde_json::Value;

/// The key of the inventory (a JSON array of strings) in the outputs Secret.
pub const RESOURCES_KEY: &str = "resources";
/// At most this many entries are published and read: the pipeline's largest cluster (EKS) has about 40.
pub const MAX_RECORDED_RESOURCES: usize = 200;
/// At most this many characters per entry: an address and an ARN or a self link are far shorter.
const MAX_ENTRY_CHARS: usize = 512;
/// Providers whose resources exist in the cloud; the others (`tls`, `random`, `null`, `local`) live only in the
/// state.
const CLOUD_PROVIDERS: [&str; 2] = ["/aws", "/google"];

/// The cloud resources of a state, from `show -json` of it: `<address> <ARN, self link or id>` each, in the
/// state's order, at most [`MAX_RECORDED_RESOURCES`].
pub fn of_state(show_json: &[u8]) -> Result<Vec<String>, String> {
    let show: Value =
        serde_json::from_slice(show_json).map_err(|error| format!("`show -json` printed no valid JSON: {error}"))?;
    let mut entries = Vec::new();
    if let Some(root) = show.pointer("/values/root_module") {
        collect(root, &mut entries);
    }
    entries.truncate(MAX_RECORDED_RESOURCES);
    Ok(entries)
}

fn collect(module: &Value, entries: &mut Vec<String>) {
    for resource in module.get("resources").and_then(Value::as_array).into_iter().flatten() {
        if let Some(entry) = cloud_entry(resource) {
            entries.push(entry);
        }
    }
    for child in module.get("child_modules").and_then(Value::as_array).into_iter().flatten() {
        collect(child, entries);
    }
}

/// One managed resource of a cloud provider, named by what finds it in the cloud.
fn cloud_entry(resource: &Value) -> Option<String> {
    let text = |key: &str| resource.get(key).and_then(Value::as_str);
    let provider = text("provider_name")?;
    if text("mode") != Some("managed") || !CLOUD_PROVIDERS.iter().any(|suffix| provider.ends_with(suffix)) {
        return None;
    }
    let address = text("address")?;
    let values = resource.get("values")?;
    let identifier = ["arn", "self_link", "id"].iter().find_map(|key| values.get(key).and_then(Value::as_str))?;
    Some(format!("{address} {identifier}"))
}

/// Whether `inventory` names the resource of `arn`: by its ARN, or by the id the ARN ends with (a resource
/// without an `arn` attribute is recorded by its id).
pub fn names(inventory: &[String], arn: &str) -> bool {
    let id = arn.rsplit(['/', ':']).next().unwrap_or(arn);
    inventory
        .iter()
        .filter_map(|entry| entry.split_once(' ').map(|(_, identifier)| identifier))
        .any(|identifier| identifier == arn || identifier == id)
}

/// The inventory as the outputs Secret holds it, checked: it is read back from a Secret the service does not
/// write, so only a bounded list of short printable entries is kept.
pub fn parse(bytes: &[u8]) -> Result<Vec<String>, String> {
    let entries: Vec<String> =
        serde_json::from_slice(bytes).map_err(|error| format!("not a JSON array of strings: {error}"))?;
    if entries.len() > MAX_RECORDED_RESOURCES {
        return Err(format!("{} entries, more than {MAX_RECORDED_RESOURCES}", entries.len()));
    }
    match entries
        .iter()
        .find(|entry| entry.is_empty() || entry.len() > MAX_ENTRY_CHARS || entry.contains(char::is_control))
    {
        Some(entry) => Err(format!(
            "an entry is empty, longer than {MAX_ENTRY_CHARS} or not printable: {:?}",
            entry.chars().take(40).collect::<String>()
        )),
        None => Ok(entries),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of `show -json` of a state: a root module with resources and child modules.
    const STATE: &str = r#"{"format_version":"1.0","values":{"root_module":{
        "resources":[
          {"address":"aws_vpc.main","mode":"managed","provider_name":"registry.opentofu.org/hashicorp/aws",
           "values":{"arn":"arn:aws:ec2:eu-west-1:123456789012:vpc/vpc-1","id":"vpc-1"}},
          {"address":"tls_private_key.node","mode":"managed","provider_name":"registry.opentofu.org/hashicorp/tls",
           "values":{"id":"3f2a"}},
          {"address":"data.aws_ami.ubuntu","mode":"data","provider_name":"registry.opentofu.org/hashicorp/aws",
           "values":{"arn":"arn:aws:ec2:eu-west-1::image/ami-1"}}],
        "child_modules":[{"resources":[
          {"address":"module.gke.google_container_cluster.this","mode":"managed",
           "provider_name":"registry.opentofu.org/hashicorp/google",
           "values":{"id":"projects/p/locations/l/clusters/c","self_link":"https://container.googleapis.com/v1/projects/p/zones/l/clusters/c"}},
          {"address":"module.eks.aws_eip.nat","mode":"managed","provider_name":"registry.opentofu.org/hashicorp/aws",
           "values":{"id":"eipalloc-1"}}]}]}}}"#;

    #[test]
    fn the_state_names_its_cloud_resources_and_leaves_out_data_and_local_ones() {
        assert_eq!(
            of_state(STATE.as_bytes()).unwrap(),
            [
                "aws_vpc.main arn:aws:ec2:eu-west-1:123456789012:vpc/vpc-1",
                "module.gke.google_container_cluster.this https://container.googleapis.com/v1/projects/p/zones/l/clusters/c",
                "module.eks.aws_eip.nat eipalloc-1",
            ]
        );
        assert_eq!(of_state(br#"{"format_version":"1.0"}"#).unwrap(), Vec::<String>::new(), "an empty state");
        assert!(of_state(b"not json").is_err());
    }

    #[test]
    fn a_resource_is_known_by_its_arn_or_by_the_id_its_arn_ends_with() {
        let inventory = of_state(STATE.as_bytes()).unwrap();
        assert!(names(&inventory, "arn:aws:ec2:eu-west-1:123456789012:vpc/vpc-1"));
        assert!(names(&inventory, "arn:aws:ec2:eu-west-1:123456789012:elastic-ip/eipalloc-1"));
        assert!(!names(&inventory, "arn:aws:ec2:eu-west-1:123456789012:vpc/vpc-2"));
        assert!(!names(&inventory, "arn:aws:ec2:eu-west-1:123456789012:subnet/subnet-1"));
    }

    #[test]
    fn only_a_bounded_list_of_printable_entries_is_read_back() {
        let entries = of_state(STATE.as_bytes()).unwrap();
        assert_eq!(parse(serde_json::to_string(&entries).unwrap().as_bytes()).unwrap(), entries);
        let too_many = vec!["aws_vpc.main vpc-1"; MAX_RECORDED_RESOURCES + 1];
        assert!(parse(serde_json::to_string(&too_many).unwrap().as_bytes()).is_err());
        for bad in [r#"[""]"#, r#"["a\nb"]"#, r#"{"a":1}"#, r#"[1]"#] {
            assert!(parse(bad.as_bytes()).is_err(), "{bad}");
        }
        let long = format!(r#"["{}"]"#, "a".repeat(MAX_ENTRY_CHARS + 1));
        assert!(parse(long.as_bytes()).is_err());
    }
}
