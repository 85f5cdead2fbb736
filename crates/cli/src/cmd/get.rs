//! `rsstack get URL`: one HTTP/1.1 `GET` from a live host. The body goes to `--output` (or
//! stdout); exit 0 on status 200, exit 1 with one line on stderr otherwise (another status,
//! refused, reset, unreachable, timed out).

use core::net::{IpAddr, SocketAddr};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use apps::get::HttpGet;
use clap::Args;

use super::CliError;
use super::live::IoArgs;

/// Largest body accepted, bytes (it is held in memory).
pub const BODY_BYTES_MAX: u64 = 2 << 30;

#[derive(Debug, Args)]
pub struct GetArgs {
    /// `http://IP[:PORT]/PATH`, IPv6 in brackets: `http://[fd00::1]:8080/a.bin`.
    url: String,
    /// Write the body to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    timeout: f64,
    #[command(flatten)]
    io: IoArgs,
}

/// A parsed `http://` URL: the server, the `Host` header and the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub remote: SocketAddr,
    pub host_header: String,
    pub path: String,
}

/// Parses `http://IP[:PORT][/PATH]` (IPv6 in brackets); the port defaults to 80, the path to
/// `/`.
pub fn parse_url(text: &str) -> Result<Url, CliError> {
    let bad = |why: &str| CliError::Usage(format!("URL '{text}': {why}"));
    let rest = text
        .strip_prefix("http://")
        .ok_or_else(|| bad("expected http://IP[:PORT]/PATH"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if path.chars().any(|c| c.is_ascii_control() || c == ' ') {
        return Err(bad("the path has spaces or control characters"));
    }
    let remote = if let Ok(sa) = authority.parse::<SocketAddr>() {
        sa
    } else if let Some(inner) = authority
        .strip_prefix('[')
        .and_then(|a| a.strip_suffix(']'))
    {
        let ip: IpAddr = inner.parse().map_err(|_| bad("not an IPv6 address"))?;
        SocketAddr::new(ip, 80)
    } else {
        let ip: IpAddr = authority
            .parse()
            .map_err(|_| bad("the host must be an IP address (no DNS)"))?;
        if ip.is_ipv6() {
            return Err(bad("an IPv6 host goes in brackets"));
        }
        SocketAddr::new(ip, 80)
    };
    if remote.port() == 0 {
        return Err(bad("port 0"));
    }
    Ok(Url {
        remote,
        host_header: authority.to_string(),
        path: path.to_string(),
    })
}

pub fn run(a: GetArgs, out: &mut impl Write) -> Result<(), CliError> {
    let mut live = a.io.resolve()?;
    let url = parse_url(&a.url)?;
    if !(a.timeout.is_finite() && a.timeout > 0.0 && a.timeout <= 86_400.0) {
        return Err(CliError::Usage(
            "--timeout must be in (0, 86400] seconds".into(),
        ));
    }
    let timeout = Duration::from_secs_f64(a.timeout);
    live.duration = Some(live.duration.map_or(timeout, |d| d.min(timeout)));
    let u = url.clone();
    let r = live.run(
        move |info| {
            (info.shard == 0).then(|| {
                HttpGet::new(
                    u.remote,
                    u.host_header.clone(),
                    u.path.clone(),
                    BODY_BYTES_MAX,
                )
            })
        },
        true,
        || Ok(()),
    )?;
    if !r.host.filters.rules.is_empty() {
        // The body owns stdout: the filters' hits go to stderr.
        super::filter::write_filter_summary(&mut std::io::stderr().lock(), &r.host.filters)?;
    }
    let outcome = r
        .host
        .shards
        .first()
        .and_then(|s| s.app.as_ref())
        .and_then(|g| g.outcome().cloned());
    match outcome {
        Some(Ok(resp)) if resp.status == 200 => {
            match &a.output {
                Some(path) => std::fs::write(path, &resp.body)
                    .map_err(|e| CliError::Failed(format!("writing {}: {e}", path.display())))?,
                None => out.write_all(&resp.body)?,
            }
            Ok(())
        }
        Some(Ok(resp)) => Err(CliError::Failed(format!(
            "{}: HTTP status {}",
            a.url, resp.status
        ))),
        Some(Err(e)) => Err(CliError::Failed(format!("{}: {e}", a.url))),
        None => Err(CliError::Failed(format!(
            "{}: no response within {:.1} s",
            a.url,
            r.elapsed.as_secs_f64()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_the_address_host_header_and_path() {
        let u = parse_url("http://10.0.0.1:8080/a/b.bin").expect("url");
        assert_eq!(u.remote, "10.0.0.1:8080".parse().expect("addr"));
        assert_eq!(
            (u.host_header.as_str(), u.path.as_str()),
            ("10.0.0.1:8080", "/a/b.bin")
        );
        let u = parse_url("http://10.0.0.1").expect("url");
        assert_eq!((u.remote.port(), u.path.as_str()), (80, "/"));
        let u = parse_url("http://[fd00::1]/x").expect("url");
        assert_eq!(u.remote, "[fd00::1]:80".parse().expect("addr"));
        let u = parse_url("http://[fd00::1]:81/").expect("url");
        assert_eq!(u.remote.port(), 81);
        for bad in [
            "https://10.0.0.1/",
            "http://example.com/",
            "http://fd00::1/",
            "http://10.0.0.1:0/",
            "http://10.0.0.1/a b",
            "10.0.0.1/",
        ] {
            assert!(matches!(parse_url(bad), Err(CliError::Usage(_))), "{bad}");
        }
    }
}
