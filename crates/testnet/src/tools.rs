//! Parsers for what the Linux tools and rsstack print: wrk, iperf2 (`-y C`), ping, and
//! `key: value` reports and counter summaries.

use std::collections::BTreeMap;

use crate::{Error, Result};

/// The totals of one `wrk` run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WrkReport {
    /// "N requests in D, X read".
    pub requests: u64,
    /// "Requests/sec: R".
    pub requests_per_sec: f64,
    /// "Socket errors: connect C, read R, write W, timeout T" (all zero when the line is
    /// absent, which is how wrk says there were none).
    pub connect_errors: u64,
    pub read_errors: u64,
    pub write_errors: u64,
    pub timeout_errors: u64,
    /// "Non-2xx or 3xx responses: N" (zero when absent).
    pub non_2xx_3xx: u64,
}

impl WrkReport {
    /// Parses wrk's standard output; fails when the request total or rate is missing (wrk did
    /// not finish a run).
    pub fn parse(text: &str) -> Result<WrkReport> {
        let mut r = WrkReport::default();
        let mut have_requests = false;
        let mut have_rate = false;
        for line in text.lines().map(str::trim) {
            if let Some(rest) = line.strip_prefix("Requests/sec:") {
                r.requests_per_sec = parse_num(rest.trim(), line)?;
                have_rate = true;
            } else if let Some(rest) = line.strip_prefix("Socket errors:") {
                for part in rest.split(',') {
                    let mut it = part.split_whitespace();
                    let (Some(name), Some(v)) = (it.next(), it.next()) else {
                        continue;
                    };
                    let v: u64 = parse_num(v, line)?;
                    match name {
                        "connect" => r.connect_errors = v,
                        "read" => r.read_errors = v,
                        "write" => r.write_errors = v,
                        "timeout" => r.timeout_errors = v,
                        _ => {}
                    }
                }
            } else if let Some(rest) = line.strip_prefix("Non-2xx or 3xx responses:") {
                r.non_2xx_3xx = parse_num(rest.trim(), line)?;
            } else if let Some((n, _)) = line.split_once(" requests in ") {
                r.requests = parse_num(n.trim(), line)?;
                have_requests = true;
            }
        }
        if have_requests && have_rate {
            Ok(r)
        } else {
            Err(Error::Check(format!("not a finished wrk run:\n{text}")))
        }
    }

    /// Connect + read + write + timeout errors.
    pub fn socket_errors(&self) -> u64 {
        self.connect_errors + self.read_errors + self.write_errors + self.timeout_errors
    }
}

/// The summary line of an iperf2 client run with `-y C` (CSV): the last line's byte count
/// and rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IperfReport {
    pub bytes: u64,
    pub bits_per_sec: f64,
}

impl IperfReport {
    /// Parses the last CSV line: `time,src,sport,dst,dport,id,interval,bytes,bits_per_sec`.
    pub fn parse_csv(text: &str) -> Result<IperfReport> {
        let line = text
            .lines()
            .rev()
            .find(|l| l.split(',').count() >= 9)
            .ok_or_else(|| Error::Check(format!("no iperf CSV report in:\n{text}")))?;
        let fields: Vec<&str> = line.split(',').collect();
        Ok(IperfReport {
            bytes: parse_num(fields[7], line)?,
            bits_per_sec: parse_num(fields[8], line)?,
        })
    }
}

/// "N packets transmitted, M received" from ping's statistics.
pub fn ping_counts(text: &str) -> Result<(u64, u64)> {
    for line in text.lines() {
        if let Some((tx, rest)) = line.split_once(" packets transmitted, ") {
            let rx = rest.split_whitespace().next().unwrap_or("");
            return Ok((parse_num(tx.trim(), line)?, parse_num(rx, line)?));
        }
    }
    Err(Error::Check(format!("no ping statistics in:\n{text}")))
}

