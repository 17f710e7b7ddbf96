//! What a deprovisioning leaves in the cloud, with the real AWS provider on moto: every resource the
//! configuration creates carries the runtime's tag (the provider's `default_tags`, as the rendered modules set
//! it), and once the state is destroyed, a destroy lists what still carries it (Resource Groups Tagging API),
//! deletes the kinds the modules create, and fails naming anything else.

use runner_contract::failure::{EXIT_LEFTOVERS, Leftovers, RUNTIME_ID_TAG};

use super::*;

/// A VPC and a subnet, tagged with the runtime's id by the provider, then `after` (depending on the subnet), and
/// the vanilla outputs.
fn tagged_network_config(job: &Job, after: &str) -> String {
    format!(
        "provider \"aws\" {{\n  region = \"{REGION}\"\n  default_tags {{\n    tags = {{ \"{RUNTIME_ID_TAG}\" = \"{}\" }}\n  }}\n}}\n\n\
         resource \"aws_vpc\" \"this\" {{\n  cidr_block = \"10.0.0.0/16\"\n}}\n\n\
         resource \"aws_subnet\" \"this\" {{\n  vpc_id     = aws_vpc.this.id\n  cidr_block = \"10.0.1.0/24\"\n}}\n\n{after}\n{}",
        job.runtime_id,
        vanilla_outputs(&job.kubeconfig_parameter(), API_ENDPOINT)
    )
}

/// A resource whose creation takes 120 s, once the subnet exists.
const SLOW_AFTER_THE_SUBNET: &str = "resource \"terraform_data\" \"slow\" {\n  input = aws_subnet.this.id\n  \
     provisioner \"local-exec\" {\n    command = \"sleep 120\"\n  }\n}\n";

impl Job {
    /// The ARNs of what carries this runtime's tag.
    fn tagged(&self) -> Vec<String> {
        let filter = format!("Key={RUNTIME_ID_TAG},Values={}", self.runtime_id);
        let listing =
            self.moto.aws(&["resourcegroupstaggingapi", "get-resources", "--tag-filters", &filter, "--output", "json"]);
        let listing: Value = serde_json::from_str(&listing).expect("aws prints JSON");
        let mut arns: Vec<String> = listing["ResourceTagMappingList"]
            .as_array()
            .unwrap()
            .iter()
            .map(|mapping| mapping["ResourceARN"].as_str().unwrap().to_owned())
            .collect();
        arns.sort();
        arns
    }

    /// Creates a volume outside Terraform that carries this runtime's tag (a kind the runner does not delete)
    /// and returns its id.
    fn create_untracked_volume(&self) -> String {
        let tags = format!("ResourceType=volume,Tags=[{{Key={RUNTIME_ID_TAG},Value={}}}]", self.runtime_id);
        let zone = format!("{REGION}a");
        let created = self.moto.aws(&[
            "ec2",
            "create-volume",
            "--availability-zone",
            &zone,
            "--size",
            "1",
            "--tag-specifications",
            &tags,
            "--output",
            "json",
        ]);
        let created: Value = serde_json::from_str(&created).expect("aws prints JSON");
        created["VolumeId"].as_str().expect("a volume id").to_owned()
    }
}

impl Outcome {
    /// What a destroy that found leftovers reports.
    fn leftovers(&self) -> Leftovers {
        assert_eq!(self.status.code(), Some(EXIT_LEFTOVERS), "{}", self.output);
        serde_json::from_str(&self.termination_message).unwrap_or_else(|error| {
            panic!("the termination message is no Leftovers ({error}): {}", self.termination_message)
        })
    }
}

