//! The least permissions the operator page documents (docs/operator/permissions-aws.md; the policies are the files
//! of docs/operator/permissions/, which the page links) are enough for the real runner with the real modules: a
//! moto of its own authorizes every request (moto's IAM enforcement, `INITIAL_NO_AUTH_ACTION_COUNT`), the runner
//! runs as an IAM user holding only the documented policy, and a provisioning and a deprovisioning succeed; the
//! same policy without one of its actions fails, naming it.
//!
//! What moto (5.2.5) can tell, and what it cannot:
//! - It checks the action of every request of EC2, Elastic Load Balancing, Auto Scaling, EKS, IAM, SSM, S3 and the
//!   Resource Groups Tagging API that the runner, OpenTofu's S3 backend and the AWS provider make, after checking
//!   its signature. An action the policy lacks fails the run: the policies list every action of these calls.
//! - It names a few actions otherwise than IAM: by the signing name of its API, `tagging:GetResources` for
//!   `tag:GetResources`; HeadBucket `s3:HeadBucket` where AWS checks `s3:ListBucket` (the test adds moto's names
//!   beside IAM's); S3's PutBucketEncryption and PutPublicAccessBlock `s3:CreateBucket` (so the policies'
//!   `s3:PutEncryptionConfiguration` and `s3:PutBucketPublicAccessBlock`, AWS's names, are unchecked here).
//! - It checks resources only for S3 (bucket and object ARNs: the state bucket's name patterns are checked, with
//!   DeleteObjects checked against the bucket rather than each object) and for IAM actions on an existing role; for
//!   every other service it asks about `*`, so the test widens every other statement's `Resource` to `*`.
//! - It evaluates no condition but `StringEquals` on values a request brings (none of these): every `Condition`
//!   (the tag conditions, `iam:PassedToService`, `ec2:CreateAction`, `iam:PolicyARN`) counts as met. The policies
//!   hold no Deny statement, which moto would then apply unconditionally.
//! - It never asks for what AWS checks besides the call itself: `iam:PassRole` (EKS's roles, the nodes' instance
//!   profiles), `ec2:CreateTags` for tags given on creation, `iam:TagRole` and `eks:TagResource` for the same,
//!   `iam:CreateServiceLinkedRole` on an account's first cluster. Those are in the policies from AWS's
//!   documentation and unchecked here.
//! - The day-two operations (hibernation, wake-up, upgrade: `eks:Update*`, `autoscaling:StartInstanceRefresh`,
//!   `ec2:StopInstances`, ...) are listed from the modules and not run here.
//! - It answers a refusal of a REST API (EKS) in XML, which the SDK cannot decode: such a failure names the call
//!   and a 403, not the action; the refused actions shown here are of EC2 (query APIs name it).
//! - A vanilla cluster's nodes never run on moto, so its apply ends waiting for the kubeconfig they would publish:
//!   everything before (the state bucket, every resource of the modules) was allowed, and the destroy runs whole.

use std::path::Path;

use provisioner::domain::state_bucket::state_bucket_name;
use provisioner::domain::{Runtime, Topology};
use provisioner::render::RunAction as RenderedAction;

use super::*;

/// The policies the operator pages show.
const POLICIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operator/permissions");
const MODULES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/resources/terraform/modules");

/// Actions moto names otherwise than IAM: (IAM's, moto's).
const MOTOS_NAMES: [(&str, &str); 2] =
    [("tag:GetResources", "tagging:GetResources"), ("s3:ListBucket", "s3:HeadBucket")];

