//! Command-line flags.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::error::Error;

/// Kubelet stand-in for the local test bed: keeps a Node Ready, reports the
/// status of the bed's pods, projects their ConfigMap volumes with the
/// kubelet's timing and layout, and runs their sidecars as local processes.
#[derive(Debug, Parser)]
#[command(name = "kubelet-standin", version)]
pub struct Args {
    /// Admin kubeconfig of the test bed's apiserver (deliberately not $KUBECONFIG,
    /// so a developer's real cluster is never touched).
    #[arg(long, default_value = ".testbed/kubeconfig")]
    pub kubeconfig: PathBuf,

    /// The bed's description of local pods (schema in e2e/README.md).
    #[arg(long, default_value = ".testbed/standin/pods.json")]
    pub pods_file: PathBuf,

    /// Periodic pod sync (the kubelet's syncFrequency), e.g. 60s, 1m, 500ms.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub sync_period: Duration,

    /// Extra random delay per pod sync, as a fraction of --sync-period (0.5 = up to 50 %).
    #[arg(long, default_value_t = 0.5)]
    pub jitter: f64,

    /// Name of the Node object the pods are bound to.
    #[arg(long, default_value = "testbed-node")]
    pub node_name: String,

    /// The node's address (also the pods' hostIP).
    #[arg(long, default_value = "127.0.0.1")]
    pub node_ip: Ipv4Addr,

    /// IMAGE=PATH: the local binary standing for an image's command[0]; repeatable.
    #[arg(long = "image-bin", value_name = "IMAGE=PATH")]
    pub image_bins: Vec<String>,

    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

impl Args {
    /// `--image-bin` values as a map; paths must be absolute.
    pub fn image_map(&self) -> Result<BTreeMap<String, PathBuf>, Error> {
        self.image_bins
            .iter()
            .map(|value| {
                let invalid = || Error::ImageBinFlag {
                    value: value.clone(),
                };
                let (image, path) = value.split_once('=').ok_or_else(invalid)?;
                let path = PathBuf::from(path);
                if image.is_empty() || !path.is_absolute() {
                    return Err(invalid());
                }
                Ok((image.to_string(), path))
            })
            .collect()
    }

    pub fn validate(&self) -> Result<(), Error> {
        if !self.jitter.is_finite() || self.jitter < 0.0 {
            return Err(Error::Jitter { value: self.jitter });
        }
        self.image_map().map(|_| ())
    }
}

/// `500ms`, `60s`, `1m`, or a bare number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 500ms, 60s or 1m"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        _ => return Err(format!("unknown unit {unit:?} in {text:?}; use ms, s or m")),
    };
    if !seconds.is_finite() || seconds <= 0.0 {
        return Err(format!("{text:?} must be positive"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("60s").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("3h").is_err());
    }

    #[test]
    fn image_map_requires_image_equals_absolute_path() {
        let args = Args::parse_from([
            "kubelet-standin",
            "--image-bin",
            "ghcr.io/x/op:dev=/t/release/op",
        ]);
        let map = args.image_map().unwrap();
        assert_eq!(map["ghcr.io/x/op:dev"], PathBuf::from("/t/release/op"));
        let bad = Args::parse_from(["kubelet-standin", "--image-bin", "img=relative/bin"]);
        assert!(matches!(bad.validate(), Err(Error::ImageBinFlag { .. })));
    }

    #[test]
    fn defaults_match_the_kubelet() {
        let args = Args::parse_from(["kubelet-standin"]);
        assert_eq!(args.sync_period, Duration::from_secs(60));
        assert_eq!(args.jitter, 0.5);
        assert_eq!(args.node_name, "testbed-node");
    }
}
