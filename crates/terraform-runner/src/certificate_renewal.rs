//! A vanilla control plane's certificate renewal: the run publishes its request where the nodes' timers look,
//! after checking that every node's bootstrap takes renewals (one older than them would never answer), and waits
//! until the last node has renewed; node 0 has then published the renewed admin kubeconfig, which the run
//! publishes as any apply does.

use runner_contract::manifest::{CertificateRenewal, NodesPath};

use crate::aws::AwsSession;
use crate::settings::RunnerSettings;
use crate::terraform::{Signals, Terraform};
use crate::{Error, Result, output};

pub(crate) async fn renew_certificates(
    aws: &AwsSession,
    terraform: &Terraform,
    renewal: &CertificateRenewal,
    settings: &RunnerSettings,
    signals: &mut Signals,
) -> Result<()> {
    let outputs = terraform.outputs().await?;
    let kubeconfig_parameter = output(&outputs, "kubeconfig_ssm_parameter")?;
    let nodes = NodesPath::of_kubeconfig_parameter(kubeconfig_parameter).ok_or_else(|| {
        Error::Outputs(format!("kubeconfig_ssm_parameter {kubeconfig_parameter:?} is not an SSM path"))
    })?;
    for node in 0..=renewal.last_node {
        if !aws.parameter_exists(&nodes.renews_certificates_marker(node)).await? {
            return Err(Error::CannotRenew { node });
        }
    }
    aws.put_parameter(&nodes.renewal_request(), &renewal.request).await?;
    tracing::info!(request = renewal.request, "asked the control plane to renew its certificates");
    let marker = nodes.renewed_marker(renewal.last_node, &renewal.request);
    let what = "that its control plane renewed its certificates";
    let (interval, timeout) = (settings.kubeconfig_poll_interval, settings.control_plane_upgrade_timeout);
    aws.wait_for_parameter(&marker, what, interval, timeout, signals).await?;
    tracing::info!(request = renewal.request, "the control plane renewed its certificates");
    Ok(())
}
