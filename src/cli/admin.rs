//! The operator commands (`shopcell admin …`): backups, store files and moves, users, the
//! taxonomy, the contract.

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// How an operator command reaches a running `serve` process or account service: its URL and
/// the service key.
#[derive(Args, Debug, Clone)]
pub struct ServiceCall {
    /// URL of the running `serve` process or account service.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// Service key file (default: `<data>/account/service.key`).
    #[arg(long)]
    pub service_key_file: Option<PathBuf>,
    /// Data directory (where the default service key file is).
    #[arg(long, env = "SHOPCELL_DATA", default_value = "./shopcell-data")]
    pub data: PathBuf,
}

impl ServiceCall {
    /// The service key file: the one named, else the data directory's.
    pub fn key_file(&self) -> PathBuf {
        self.service_key_file.clone().unwrap_or_else(|| self.data.join("account").join("service.key"))
    }
}

#[derive(Subcommand, Debug)]
pub enum AdminCommand {
    /// Moves a store to another cell, through a running `serve` or account service.
    MoveStore {
        #[command(flatten)]
        service: ServiceCall,
        /// The store's id.
        #[arg(long)]
        store: uuid::Uuid,
        /// The target cell's name.
        #[arg(long)]
        to: String,
        /// Row bytes per chunk copied between the cells (default 4 MiB, at most 32 MiB).
        #[arg(long)]
        chunk_bytes: Option<u32>,
    },
    /// Reopens a store its owner closed, within the grace period, through a running `serve` or
    /// account service: members, keys and data as they were.
    ReopenStore {
        #[command(flatten)]
        service: ServiceCall,
        /// The closed store's id.
        #[arg(long)]
        store: uuid::Uuid,
    },
    /// Ends every session of a user and prints a one-use password reset link, or sets the
    /// password read from stdin (`--password-stdin`). Through a running `serve` or account
    /// service with `--url`; without it, on the account database under `--data` (stop the process
    /// that holds it first).
    ResetPassword {
        /// The account's email.
        #[arg(long)]
        email: String,
        /// URL of the running `serve` process or account service.
        #[arg(long)]
        url: Option<String>,
        /// Read the new password from the first line of stdin instead of printing a link.
        #[arg(long)]
        password_stdin: bool,
        /// The base of the link offline (online, the service's own `--public-url` is used);
        /// default `http://127.0.0.1:8080`.
        #[arg(long, env = "SHOPCELL_PUBLIC_URL", value_parser = crate::account::links::parse_public_url)]
        public_url: Option<String>,
        /// Service key file (default: `<data>/account/service.key`).
        #[arg(long)]
        service_key_file: Option<PathBuf>,
        /// Data directory (where the default service key file is, or the databases offline).
        #[arg(long, env = "SHOPCELL_DATA", default_value = "./shopcell-data")]
        data: PathBuf,
    },
    /// Creates an account, whatever `--signup` says. Through a running `serve` or account service
    /// with `--url`; without it, on the account database under `--data` (stop the process that
    /// holds it first). The password is read from stdin (`--password-stdin`), or generated and
    /// printed once.
    CreateUser {
        /// The account's email; one some account already uses is refused.
        #[arg(long)]
        email: String,
        /// The account holder's name.
        #[arg(long)]
        name: String,
        /// URL of the running `serve` process or account service.
        #[arg(long)]
        url: Option<String>,
        /// Read the password from the first line of stdin instead of generating one.
        #[arg(long)]
        password_stdin: bool,
        /// Service key file (default: `<data>/account/service.key`).
        #[arg(long)]
        service_key_file: Option<PathBuf>,
        /// Data directory (where the default service key file is, or the databases offline).
        #[arg(long, env = "SHOPCELL_DATA", default_value = "./shopcell-data")]
        data: PathBuf,
    },
    /// Backs up a running installation into DIR on this host, online: one consistent cut of
    /// the account database and every cell, the signing and service keys and the taxonomy,
    /// and `manifest.json` last (no manifest, no backup). See docs/operations.md, "Backup".
    Backup {
        #[command(flatten)]
        service: ServiceCall,
        /// The directory to write: created with mode 0700, refused unless absent or empty.
        #[arg(long)]
        to: PathBuf,
    },
    /// Writes one store of a running installation into FILE on this host, online: every record
    /// of the store as one consistent image, members as emails and roles, publishable keys; no
    /// password, session or secret. See docs/operations.md, "One store as a portable file".
    ExportStore {
        #[command(flatten)]
        service: ServiceCall,
        /// The store's id.
        #[arg(long)]
        store: uuid::Uuid,
        /// The file to write (mode 0600), refused if it exists.
        #[arg(long)]
        to: PathBuf,
    },
    /// Imports a store file written by `export-store` into a running installation, keeping its
    /// id: verified whole first, refused if the id is taken here, the owner has no account or
    /// no room in their plan. Prints what was imported and what must be entered again.
    ImportStore {
        /// The file written by `admin export-store`.
        file: PathBuf,
        #[command(flatten)]
        service: ServiceCall,
        /// The owner's email here (default: the exported owner's email).
        #[arg(long)]
        owner: Option<String>,
    },
    /// Restores a backup as a data directory, offline: verifies the manifest and every
    /// checksum first, then writes PATH and rebuilds search. Every role starts on it with the
    /// keys of the backup, so tokens issued before stay valid.
    Restore {
        /// The backup directory (written by `admin backup`).
        #[arg(long)]
        from: PathBuf,
        /// The data directory to write: absent or empty, unless --replace.
        #[arg(long)]
        data: PathBuf,
        /// Restore over a non-empty PATH (no process may hold it): the current directory is
        /// kept aside as `PATH.before-restore-<unix time>`.
        #[arg(long)]
        replace: bool,
    },
    /// Checks a stopped data directory (format and tables of every database, and the directory
    /// and cells agreeing on each store's place), or with --backup a backup (its manifest,
    /// every checksum, every table's rows, and placement).
    Check {
        /// Data directory (where the default service key file is, or the databases offline).
        #[arg(long, env = "SHOPCELL_DATA", default_value = "./shopcell-data")]
        data: PathBuf,
        /// A backup directory to check instead of a data directory.
        #[arg(long)]
        backup: Option<PathBuf>,
    },
    /// Rebuilds the search index of every cell (or of one) from its redb data. Offline: stop the
    /// process that serves the cells first (it holds their databases).
    Reindex {
        /// Data directory (where the default service key file is, or the databases offline).
        #[arg(long, env = "SHOPCELL_DATA", default_value = "./shopcell-data")]
        data: PathBuf,
        /// Only this cell.
        #[arg(long)]
        cell: Option<String>,
    },
    /// Gives back the unused space of the account database and of every cell (or of one): redb
    /// files never shrink by themselves. Offline: stop the process that serves them first.
    Compact {
        /// Data directory (where the default service key file is, or the databases offline).
        #[arg(long, env = "SHOPCELL_DATA", default_value = "./shopcell-data")]
        data: PathBuf,
        /// Only this cell (and not the account database).
        #[arg(long)]
        cell: Option<String>,
    },
    /// The global product-category taxonomy.
    #[command(subcommand)]
    Taxonomy(TaxonomyCommand),
    /// Prints the OpenAPI document of this build (what `GET /api/v1/openapi.json` answers), for
    /// client generators and linters; needs no data directory.
    Openapi,
}

#[derive(Subcommand, Debug)]
pub enum TaxonomyCommand {
    /// Validates FILE (format: `data-format/taxonomy.md`) and installs it as
    /// `<data>/taxonomy.json`; every process on that data directory serves it from its next start.
    Import {
        /// The taxonomy file (JSON).
        file: PathBuf,
        /// Data directory (where the default service key file is, or the databases offline).
        #[arg(long, env = "SHOPCELL_DATA", default_value = "./shopcell-data")]
        data: PathBuf,
    },
}
