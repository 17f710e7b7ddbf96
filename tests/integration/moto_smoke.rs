//! The AWS test tooling works: moto's server starts and the venv's AWS CLI talks to it (SSM and S3).

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
