//! `spec.kafka.bootstrapServers`: a comma-separated list of `host:port`, parsed strictly.
//!
//! A host is a DNS name, an IPv4 address or an IPv6 address in brackets; a port is 1 to 65535.
//! Nothing else: no scheme (`PLAINTEXT://`), no path, no spaces, no empty entries. The CRD
//! carries [`BOOTSTRAP_PATTERN`] (the same grammar, except that it cannot tell `999.1.1.1` from
//! a DNS name or check an IPv6 address's groups; the parser here does).

use std::net::{Ipv4Addr, Ipv6Addr};

/// RE2/`regex` pattern of a whole bootstrapServers value; the CRD's CEL rule uses it.
pub const BOOTSTRAP_PATTERN: &str = r"^((([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?))*|\[[0-9A-Fa-f:.]+\]):(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}))(,(([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?))*|\[[0-9A-Fa-f:.]+\]):(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}))*$";

/// The message of the CRD's rule and the tail of every parse error: what a valid value looks like.
pub const BOOTSTRAP_FORM: &str = "bootstrapServers must be host:port entries separated by commas, with no spaces, scheme or path (host a DNS name, an IPv4 address or an [IPv6] address; port 1-65535), for example kafka-bootstrap.kafka.svc:9092";

/// One bootstrap entry that is not `host:port`, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BootstrapError {
    #[error("spec.kafka.bootstrapServers is empty: list at least one host:port, comma-separated (for example kafka-bootstrap.kafka.svc:9092)")]
    Empty,
    #[error(
        "spec.kafka.bootstrapServers has an empty entry (at position {0}): remove the extra comma"
    )]
    EmptyEntry(usize),
    #[error("spec.kafka.bootstrapServers entry {0:?} contains whitespace: remove the spaces")]
    Whitespace(String),
    #[error("spec.kafka.bootstrapServers entry {0:?} has a scheme: write only host:port (the listener's protocol comes from spec.kafka.tls and spec.kafka.sasl)")]
    Scheme(String),
    #[error("spec.kafka.bootstrapServers entry {0:?} has no port: write host:port, for example kafka-bootstrap.kafka.svc:9092")]
    MissingPort(String),
    #[error("spec.kafka.bootstrapServers entry {entry:?} has port {port:?}: use a number between 1 and 65535 (no path, nothing after the port)")]
    BadPort { entry: String, port: String },
    #[error("spec.kafka.bootstrapServers entry {0:?} looks like an IPv6 address without brackets: write [address]:port")]
    UnbracketedIpv6(String),
    #[error("spec.kafka.bootstrapServers entry {entry:?}: host {host:?} is not a DNS name, an IPv4 address or a bracketed IPv6 address ({why})")]
    BadHost {
        entry: String,
        host: String,
        why: &'static str,
    },
}

/// Splits and checks a bootstrapServers value; returns the entries as written.
pub fn parse_bootstrap_servers(raw: &str) -> Result<Vec<String>, Vec<BootstrapError>> {
    if raw.trim().is_empty() {
        return Err(vec![BootstrapError::Empty]);
    }
    let mut errors = Vec::new();
    let mut servers = Vec::new();
    for (index, entry) in raw.split(',').enumerate() {
        match parse_entry(entry, index + 1) {
            Ok(()) => servers.push(entry.to_string()),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(servers)
    } else {
        Err(errors)
    }
}

fn parse_entry(entry: &str, position: usize) -> Result<(), BootstrapError> {
    let owned = || entry.to_string();
    if entry.is_empty() {
        return Err(BootstrapError::EmptyEntry(position));
    }
    if entry.chars().any(char::is_whitespace) {
        return Err(BootstrapError::Whitespace(owned()));
    }
    if entry.contains("://") {
        return Err(BootstrapError::Scheme(owned()));
    }
    let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
        let (address, after) = rest.split_once(']').ok_or(BootstrapError::BadHost {
            entry: owned(),
            host: entry.to_string(),
            why: "an IPv6 address needs its closing bracket",
        })?;
        address
            .parse::<Ipv6Addr>()
            .map_err(|_| BootstrapError::BadHost {
                entry: owned(),
                host: format!("[{address}]"),
                why: "not an IPv6 address",
            })?;
        let port = after
            .strip_prefix(':')
            .ok_or_else(|| BootstrapError::MissingPort(owned()))?;
        (None, port)
    } else {
        let (host, port) = entry
            .split_once(':')
            .ok_or_else(|| BootstrapError::MissingPort(owned()))?;
        if port.contains(':') {
            return Err(BootstrapError::UnbracketedIpv6(owned()));
        }
        (Some(host), port)
    };
    check_port(port).map_err(|()| BootstrapError::BadPort {
        entry: owned(),
        port: port.to_string(),
    })?;
    if let Some(host) = host {
        check_host(host).map_err(|why| BootstrapError::BadHost {
            entry: owned(),
            host: host.to_string(),
            why,
        })?;
    }
    Ok(())
}

