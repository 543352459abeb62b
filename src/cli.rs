//! The command line: one binary, one subcommand per role, and operator commands.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "shopcell", version, about = "A multi-store commerce platform in one binary")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Account service, router and cells in one process: the embedded default.
    Serve(ServeArgs),
    /// The account service alone (directory, identity, tokens).
    Account(AccountArgs),
    /// One cell alone (the stores placed in it).
    Cell(CellArgs),
    /// The store host alone: forwards to the account service and the cells.
    Router(RouterArgs),
    /// Operator commands.
    #[command(subcommand)]
    Admin(AdminCommand),
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Data directory.
    #[arg(long, env = "SHOPCELL_DATA", default_value = "./shopcell-data")]
    pub data: PathBuf,
    /// Address to listen on.
    #[arg(long, env = "SHOPCELL_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Names of the cells to run (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "cell-1")]
    pub cells: Vec<String>,
}

#[derive(Args, Debug, Clone)]
pub struct AccountArgs {
    #[arg(long, default_value = "./shopcell-data")]
    pub data: PathBuf,
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub listen: SocketAddr,
    /// A cell stores can be placed in, as NAME=URL (repeat for each cell).
    #[arg(long = "cell", value_parser = parse_named_url)]
    pub cells: Vec<(String, String)>,
}

#[derive(Args, Debug, Clone)]
pub struct CellArgs {
    /// The cell's name, as the account service and routers know it.
    #[arg(long)]
    pub name: String,
    #[arg(long, default_value = "./shopcell-data")]
    pub data: PathBuf,
    #[arg(long, default_value = "127.0.0.1:8082")]
    pub listen: SocketAddr,
    /// Base URL of the account service.
    #[arg(long)]
    pub account: String,
    /// File holding the platform service key (the account service writes it to its data
    /// directory as `account/service.key`).
    #[arg(long)]
    pub service_key_file: PathBuf,
}

#[derive(Args, Debug, Clone)]
pub struct RouterArgs {
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Base URL of the account service.
    #[arg(long)]
    pub account: String,
    /// A cell, as NAME=URL (repeat for each cell).
    #[arg(long = "cell", value_parser = parse_named_url)]
    pub cells: Vec<(String, String)>,
    #[arg(long)]
    pub service_key_file: PathBuf,
}

#[derive(Subcommand, Debug)]
pub enum AdminCommand {
    /// Moves a store to another cell, through a running `serve` or account service.
    MoveStore {
        /// URL of the running `serve` process or account service.
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        url: String,
        #[arg(long)]
        store: uuid::Uuid,
        /// The target cell's name.
        #[arg(long)]
        to: String,
        /// Service key file (default: `<data>/account/service.key`).
        #[arg(long)]
        service_key_file: Option<PathBuf>,
        #[arg(long, default_value = "./shopcell-data")]
        data: PathBuf,
    },
    /// Opens every database under a data directory and reports its format and tables.
    Check {
        #[arg(long, default_value = "./shopcell-data")]
        data: PathBuf,
    },
}

fn parse_named_url(s: &str) -> Result<(String, String), String> {
    let (name, url) = s.split_once('=').ok_or_else(|| format!("expected NAME=URL, got {s:?}"))?;
    if name.is_empty() || !url.starts_with("http://") {
        return Err(format!("expected NAME=http://HOST:PORT, got {s:?}"));
    }
    Ok((name.to_string(), url.to_string()))
}
