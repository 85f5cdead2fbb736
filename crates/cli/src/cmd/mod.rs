//! Subcommands. Each returns `Result<(), CliError>`; `main` turns errors into exit statuses.

pub mod coalesce;
pub mod conformance;
pub mod demo;
pub mod demo_offload;
pub mod filter;
pub mod forward;
pub mod get;
pub mod live;
mod live_view;
pub mod nic_offload;
pub mod overload;
pub mod placement;
pub mod rfc2544;
pub mod rfc2544_mem;
pub mod rfc2544_plot;
pub mod rfc2544_trial;
pub mod rss;
pub mod serve;
pub mod sim;
pub mod skew;
pub mod topo;
pub mod ttcp;
pub mod tune;

/// What can end a subcommand early.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The arguments are wrong: one line on stderr, exit status 2.
    #[error("{0}")]
    Usage(String),
    /// The command ran and found failures: its output says which; exit status 1.
    #[error("{0}")]
    Failed(String),
    /// Writing the output failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
