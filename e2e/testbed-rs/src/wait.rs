//! Polling with a deadline, for conditions on real components.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::error::Error;

/// Calls `probe` every `poll` until it returns `Some`, or fails with [`Error::Timeout`] naming
/// `what` after `timeout`. The probe runs at least once, even with a zero timeout.
pub fn wait_until<T>(
    what: &str,
    timeout: Duration,
    poll: Duration,
    mut probe: impl FnMut() -> Option<T>,
) -> Result<T, Error> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe() {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: what.to_string(),
                timeout,
            });
        }
        std::thread::sleep(poll);
    }
}

/// [`wait_until`] for async probes (sleeps with tokio).
pub async fn wait_until_async<T, F, Fut>(
    what: &str,
    timeout: Duration,
    poll: Duration,
    mut probe: F,
) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: what.to_string(),
                timeout,
            });
        }
        tokio::time::sleep(poll).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_the_first_some_and_times_out_with_the_description() {
        let mut calls = 0;
        let got = wait_until(
            "three calls",
            Duration::from_secs(5),
            Duration::from_millis(1),
            || {
                calls += 1;
                (calls == 3).then_some(calls)
            },
        );
        assert_eq!(got.unwrap(), 3);
        let err = wait_until(
            "never",
            Duration::from_millis(20),
            Duration::from_millis(5),
            || None::<()>,
        );
        assert!(err.unwrap_err().to_string().contains("waiting for never"));
    }

    #[tokio::test]
    async fn async_variant_probes_at_least_once() {
        let got = wait_until_async("now", Duration::ZERO, Duration::from_millis(1), || async {
            Some(1)
        })
        .await;
        assert_eq!(got.unwrap(), 1);
    }
}