/// 1 to 65535, decimal digits only, no leading zero.
fn check_port(port: &str) -> Result<(), ()> {
    let digits = !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit());
    if !digits || port.starts_with('0') {
        return Err(());
    }
    match port.parse::<u32>() {
        Ok(1..=65535) => Ok(()),
        _ => Err(()),
    }
}

/// A DNS name (RFC 1123 labels) or a dotted-quad IPv4 address.
fn check_host(host: &str) -> Result<(), &'static str> {
    if host.is_empty() {
        return Err("the host is empty");
    }
    if host.len() > 253 {
        return Err("a DNS name has at most 253 characters");
    }
    let labels: Vec<&str> = host.split('.').collect();
    let numeric = labels
        .iter()
        .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()));
    if numeric {
        return host
            .parse::<Ipv4Addr>()
            .map(|_| ())
            .map_err(|_| "all-numeric, but not an IPv4 address");
    }
    for label in labels {
        if label.is_empty() {
            return Err("empty label (two dots in a row, or a leading or trailing dot)");
        }
        if label.len() > 63 {
            return Err("a DNS label has at most 63 characters");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err("only letters, digits, '-' and '.' are allowed");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err("a DNS label must not start or end with '-'");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: [&str; 9] = [
        "kafka-bootstrap.kafka.svc:9092",
        "localhost:1",
        "a:65535",
        "10.0.0.1:9092",
        "127.0.1.1:9092,127.0.1.2:9092",
        "[::1]:9092",
        "[fd00::10:1]:9093,broker-0.kafka:9092",
        "Kafka-0.Example.COM:9092",
        "x1.y2:19092",
    ];

    const BAD: [&str; 24] = [
        "",
        " ",
        "kafka:9092,",
        ",kafka:9092",
        "a:1,,b:2",
        "kafka:9092, b:9092",
        " kafka:9092",
        "PLAINTEXT://kafka:9092",
        "kafka:9092/path",
        "kafka",
        "kafka:",
        ":9092",
        "kafka:0",
        "kafka:65536",
        "kafka:09092",
        "kafka:+9092",
        "::1:9092",
        "[::1]",
        "[not-v6]:9092",
        "-kafka:9092",
        "kafka_0:9092",
        "a..b:9092",
        "999.1.1.1:9092",
        "kafka.:9092",
    ];

    #[test]
    fn accepts_host_port_lists() {
        for good in GOOD {
            assert!(
                parse_bootstrap_servers(good).is_ok(),
                "{good:?}: {:?}",
                parse_bootstrap_servers(good)
            );
        }
        assert_eq!(
            parse_bootstrap_servers("a:1,[::1]:2").unwrap(),
            ["a:1", "[::1]:2"]
        );
    }

    #[test]
    fn refuses_everything_else() {
        for bad in BAD {
            assert!(parse_bootstrap_servers(bad).is_err(), "{bad:?} accepted");
        }
        let long = format!("{}.svc:9092", "a".repeat(64));
        assert!(parse_bootstrap_servers(&long).is_err());
    }

    #[test]
    fn each_error_says_what_to_change() {
        let first = |raw: &str| parse_bootstrap_servers(raw).unwrap_err().remove(0);
        assert_eq!(first("a:1,"), BootstrapError::EmptyEntry(2));
        assert!(matches!(first("a:1, b:2"), BootstrapError::Whitespace(e) if e == " b:2"));
        assert!(first("SASL_SSL://k:9093")
            .to_string()
            .contains("write only host:port"));
        assert!(first("k:9092/x")
            .to_string()
            .contains("between 1 and 65535"));
        assert!(first("fd00::1:9092").to_string().contains("[address]:port"));
        assert!(first("k").to_string().contains("has no port"));
        assert!(first("999.1.1.1:1")
            .to_string()
            .contains("not an IPv4 address"));
        // Every bad entry is reported, not only the first.
        assert_eq!(parse_bootstrap_servers("a,b:0,c:1").unwrap_err().len(), 2);
    }

    /// The CRD's pattern agrees with the parser, except where the docs say it cannot
    /// (all-numeric hosts that are not IPv4, IPv6 groups, label length limits of long names).
    #[test]
    fn crd_pattern_agrees_with_the_parser() {
        let re = regex::Regex::new(BOOTSTRAP_PATTERN).unwrap();
        for good in GOOD {
            assert!(re.is_match(good), "pattern refuses {good:?}");
        }
        let parser_only = ["999.1.1.1:9092", "[not-v6]:9092"];
        for bad in BAD.iter().filter(|b| !parser_only.contains(b)) {
            assert!(!re.is_match(bad), "pattern accepts {bad:?}");
        }
        assert!(!re.is_match("[zz]:9092"));
    }
}
