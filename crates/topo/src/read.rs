//! Small readers of sysfs files that turn every failure into a [`TopoError`] naming the path.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::cpulist::CpuSet;
use crate::error::TopoError;

/// The file's text, or `None` when it does not exist (sysfs leaves out what a kernel or a
/// device does not have). Other read failures are errors.
pub(crate) fn text_opt(path: &Path) -> Result<Option<String>, TopoError> {
    match fs::read(path) {
        // Some recorded files end in NUL padding; the kernel's text never contains NUL.
        Ok(bytes) => Ok(Some(
            String::from_utf8_lossy(&bytes)
                .trim_end_matches('\0')
                .to_string(),
        )),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(source) => Err(TopoError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// A number file (`core_id`, `level`, `numa_node`), or `None` when absent.
pub(crate) fn int_opt(path: &Path) -> Result<Option<i64>, TopoError> {
    let Some(text) = text_opt(path)? else {
        return Ok(None);
    };
    let text = text.trim();
    text.parse::<i64>().map(Some).map_err(|_| TopoError::Parse {
        path: path.to_path_buf(),
        reason: format!("expected an integer, found {text:?}"),
    })
}

/// A cpulist file, or `None` when absent.
pub(crate) fn cpulist_opt(path: &Path) -> Result<Option<CpuSet>, TopoError> {
    let Some(text) = text_opt(path)? else {
        return Ok(None);
    };
    CpuSet::parse_list(&text)
        .map(Some)
        .map_err(|source| TopoError::CpuList {
            path: path.to_path_buf(),
            source,
        })
}

/// A cpumask file, or `None` when absent.
pub(crate) fn cpumask_opt(path: &Path) -> Result<Option<CpuSet>, TopoError> {
    let Some(text) = text_opt(path)? else {
        return Ok(None);
    };
    CpuSet::parse_mask(&text)
        .map(Some)
        .map_err(|source| TopoError::CpuList {
            path: path.to_path_buf(),
            source,
        })
}

/// The CPUs named by `dir/<list>` (a cpulist) and `dir/<mask>` (a cpumask): the union of the
/// two when both exist (they disagree in some recordings: 64amd64's `shared_cpu_list` says
/// `0` where its `shared_cpu_map` says `0-1`; hwloc trusts the mask), either one alone (older
/// kernels write only masks), `None` when neither exists.
pub(crate) fn cpus_list_or_mask(
    dir: &Path,
    list: &str,
    mask: &str,
) -> Result<Option<CpuSet>, TopoError> {
    let list = cpulist_opt(&dir.join(list))?;
    let mask = cpumask_opt(&dir.join(mask))?;
    Ok(match (list, mask) {
        (Some(l), Some(m)) => Some(CpuSet::from_ids(l.iter().chain(m.iter()))),
        (l, m) => l.or(m),
    })
}

/// Entries of a directory named `<prefix><number>`, as `(number, path)` sorted by number;
/// `None` when the directory does not exist.
pub(crate) fn numbered_entries(
    dir: &Path,
    prefix: &str,
) -> Result<Option<Vec<(usize, PathBuf)>>, TopoError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(TopoError::Io {
                path: dir.to_path_buf(),
                source,
            });
        }
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| TopoError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix(prefix) else {
            continue;
        };
        if let Ok(n) = rest.parse::<usize>() {
            out.push((n, entry.path()));
        }
    }
    out.sort();
    Ok(Some(out))
}
