//! What a deprovisioning leaves in the cloud, with the real AWS provider on moto: every resource the
//! configuration creates carries the runtime's tag (the provider's `default_tags`, as the rendered modules set
//! it), and a destroy lists, through the Resource Groups Tagging API, what still carries it once the state is gone.

use runner_contract::failure::{EXIT_LEFTOVERS, Leftovers, RUNTIME_ID_TAG};

use super::*;

/// A VPC and a subnet, tagged with the runtime's id by the provider, and the vanilla outputs.
fn tagged_network_config(job: &Job) -> String {
    format!(
        "provider \"aws\" {{\n  region = \"{REGION}\"\n  default_tags {{\n    tags = {{ \"{RUNTIME_ID_TAG}\" = \"{}\" }}\n  }}\n}}\n\n\
         resource \"aws_vpc\" \"this\" {{\n  cidr_block = \"10.0.0.0/16\"\n}}\n\n\
         resource \"aws_subnet\" \"this\" {{\n  vpc_id     = aws_vpc.this.id\n  cidr_block = \"10.0.1.0/24\"\n}}\n\n{}",
        job.runtime_id,
        vanilla_outputs(&job.kubeconfig_parameter(), API_ENDPOINT)
    )
}

impl Job {
    /// Creates a VPC outside Terraform that carries this runtime's tag (as one created by a run killed before it
    /// saved its state would) and returns its id.
    fn create_untracked_vpc(&self) -> String {
        let tags = format!("ResourceType=vpc,Tags=[{{Key={RUNTIME_ID_TAG},Value={}}}]", self.runtime_id);
        let created = self.moto.aws(&[
            "ec2",
            "create-vpc",
            "--cidr-block",
            "10.9.0.0/16",
            "--tag-specifications",
            &tags,
            "--output",
            "json",
        ]);
        let created: Value = serde_json::from_str(&created).expect("aws prints JSON");
        created["Vpc"]["VpcId"].as_str().expect("a VPC id").to_owned()
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

/// A destroy removes what its state knows, then finds the VPC no state knows (it carries the runtime's tag) and
/// fails naming it, keeping the state bucket; once the VPC is gone, the deprovisioning repeated finishes and
/// removes the bucket.
#[tokio::test]
async fn a_destroy_names_what_still_carries_the_runtimes_tag_and_keeps_the_bucket_until_it_is_gone() {
    let job = Job::new().await;
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    job.write_config("apply", "vanilla_kubeadm", &tagged_network_config(&job));
    assert_eq!(job.run("apply").await.assert_success().add, 2);
    let untracked = job.create_untracked_vpc();

    job.write_config("destroy", "vanilla_kubeadm", &tagged_network_config(&job));
    let outcome = job.run("destroy").await;
    let leftovers = outcome.leftovers();
    assert_eq!(leftovers.resources.len(), 1, "only the VPC no state knows is left: {leftovers:?}");
    assert!(leftovers.resources[0].ends_with(&format!(":vpc/{untracked}")), "{leftovers:?}");
    assert!(leftovers.message.contains(&leftovers.resources[0]), "{leftovers:?}");
    assert!(job.bucket_exists(), "the state bucket stays while anything of the runtime is left");

    job.moto.aws(&["ec2", "delete-vpc", "--vpc-id", &untracked]);
    job.run("destroy").await.assert_success();
    assert!(!job.bucket_exists(), "nothing is left: the state bucket goes too");
}