/// Every `key: value` or `key=value` pair in `text` whose value is a number: tokens are split
/// on whitespace, commas and semicolons. A key seen more than once (one line per shard, say) is
/// summed. Used for rsstack's counter summary and its ttcp report.
pub fn numbers(text: &str) -> BTreeMap<String, f64> {
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let tokens: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == '{' || c == '}')
            .filter(|t| !t.is_empty())
            .collect();
        let mut i = 0;
        while i < tokens.len() {
            let t = tokens[i];
            let (key, value) = if let Some((k, v)) = t.split_once('=') {
                (k, Some(v))
            } else if let Some(k) = t.strip_suffix(':') {
                (k, tokens.get(i + 1).copied())
            } else if let Some((k, v)) = t.split_once(':') {
                (k, Some(v))
            } else {
                (t, None)
            };
            let key = key.trim_matches('"');
            if let Some(v) = value.map(|v| v.trim_matches('"')) {
                if let Ok(n) = v.parse::<f64>() {
                    if !key.is_empty() {
                        *map.entry(key.to_owned()).or_insert(0.0) += n;
                    }
                }
            }
            i += 1;
        }
    }
    map
}

fn parse_num<T: std::str::FromStr>(s: &str, line: &str) -> Result<T> {
    // wrk prints "1.40k"-style numbers only in per-thread stats, which are not parsed here.
    s.trim()
        .parse()
        .map_err(|_| Error::Check(format!("cannot read the number {s:?} in {line:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRK_CLEAN: &str = "Running 2s test @ http://10.9.0.1:8080/f.bin
  2 threads and 20 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    21.09ms   80.35ms 837.79ms   94.61%
    Req/Sec   763.60    269.31     1.40k    67.50%
  3040 requests in 2.00s, 290.57MB read
Requests/sec:   1518.50
Transfer/sec:    145.14MB
";

    const WRK_ERRORS: &str = "Running 10s test @ http://10.77.0.2/index.html
  2 threads and 100 connections
  3040 requests in 10.00s, 290.57MB read
  Socket errors: connect 0, read 3, write 1, timeout 12
  Non-2xx or 3xx responses: 4128
Requests/sec:   1966.36
Transfer/sec:      0.98MB
";

    #[test]
    fn wrk_clean_run_has_no_errors() {
        let r = WrkReport::parse(WRK_CLEAN).unwrap();
        assert_eq!(r.requests, 3040);
        assert!((r.requests_per_sec - 1518.5).abs() < 1e-9);
        assert_eq!(r.socket_errors(), 0);
        assert_eq!(r.non_2xx_3xx, 0);
    }

    #[test]
    fn wrk_socket_errors_and_non_2xx_are_read() {
        let r = WrkReport::parse(WRK_ERRORS).unwrap();
        assert_eq!(
            (
                r.connect_errors,
                r.read_errors,
                r.write_errors,
                r.timeout_errors
            ),
            (0, 3, 1, 12)
        );
        assert_eq!(r.socket_errors(), 16);
        assert_eq!(r.non_2xx_3xx, 4128);
    }

    #[test]
    fn wrk_output_without_totals_is_an_error() {
        assert!(WrkReport::parse("unable to connect to 10.0.0.1:80 Connection refused").is_err());
    }

    #[test]
    fn iperf_csv_last_line_is_the_report() {
        let text = "19700101000000,10.9.0.2,36508,10.9.0.1,5001,1,0.0-1.0,1804861500,14360298088\n";
        let r = IperfReport::parse_csv(text).unwrap();
        assert_eq!(r.bytes, 1_804_861_500);
        assert!((r.bits_per_sec - 14_360_298_088.0).abs() < 1.0);
        assert!(IperfReport::parse_csv("connect failed: Connection refused").is_err());
    }

    #[test]
    fn ping_statistics_are_read() {
        let text = "--- 10.9.0.1 ping statistics ---\n3 packets transmitted, 2 received, 33.3333% packet loss, time 408ms\n";
        assert_eq!(ping_counts(text).unwrap(), (3, 2));
        assert!(ping_counts("connect: Network is unreachable").is_err());
    }

    #[test]
    fn numbers_reads_colon_and_equals_pairs_and_sums_repeats() {
        let text = "shard 0: rx_frames=10 rx_drop_tcp_malformed=2\n\
                    shard 1: rx_frames=5, rx_drop_tcp_malformed=0\n\
                    throughput_Mbps: 941.5\n\
                    bytes: 1048576\n\
                    \"tcp_syn_cookies_sent\": 7,\n";
        let m = numbers(text);
        assert_eq!(m["rx_frames"], 15.0);
        assert_eq!(m["rx_drop_tcp_malformed"], 2.0);
        assert_eq!(m["throughput_Mbps"], 941.5);
        assert_eq!(m["bytes"], 1_048_576.0);
        assert_eq!(m["tcp_syn_cookies_sent"], 7.0);
        assert!(!m.contains_key("shard"));
    }
}