fn documented_policy(file: &str) -> Value {
    let path = Path::new(POLICIES).join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// `policy` as moto can evaluate it (see the module documentation), without `removed` (an action).
fn as_moto_evaluates(policy: &Value, removed: Option<&str>) -> String {
    let mut policy = policy.clone();
    for statement in policy["Statement"].as_array_mut().expect("a list of statements") {
        let actions = match &statement["Action"] {
            Value::String(action) => vec![action.clone()],
            Value::Array(actions) => actions.iter().map(|action| action.as_str().unwrap().to_owned()).collect(),
            other => panic!("an Action of strings: {other}"),
        };
        let mut actions: Vec<String> = actions.into_iter().filter(|action| Some(action.as_str()) != removed).collect();
        for (aws, moto) in MOTOS_NAMES {
            if actions.iter().any(|action| action == aws) {
                actions.push(moto.to_owned());
            }
        }
        if !actions.iter().all(|action| action.starts_with("s3:")) {
            statement["Resource"] = json!("*");
        } else if let Some(resources) = statement["Resource"].as_array_mut() {
            // DeleteObjects, checked against the bucket.
            let buckets: Vec<Value> =
                resources.iter().filter_map(|arn| Some(json!(arn.as_str()?.strip_suffix("/*")?))).collect();
            resources.extend(buckets);
        }
        statement["Action"] = json!(actions);
    }
    policy.to_string()
}

/// An IAM user of `moto` with `policy` (as a managed policy of its own) and its access key: (id, secret). Moto's
/// authorization must be off.
fn user_with_policy(moto: &MotoServer, name: &str, policy: &str) -> (String, String) {
    moto.aws(&["iam", "create-user", "--user-name", name]);
    let created: Value = serde_json::from_str(&moto.aws(&[
        "iam",
        "create-policy",
        "--policy-name",
        name,
        "--policy-document",
        policy,
        "--output",
        "json",
    ]))
    .unwrap();
    let arn = created["Policy"]["Arn"].as_str().expect("the policy's ARN");
    moto.aws(&["iam", "attach-user-policy", "--user-name", name, "--policy-arn", arn]);
    let key: Value =
        serde_json::from_str(&moto.aws(&["iam", "create-access-key", "--user-name", name, "--output", "json"]))
            .unwrap();
    let key = &key["AccessKey"];
    (key["AccessKeyId"].as_str().unwrap().to_owned(), key["SecretAccessKey"].as_str().unwrap().to_owned())
}

/// A Job for the example runtime of `topology` on a moto of its own that authorizes requests (off until the test
/// turns it on), with the repository's modules where the Job's init container clones them.
async fn authorizing_job(topology: Topology) -> (Job, Runtime) {
    let mut job = Job::new().await;
    job.moto = MotoServer::start_with_iam_authorization().await;
    let mut runtime = Runtime::example(topology);
    runtime.id = job.runtime_id;
    runtime.name = "permissions".to_owned();
    runtime.state_bucket = state_bucket_name(&runtime.cluster_config.environment, &runtime.name, runtime.id);
    job.bucket = runtime.state_bucket.clone();
    std::os::unix::fs::symlink(MODULES, job.path("modules")).unwrap();
    (job, runtime)
}

/// The configuration the worker renders for `action` on `runtime`, in the Job's ConfigMap folder.
fn write_rendered(job: &Job, runtime: &Runtime, action: RenderedAction) {
    for (name, content) in test_support::render(runtime, action).files {
        std::fs::write(job.path("config").join(name), content).unwrap();
    }
}

fn use_keys(job: &Job, (access_key_id, secret_access_key): &(String, String)) {
    job.write_credentials(&[
        ("credential_type", "aws_access_key"),
        ("aws_access_key_id", access_key_id),
        ("aws_secret_access_key", secret_access_key),
    ]);
}

/// The run failed on an action the policy lacks, as moto refuses it (and AWS would).
fn assert_refused(outcome: &Outcome, action: &str) {
    assert!(!outcome.status.success(), "the run fails without {action}:\n{}", outcome.output);
    assert!(!outcome.termination_message.is_empty(), "a failed run leaves a termination message");
    let refusal = format!("is not authorized to perform: {action}");
    assert!(outcome.output.contains(&refusal), "the run fails naming {action}:\n{}", outcome.output);
}

#[tokio::test]
async fn eks_is_provisioned_and_deprovisioned_with_the_documented_policy_only() {
    let (job, runtime) = authorizing_job(Topology::Eks).await;
    let policy = documented_policy("aws-eks.json");
    let keys = user_with_policy(&job.moto, "provisioner", &as_moto_evaluates(&policy, None));
    let trimmed = user_with_policy(&job.moto, "trimmed", &as_moto_evaluates(&policy, Some("ec2:CreateLaunchTemplate")));
    job.moto.authorize_requests(true).await;

    use_keys(&job, &keys);
    write_rendered(&job, &runtime, RenderedAction::Apply);
    job.run("apply").await.assert_success();
    write_rendered(&job, &runtime, RenderedAction::Destroy);
    job.run("destroy").await.assert_report();

    // Without one action, the provisioning fails on it.
    use_keys(&job, &trimmed);
    write_rendered(&job, &runtime, RenderedAction::Apply);
    assert_refused(&job.run("apply").await, "ec2:CreateLaunchTemplate");
}

#[tokio::test]
async fn vanilla_is_provisioned_and_deprovisioned_with_the_documented_policy_only() {
    let (job, runtime) = authorizing_job(Topology::VanillaKubeadm).await;
    let policy = documented_policy("aws-vanilla.json");
    let keys = user_with_policy(&job.moto, "provisioner", &as_moto_evaluates(&policy, None));
    let trimmed = user_with_policy(&job.moto, "trimmed", &as_moto_evaluates(&policy, Some("ec2:RunInstances")));
    job.moto.authorize_requests(true).await;

    use_keys(&job, &keys);
    write_rendered(&job, &runtime, RenderedAction::Apply);
    let short_wait = [("RUNNER_KUBECONFIG_TIMEOUT", "2s".to_owned())];
    let applied = job.run_with("apply", &short_wait).await;
    assert!(!applied.status.success(), "no node publishes a kubeconfig on moto:\n{}", applied.output);
    assert!(
        applied.termination_message.contains("did not publish its kubeconfig"),
        "the apply got as far as waiting for the nodes (which never run on moto):\n{}",
        applied.output
    );
    write_rendered(&job, &runtime, RenderedAction::Destroy);
    job.run("destroy").await.assert_report();

    use_keys(&job, &trimmed);
    write_rendered(&job, &runtime, RenderedAction::Apply);
    assert_refused(&job.run_with("apply", &short_wait).await, "ec2:RunInstances");
}
