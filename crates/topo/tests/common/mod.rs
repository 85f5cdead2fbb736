//! Unpacking the recorded machines of `crates/topo/tests/data/` for a test. Shared with the
//! `cli` crate's tests (`#[path]`), hence paths from the `crates/` directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The directory holding the recorded machines' tarballs (the including crate is a sibling
/// of `crates/topo`).
pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../topo/tests/data")
}

/// A recorded machine unpacked into a fresh temporary directory, removed on drop.
pub struct Unpacked {
    dir: PathBuf,
    /// The sysfs root: the tarball's single top-level directory.
    pub root: PathBuf,
}

impl Unpacked {
    /// Unpacks `tests/data/<tarball>` with `tar -xjf` (the machine's tar and bzip2: no crate
    /// needed for a test-only step) under [`scratch_dir`].
    pub fn new(tarball: &str) -> Self {
        // Tests run in parallel threads of one process: a counter keeps their copies apart.
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = scratch_dir().join(format!(
            "topo-test-{}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            tarball.trim_end_matches(".tar.bz2")
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let status = Command::new("tar")
            .arg("-xjf")
            .arg(data_dir().join(tarball))
            .arg("-C")
            .arg(&dir)
            .status()
            .expect("tar runs");
        assert!(status.success(), "tar -xjf {tarball} failed");
        let mut tops: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("unpacked dir")
            .map(|e| e.expect("entry").path())
            .collect();
        assert_eq!(tops.len(), 1, "{tarball}: one top-level directory");
        let root = tops.pop().expect("one");
        Self { dir, root }
    }
}

/// Where to unpack: `/dev/shm` when it is a writable tmpfs (a recording is ~9,000 small files:
/// 0.1 s there, 7 s on this machine's disk), else Cargo's per-target temporary directory.
fn scratch_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    let probe = shm.join(format!("topo-probe-{}", std::process::id()));
    if std::fs::create_dir_all(&probe).is_ok() {
        let _ = std::fs::remove_dir(&probe);
        return shm.to_path_buf();
    }
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

impl Drop for Unpacked {
    fn drop(&mut self) {
        // The recordings keep their owners' modes (some directories 0500): make them
        // removable first.
        let _ = Command::new("chmod")
            .arg("-R")
            .arg("u+rwX")
            .arg(&self.dir)
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Every tarball in `tests/data/`.
#[allow(dead_code)]
pub fn all_tarballs() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(data_dir())
        .expect("tests/data")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".tar.bz2"))
        .collect();
    names.sort();
    names
}
