//! Transient cloud failures (throttling that outlasted the provider's own retries, a dependency that is still
//! going away) tried again within the run: after a jittered, growing pause the runner plans again from the state
//! as it is now and applies that plan. The Job's deadline (the operation's) bounds it all.

use std::time::Duration;

use process_support::backoff::Backoff;

use crate::plans::{EVERYTHING, apply_plan, plan, plan_destroy, refuse_destructive};
use crate::terraform::{RecordCreation, Signals, Terraform};
use crate::{Error, Result, Runner};

/// What a retry plans again.
pub(crate) enum Replan<'a> {
    /// The configuration, checked like the first plan; what it creates recorded.
    Apply(&'a dyn RecordCreation),
    /// The destruction of everything the state still holds.
    Destroy,
}

impl Runner {
    /// Applies the saved plan; after a transient failure, plans again (see [`Replan`]) and applies that.
    pub(crate) async fn apply_retrying_transient(
        &self,
        terraform: &Terraform,
        lock_timeout: &str,
        signals: &mut Signals,
        replan: Replan<'_>,
    ) -> Result<()> {
        let mut retrying = Retrying::new(self.settings.transient_retries);
        let recorder = match replan {
            Replan::Apply(recorder) => Some(recorder),
            Replan::Destroy => None,
        };
        loop {
            let Err(error) = apply_plan(terraform, lock_timeout, signals, recorder).await else {
                return Ok(());
            };
            retrying.pause_after(error, signals).await?;
            match replan {
                Replan::Apply(_) => {
                    let protected = &self.settings.protected_resources;
                    refuse_destructive(&plan(terraform, EVERYTHING, lock_timeout, protected, signals).await?)?;
                }
                Replan::Destroy => {
                    plan_destroy(terraform, lock_timeout, signals).await?;
                }
            }
        }
    }
}

/// How often and after how long a transient failure is tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransientRetries {
    /// Retries after the first failure; 0 turns them off.
    pub retries: u32,
    /// The first pause; each next one doubles (jittered).
    pub first_pause: Duration,
}

/// The retries of one run.
pub(crate) struct Retrying {
    limits: TransientRetries,
    backoff: Backoff,
}

impl Retrying {
    pub(crate) fn new(limits: TransientRetries) -> Self {
        Retrying { limits, backoff: Backoff::new(limits.first_pause, limits.first_pause.saturating_mul(16)) }
    }

    /// After `error`: `Ok(())` once the pause before the next try is over, or `error` back when it is not
    /// transient, the retries are spent, or a signal stops the run meanwhile.
    pub(crate) async fn pause_after(&mut self, error: Error, signals: &mut Signals) -> Result<()> {
        let class = match &error {
            Error::Terraform { cloud: Some(cloud), .. } if cloud.class.is_transient() => cloud.class,
            _ => return Err(error),
        };
        if self.backoff.attempts() >= self.limits.retries {
            return Err(error);
        }
        let pause = self.backoff.next_delay();
        tracing::warn!(
            class = class.as_str(),
            retry = self.backoff.attempts(),
            of = self.limits.retries,
            pause_seconds = pause.as_secs_f32(),
            error = %error,
            "a transient cloud failure: planning and applying again after a pause"
        );
        sleep_unless_stopped(pause, signals).await
    }

    /// Pauses before trying again what is still in the cloud's way (see [`crate::leftovers`]): `Ok(false)` when
    /// the retries are spent.
    pub(crate) async fn pause_while_in_use(&mut self, left: usize, signals: &mut Signals) -> Result<bool> {
        if self.backoff.attempts() >= self.limits.retries {
            return Ok(false);
        }
        let pause = self.backoff.next_delay();
        tracing::info!(
            left,
            pause_seconds = pause.as_secs_f32(),
            "leftovers still in use: deleting again after a pause"
        );
        sleep_unless_stopped(pause, signals).await.map(|()| true)
    }
}

async fn sleep_unless_stopped(pause: Duration, signals: &mut Signals) -> Result<()> {
    tokio::select! {
        () = tokio::time::sleep(pause) => Ok(()),
        () = signals.recv() => Err(Error::Interrupted),
    }
}
