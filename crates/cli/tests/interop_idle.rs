//! Lock-out by idle connections (issue 20 item 1): 20,000 TCP connections opened against
//! `rsstack serve http` from one Linux address and held idle must not keep another client
//! out. The stack's overload policy refuses a source over its share of the table and reclaims
//! idle connections under pressure; a `curl` from a second address of the same namespace is
//! served while the flood holds on. Root only (namespaces and a veth); cleans up after itself.

mod common;

use std::time::{Duration, Instant};

use common::*;
use testnet::{Result, TempDir, check, require_root};

#[test]
fn twenty_thousand_idle_connections_from_one_address_do_not_lock_out_another_client() -> Result<()>
{
    if !require_root(
        "twenty_thousand_idle_connections_from_one_address_do_not_lock_out_another_client",
    ) {
        return Ok(());
    }
    let _serial = serial();
    need_tools(&["curl", "python3"])?;
    let topo = Topology::new(Backend::AfPacket, Offloads::Default)?;
    topo.peer.add_addr(topo.peer_dev, "10.77.0.3/24")?;
    let site = TempDir::new("site")?;
    write_site(site.path(), 1 << 10)?;
    let dir = site.path().to_string_lossy().into_owned();
    let server = topo.serve(&["serve", "http", "--dir", &dir, "--port", "80"])?;
    let mut flood = topo.peer.spawn(
        "python3",
        &["-c", IDLE_FLOOD, PEER_V4, DUT_V4, "20000", "40"],
    )?;
    flood.wait_for_line("opened", Duration::from_secs(60))?;
    // The flood holds its connections; a client from another address is served at once.
    let got = TempDir::new("got")?;
    let out = got.join("1k.bin");
    let started = Instant::now();
    let out_s = out.to_string_lossy().into_owned();
    let url = format!("http://{DUT_V4}/1k.bin");
    let o = topo.peer.run(
        "curl",
        &[
            "-s",
            "-o",
            &out_s,
            "-w",
            "%{http_code}",
            "--interface",
            "10.77.0.3",
            "--max-time",
            "20",
            &url,
        ],
        Duration::from_secs(30),
    )?;
    eprintln!(
        "curl during the flood: {} in {:.2} s",
        o.stdout,
        started.elapsed().as_secs_f64()
    );
    check(o.stdout.trim() == "200", || {
        format!(
            "curl during the flood got {:?}:\n{}",
            o.stdout,
            o.combined()
        )
    })?;
    drop(flood);
    let summary = server.stop()?;
    let c = counters(&summary);
    let refused = c.get("stack.tcp_source_limit").copied().unwrap_or(0.0);
    eprintln!("flood refused by source share: {refused}");
    check(refused > 0.0, || {
        format!("the flood was never refused by its source's share:\n{summary}")
    })
}
