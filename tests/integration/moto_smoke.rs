//! The AWS test tooling works: moto's server starts, the venv's AWS CLI talks to it (SSM and S3), and the shim keeps
//! EKS creation idempotent as AWS does.

use test_support::moto::MotoServer;

#[tokio::test]
async fn aws_cli_round_trips_through_moto() {
    let moto = MotoServer::start().await;

    moto.aws(&["ssm", "put-parameter", "--name", "/smoke/greeting", "--type", "SecureString", "--value", "hello"]);
    let value = moto.aws(&[
        "ssm",
        "get-parameter",
        "--name",
        "/smoke/greeting",
        "--with-decryption",
        "--query",
        "Parameter.Value",
        "--output",
        "text",
    ]);
    assert_eq!(value.trim(), "hello");

    moto.aws(&[
        "s3api",
        "create-bucket",
        "--bucket",
        "smoke",
        "--create-bucket-configuration",
        "LocationConstraint=eu-west-1",
    ]);
    let listing = moto.aws(&["s3api", "list-buckets", "--query", "Buckets[].Name", "--output", "text"]);
    assert_eq!(listing.trim(), "smoke");
}

#[tokio::test]
async fn dropping_the_server_stops_it() {
    let moto = MotoServer::start().await;
    let endpoint = moto.endpoint();
    drop(moto);
    let answer = std::net::TcpStream::connect(endpoint.trim_start_matches("http://"));
    assert!(answer.is_err(), "moto still answers on {endpoint} after drop");
}

/// The shim's fix 9: as on AWS, an EKS creation repeated with its `clientRequestToken` (the SDK's retry of a
/// request whose answer it lost) is answered with what it created; another token is refused.
#[tokio::test]
async fn an_eks_creation_repeated_with_its_token_is_answered_with_what_it_created() {
    let moto = MotoServer::start().await;
    let role = "arn:aws:iam::123456789012:role/eks";
    let create_cluster = ["eks", "create-cluster", "--name", "retried", "--role-arn", role];
    let vpc = ["--resources-vpc-config", "subnetIds=subnet-1,subnet-2"];
    let cluster = |token: &str| {
        let mut args = create_cluster.to_vec();
        args.extend(vpc);
        args.extend(["--client-request-token", token, "--query", "cluster.arn", "--output", "text"]);
        moto.aws(&args)
    };
    assert_eq!(cluster("cluster-1"), cluster("cluster-1"));

    let create_nodegroup = |token: &str| {
        moto.aws_command()
            .args(["eks", "create-nodegroup", "--cluster-name", "retried", "--nodegroup-name", "workers"])
            .args(["--node-role", role, "--subnets", "subnet-1", "--client-request-token", token])
            .args(["--query", "nodegroup.nodegroupArn", "--output", "text"])
            .output()
            .unwrap()
    };
    let first = create_nodegroup("workers-1");
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let retried = create_nodegroup("workers-1");
    assert!(retried.status.success(), "{}", String::from_utf8_lossy(&retried.stderr));
    assert_eq!(retried.stdout, first.stdout);
    let other = create_nodegroup("workers-2");
    assert!(!other.status.success());
    assert!(String::from_utf8_lossy(&other.stderr).contains("ResourceInUseException"), "{other:?}");
}
