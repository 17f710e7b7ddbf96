//! After a wake-up started a stopped control plane, the run ends only once its API server answers: until then
//! the cluster is not usable, and the operation must not say it is.

use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::terraform::Signals;
use crate::{Error, Result};

/// One request's limit: a control plane that is still booting accepts connections and answers nothing.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// A client of the cluster `kubeconfig` reaches, with its credentials and CA; and the server's URL.
pub(crate) async fn cluster_client(kubeconfig: &str) -> Result<(kube::Client, String)> {
    let parsed = Kubeconfig::from_yaml(kubeconfig)
        .map_err(|error| Error::Input(format!("the cluster's kubeconfig does not parse: {error}")))?;
    let config = kube::Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default())
        .await
        .map_err(|error| Error::Input(format!("the cluster's kubeconfig is not usable: {error}")))?;
    let server = config.cluster_url.to_string();
    Ok((kube::Client::try_from(config)?, server))
}

/// Asks the API server of `kubeconfig` for its version (with the kubeconfig's credentials and CA) every
/// `interval` until it answers, for at most `timeout`.
pub async fn wait_until_answering(
    kubeconfig: &str,
    interval: Duration,
    timeout: Duration,
    signals: &mut Signals,
) -> Result<()> {
    let (client, server) = cluster_client(kubeconfig).await?;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let last_error = match tokio::time::timeout(ATTEMPT_TIMEOUT, client.apiserver_version()).await {
            Ok(Ok(version)) => {
                tracing::info!(server, version = version.git_version, "the API server answers");
                return Ok(());
            }
            Ok(Err(error)) => error.to_string(),
            Err(_) => format!("no answer within {}", humantime::format_duration(ATTEMPT_TIMEOUT)),
        };
        if tokio::time::Instant::now() + interval > deadline {
            return Err(Error::ApiServerTimeout { server, waited: timeout, last_error });
        }
        tracing::info!(server, last_error, "waiting for the API server to answer");
        tokio::select! {
            () = tokio::time::sleep(interval) => {},
            () = signals.recv() => return Err(Error::Interrupted),
        }
    }
}
