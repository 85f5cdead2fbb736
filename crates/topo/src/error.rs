//! Errors of discovery. Every variant names the file or directory it is about.

use std::path::PathBuf;

use crate::cpulist::CpuListError;

/// Why discovery could not describe the machine or an interface.
///
/// Only what makes a description impossible is an error (no CPU directory, an unreadable
/// file that must be there, a malformed number); what a machine may simply lack (NUMA
/// directories, caches, a NIC's MSI-X vectors) is an `Option` or an empty list instead.
#[derive(Debug, thiserror::Error)]
pub enum TopoError {
    /// A file or directory could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// A file's content is not what the kernel writes there.
    #[error("{}: {reason}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// A cpulist or cpumask file did not parse.
    #[error("{}: {source}", path.display())]
    CpuList {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        source: CpuListError,
    },
    /// The root has no `sys/devices/system/cpu` directory, or it lists no online CPU.
    #[error("{}: not a sysfs root ({reason})", path.display())]
    NotSysfs {
        /// The directory that should exist.
        path: PathBuf,
        /// What is missing.
        reason: String,
    },
    /// No `sys/class/net/<name>` under the root.
    #[error("{}: no such network interface", path.display())]
    NoInterface {
        /// The interface directory looked for.
        path: PathBuf,
    },
}
