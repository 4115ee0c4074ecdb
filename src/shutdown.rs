//! One shutdown signal shared by every long-running task of a process.
//!
//! SIGTERM (what the kubelet sends on pod deletion) and SIGINT both trigger it; tasks wait on
//! [`Shutdown::wait`] to finish their current step, release what they hold (the leader lease)
//! and return, so the process exits inside the pod's termination grace period.

use std::sync::Arc;

use tokio::sync::watch;

/// A cloneable handle on the process-wide shutdown signal.
#[derive(Clone, Debug)]
pub struct Shutdown {
    sender: Arc<watch::Sender<bool>>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    /// A signal that only [`Shutdown::trigger`] fires (tests, embedding).
    pub fn new() -> Self {
        let (sender, _) = watch::channel(false);
        Self {
            sender: Arc::new(sender),
        }
    }

    /// A signal that also fires on SIGTERM or SIGINT. Must be called inside a Tokio runtime.
    pub fn on_signals() -> std::io::Result<Self> {
        let shutdown = Self::new();
        let mut sigterm =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
        let handle = shutdown.clone();
        tokio::spawn(async move {
            let name = tokio::select! {
                _ = sigterm.recv() => "SIGTERM",
                _ = sigint.recv() => "SIGINT",
            };
            tracing::info!(signal = name, "shutdown requested");
            handle.trigger();
        });
        Ok(shutdown)
    }

    /// Fires the signal; every waiter wakes up. Idempotent.
    pub fn trigger(&self) {
        self.sender.send_replace(true);
    }

    pub fn is_triggered(&self) -> bool {
        *self.sender.borrow()
    }

    /// Resolves once the signal has fired (immediately if it already has).
    pub async fn wait(&self) {
        let mut receiver = self.sender.subscribe();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = receiver.wait_for(|fired| *fired).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    // Paused time: the 20 ms sleep returns once the waiter is idle, the timeouts are exact.
    #[tokio::test(start_paused = true)]
    async fn waiters_wake_on_trigger_and_late_waiters_return_at_once() {
        let shutdown = Shutdown::new();
        let waiter = tokio::spawn({
            let s = shutdown.clone();
            async move { s.wait().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        assert!(!shutdown.is_triggered());

        shutdown.trigger();
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("waiter woke up")
            .expect("waiter did not panic");
        assert!(shutdown.is_triggered());
        tokio::time::timeout(Duration::from_millis(100), shutdown.wait())
            .await
            .expect("late waiter returns immediately");
    }
}