/// An apply killed (runner and Terraform at once) after it created the VPC and the subnet, before it saved any
/// state: the retried apply creates its own and reports both as orphans; the deprovisioning destroys the state,
/// finds the orphans by their tag, deletes them (the subnet first), reports them, and removes the bucket.
#[tokio::test]
async fn what_a_killed_apply_created_before_saving_its_state_is_recorded_by_the_next_apply_and_deleted_by_the_deprovisioning()
 {
    let job = Job::new().await;
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    job.write_config("apply", "vanilla_kubeadm", &tagged_network_config(&job, SLOW_AFTER_THE_SUBNET));
    let mut command = job.command("apply");
    command.envs(RunIdentity::new(&job, "killed").env()).process_group(0);
    let (mut child, _, readers) = start_until(command, "terraform_data.slow: Creating...").await;
    // SAFETY: kill(2) on the process group of the child we started; no memory is involved.
    unsafe { libc::kill(-(child.id().unwrap() as libc::pid_t), libc::SIGKILL) };
    child.wait().await.unwrap();
    for reader in readers {
        reader.await.unwrap();
    }
    let created = job.tagged();
    assert_eq!(created.len(), 2, "the VPC and the subnet exist: {created:?}");
    let state = job.json_object("terraform.tfstate");
    let known = state.as_ref().and_then(|state| state["resources"].as_array()).map_or(0, Vec::len);
    assert_eq!(known, 0, "no state knows them: {state:?}");

    // Its holder is gone (no pod, no Job), so its lock is taken over.
    job.write_config("apply", "vanilla_kubeadm", &tagged_network_config(&job, ""));
    let retried = job.run_with("apply", &RunIdentity::new(&job, "retry").env()).await.assert_success();
    assert_eq!((retried.add, &retried.orphans), (2, &created), "the retry builds its own and names the first run's");
    assert_eq!(job.tagged().len(), 4);

    job.write_config("destroy", "vanilla_kubeadm", &tagged_network_config(&job, ""));
    let destroyed = job.run_with("destroy", &RunIdentity::new(&job, "deprovision").env()).await.assert_report();
    assert_eq!((destroyed.plan.destroy, &destroyed.plan.swept), (2, &created), "the orphans are swept");
    assert!(job.tagged().is_empty(), "nothing carries the runtime's tag");
    assert!(!job.bucket_exists(), "nothing is left: the state bucket goes too");
}

/// A resource of a kind the runner does not delete (a volume) fails the deprovisioning naming it, after the VPC
/// and the subnet the state knew were destroyed; the state bucket stays. Once the volume is gone, the
/// deprovisioning repeated finishes and removes the bucket.
#[tokio::test]
async fn a_destroy_names_what_it_does_not_delete_and_keeps_the_bucket_until_it_is_gone() {
    let job = Job::new().await;
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    job.write_config("apply", "vanilla_kubeadm", &tagged_network_config(&job, ""));
    assert_eq!(job.run("apply").await.assert_success().add, 2);
    // Beside the kubeconfig, the apply published what its state holds in the cloud (all a forced deprovisioning
    // can later list).
    let mut inventory = job.published_resources().await;
    inventory.sort();
    assert_eq!(inventory.len(), 2, "{inventory:?}");
    assert!(
        inventory[0].starts_with("aws_subnet.this arn:aws:ec2:") && inventory[0].contains(":subnet/subnet-"),
        "{inventory:?}"
    );
    assert!(
        inventory[1].starts_with("aws_vpc.this arn:aws:ec2:") && inventory[1].contains(":vpc/vpc-"),
        "{inventory:?}"
    );
    let volume = job.create_untracked_volume();

    job.write_config("destroy", "vanilla_kubeadm", &tagged_network_config(&job, ""));
    let outcome = job.run("destroy").await;
    let leftovers = outcome.leftovers();
    assert_eq!(leftovers.resources.len(), 1, "only the volume is left: {leftovers:?}");
    assert!(leftovers.resources[0].ends_with(&format!(":volume/{volume}")), "{leftovers:?}");
    assert!(leftovers.message.contains(&leftovers.resources[0]), "{leftovers:?}");
    assert!(job.bucket_exists(), "the state bucket stays while anything of the runtime is left");

    job.moto.aws(&["ec2", "delete-volume", "--volume-id", &volume]);
    assert!(job.run("destroy").await.assert_report().plan.swept.is_empty());
    assert!(!job.bucket_exists(), "nothing is left: the state bucket goes too");
}
