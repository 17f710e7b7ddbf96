//! What a deprovisioning leaves in the cloud, with the real AWS provider on moto: every resource the
//! configuration creates carries the runtime's tag (the provider's `default_tags`, as the rendered modules set
//! it) and is recorded in the state bucket as the apply creates it. Once the state is destroyed, a destroy lists
//! what still carries the tag (Resource Groups Tagging API), deletes the kinds the modules create that a run
//! recorded creating, fails naming any other such, and names what no run created (foreign) without touching it.

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

/// A volume once the subnet exists (a kind the runner does not delete), then a resource whose creation takes
/// 120 s.
const VOLUME_THEN_SLOW: &str = "resource \"aws_ebs_volume\" \"data\" {\n  availability_zone = \"eu-west-1a\"\n  \
     size = 1\n  depends_on = [aws_subnet.this]\n}\n\n\
     resource \"terraform_data\" \"slow\" {\n  input = aws_ebs_volume.data.id\n  \
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

    /// Creates a volume outside Terraform that carries this runtime's tag and returns its id.
    fn create_foreign_volume(&self) -> String {
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

    /// Starts an instance outside Terraform (another runtime's, say) and tags it with this runtime's id, as a
    /// cluster that could tag would; returns its id.
    fn start_instance_tagged_as_ours(&self) -> String {
        let started = self.moto.aws(&[
            "ec2",
            "run-instances",
            "--image-id",
            "ami-12c6146b",
            "--instance-type",
            "t3.micro",
            "--count",
            "1",
            "--output",
            "json",
        ]);
        let started: Value = serde_json::from_str(&started).expect("aws prints JSON");
        let id = started["Instances"][0]["InstanceId"].as_str().expect("an instance id").to_owned();
        let tag = format!("Key={RUNTIME_ID_TAG},Value={}", self.runtime_id);
        self.moto.aws(&["ec2", "create-tags", "--resources", &id, "--tags", &tag]);
        id
    }

    /// The state of instance `id` (`running`, `terminated`).
    fn instance_state(&self, id: &str) -> String {
        let described = self.moto.aws(&["ec2", "describe-instances", "--instance-ids", id, "--output", "json"]);
        let described: Value = serde_json::from_str(&described).expect("aws prints JSON");
        described["Reservations"][0]["Instances"][0]["State"]["Name"].as_str().expect("a state").to_owned()
    }

    /// The ids of what the runs recorded creating, by type.
    fn recorded(&self) -> Vec<(String, String)> {
        let record = self.json_object("terraform.tfstate.created.json").expect("the record of what runs created");
        let mut recorded: Vec<(String, String)> = record["created"]
            .as_array()
            .unwrap()
            .iter()
            .map(|created| (created["type"].as_str().unwrap().to_owned(), created["id"].as_str().unwrap().to_owned()))
            .collect();
        recorded.sort();
        recorded
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

/// An apply killed (runner and Terraform at once) after it created the VPC, the subnet and a volume, before it
/// saved any state: each was recorded as it was created. The retried apply creates its own VPC and subnet and
/// reports the first run's three as orphans; the deprovisioning destroys the state, deletes the recorded VPC and
/// subnet it finds by their tag (the subnet first), and fails naming the volume, a kind it does not delete; the
/// bucket stays. Once the volume is gone, the deprovisioning repeated removes the bucket.
#[tokio::test]
async fn what_a_killed_apply_created_before_saving_its_state_is_recorded_and_deleted_by_the_deprovisioning() {
    let job = Job::new().await;
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    job.write_config("apply", "vanilla_kubeadm", &tagged_network_config(&job, VOLUME_THEN_SLOW));
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
    assert_eq!(created.len(), 3, "the VPC, the subnet and the volume exist: {created:?}");
    let state = job.json_object("terraform.tfstate");
    let known = state.as_ref().and_then(|state| state["resources"].as_array()).map_or(0, Vec::len);
    assert_eq!(known, 0, "no state knows them: {state:?}");
    let recorded = job.recorded();
    let kinds: Vec<&str> = recorded.iter().map(|(kind, _)| kind.as_str()).collect();
    assert_eq!(kinds, ["aws_ebs_volume", "aws_subnet", "aws_vpc"], "each was recorded as it was created");

    // Its holder is gone (no pod, no Job), so its lock is taken over.
    job.write_config("apply", "vanilla_kubeadm", &tagged_network_config(&job, ""));
    let retried = job.run_with("apply", &RunIdentity::new(&job, "retry").env()).await.assert_success();
    assert_eq!((retried.add, &retried.orphans), (2, &created), "the retry builds its own and names the first run's");
    assert!(retried.foreign.is_empty(), "{:?}", retried.foreign);
    assert_eq!(job.tagged().len(), 5);

    job.write_config("destroy", "vanilla_kubeadm", &tagged_network_config(&job, ""));
    let outcome = job.run_with("destroy", &RunIdentity::new(&job, "deprovision").env()).await;
    let leftovers = outcome.leftovers();
    let volume = created.iter().find(|arn| arn.contains(":volume/")).unwrap();
    assert_eq!(leftovers.resources, std::slice::from_ref(volume), "only the recorded volume is left: {leftovers:?}");
    assert!(leftovers.message.contains(volume.as_str()), "{leftovers:?}");
    assert_eq!(job.tagged(), std::slice::from_ref(volume), "the recorded VPC and subnet are deleted");
    assert!(job.bucket_exists(), "the state bucket stays while anything a run created is left");

    let volume_id = volume.rsplit('/').next().unwrap();
    job.moto.aws(&["ec2", "delete-volume", "--volume-id", volume_id]);
    let destroyed = job.run_with("destroy", &RunIdentity::new(&job, "again").env()).await.assert_report();
    assert!(destroyed.plan.swept.is_empty() && destroyed.plan.foreign.is_empty(), "{:?}", destroyed.plan);
    assert!(job.tagged().is_empty(), "nothing carries the runtime's tag");
    assert!(!job.bucket_exists(), "nothing is left: the state bucket goes too");
}

/// What carries the runtime's tag though no run of it created it (another runtime's instance tagged with this
/// runtime's id, a volume made by hand) is reported as foreign by the apply and by the deprovisioning, and never
/// touched: the instance still runs after the deprovisioning, which succeeds and removes the bucket.
#[tokio::test]
async fn a_deprovisioning_never_deletes_what_a_run_of_the_runtime_did_not_create() {
    let job = Job::new().await;
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    let victim = job.start_instance_tagged_as_ours();
    let volume = job.create_foreign_volume();
    job.write_config("apply", "vanilla_kubeadm", &tagged_network_config(&job, ""));
    let applied = job.run("apply").await.assert_success();
    assert_eq!(applied.add, 2);
    assert!(applied.orphans.is_empty(), "{:?}", applied.orphans);
    let foreign = |names: &[String]| {
        let instance = names.iter().any(|arn| arn.ends_with(&format!(":instance/{victim}")));
        let volume = names.iter().any(|arn| arn.ends_with(&format!(":volume/{volume}")));
        names.len() == 2 && instance && volume
    };
    assert!(foreign(&applied.foreign), "the apply names both as foreign: {:?}", applied.foreign);
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

    job.write_config("destroy", "vanilla_kubeadm", &tagged_network_config(&job, ""));
    let destroyed = job.run("destroy").await.assert_report();
    assert_eq!(destroyed.plan.destroy, 2);
    assert!(destroyed.plan.swept.is_empty(), "nothing is swept: {:?}", destroyed.plan.swept);
    assert!(foreign(&destroyed.plan.foreign), "both are named as foreign: {:?}", destroyed.plan.foreign);
    assert_eq!(job.instance_state(&victim), "running", "the foreign instance is not touched");
    assert_eq!(job.tagged().len(), 2, "the foreign instance and volume still carry the tag");
    assert!(!job.bucket_exists(), "what no run created does not hold the state bucket back");
}
