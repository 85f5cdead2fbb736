//! The same HTTP exchange over every packet backend: Linux `curl` fetches 1 MB and 10 MB from
//! `rsstack serve http`, intact (SHA-256), over TAP and over AF_XDP (AF_PACKET is covered at
//! length by `interop_http.rs`). Root only.

mod common;

use std::time::Duration;

use common::{Backend, DUT_V4, Offloads, Topology, curl, need_tools, serial, write_site};
use testnet::{Result, TempDir, check, require_root, sha256_file};

fn fetch_over(backend: Backend) -> Result<()> {
    let _serial = serial();
    need_tools(&["curl"])?;
    let topo = Topology::new(backend, Offloads::Default)?;
    let site = TempDir::new("site")?;
    let files = write_site(site.path(), 10 << 20)?;
    let dir = site.path().to_string_lossy().into_owned();
    let server = topo.serve(&["serve", "http", "--dir", &dir, "--port", "80"])?;
    let got = TempDir::new("got")?;
    for name in ["1m.bin", "10m.bin"] {
        let original = files
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p.clone())
            .ok_or_else(|| testnet::Error::Check(format!("no {name} in the site")))?;
        let out = got.join(name);
        let url = format!("http://{DUT_V4}/{name}");
        let (code, _) = curl(&topo, &url, &out, Duration::from_secs(60))?;
        check(code == 200, || {
            format!("{backend:?} GET {url}: status {code}")
        })?;
        let (want, have) = (sha256_file(&original)?, sha256_file(&out)?);
        check(want == have, || {
            format!("{backend:?} GET {url}: sha256 {have}, want {want}")
        })?;
    }
    server.stop().map(drop)
}

#[test]
fn curl_fetches_intact_files_over_tap() -> Result<()> {
    if !require_root("curl_fetches_intact_files_over_tap") {
        return Ok(());
    }
    fetch_over(Backend::Tap)
}

#[test]
fn curl_fetches_intact_files_over_af_xdp() -> Result<()> {
    if !require_root("curl_fetches_intact_files_over_af_xdp") {
        return Ok(());
    }
    fetch_over(Backend::AfXdp)
}
