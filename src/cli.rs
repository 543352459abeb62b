//! The command line: one binary, one subcommand per role, and operator commands.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use crate::account::provisioning::Signup;

#[derive(Parser, Debug)]
#[command(name = "shopcell", version, about = "A multi-store commerce platform in one binary")]
pub struct Cli {
    /// How log lines are written: `json` (one object per line) or `text`; default: `json` when
    /// stderr is not a terminal (files, journald), else `text`. Levels: `SHOPCELL_LOG`.
    #[arg(long, global = true, env = "SHOPCELL_LOG_FORMAT", value_enum)]
    pub log_format: Option<crate::logs::LogFormat>,
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
    /// Exits 0 when the service at the URL is ready (`GET /readyz`), 1 otherwise: for container
    /// health checks on images without curl.
    Healthcheck(HealthcheckArgs),
}

#[derive(Args, Debug, Clone)]
pub struct HealthcheckArgs {
    /// The service's base URL.
    #[arg(long, env = "SHOPCELL_HEALTHCHECK_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// Seconds to wait for the answer.
    #[arg(long, default_value_t = 3)]
    pub timeout: u64,
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Data directory (created 0700 when absent).
    #[arg(long, env = "SHOPCELL_DATA", default_value = "./shopcell-data")]
    pub data: PathBuf,
    /// Address to listen on, `HOST:PORT`; a host name is resolved (IPv4 first).
    #[arg(long, env = "SHOPCELL_LISTEN", default_value = "127.0.0.1:8080", value_parser = parse_listen)]
    pub listen: SocketAddr,
    /// The base of links in mail (password resets, invitations): an http or https URL; default:
    /// the URL this process prints once it listens.
    #[arg(long, env = "SHOPCELL_PUBLIC_URL", value_parser = crate::account::links::parse_public_url)]
    pub public_url: Option<String>,
    /// Names of the cells to run (comma-separated).
    #[arg(long, env = "SHOPCELL_CELLS", value_delimiter = ',', default_value = "cell-1")]
    pub cells: Vec<String>,
    /// Whether anyone may register (`open`), or accounts come only from `shopcell admin
    /// create-user` and invitations (`closed`).
    #[arg(long, env = "SHOPCELL_SIGNUP", value_enum, default_value_t = Signup::Open)]
    pub signup: Signup,
    /// How sessions rotate their tokens.
    #[command(flatten)]
    pub sessions: SessionArgs,
    /// On an empty or absent data directory: create a merchant (password printed once) and a
    /// demo store of a few hundred products. Refused on a directory that holds anything.
    #[arg(long)]
    pub demo: bool,
    /// Sign-in options: CORS origins, social providers, rate limits.
    #[command(flatten)]
    pub auth: AuthArgs,
    /// Connection limits (idle and body timeouts, caps) and the metrics listener.
    #[command(flatten)]
    pub connections: ConnectionArgs,
    /// JSON file with the platform plan catalogue (see `docs/plans.md`, "Plans"); the built-in free,
    /// basic and pro plans when absent.
    #[arg(long, env = "SHOPCELL_PLANS")]
    pub plans: Option<PathBuf>,
    /// Payment provider options.
    #[command(flatten)]
    pub payments: PaymentArgs,
    /// Answer cache options.
    #[command(flatten)]
    pub caches: CacheArgs,
    /// How long closed stores are kept and checkouts wait.
    #[command(flatten)]
    pub retention: RetentionArgs,
    /// Calls out to URLs merchants name (webhooks).
    #[command(flatten)]
    pub outbound: OutboundArgs,
    /// How mail is sent.
    #[command(flatten)]
    pub mail: MailArgs,
    /// The memory budget.
    #[command(flatten)]
    pub memory: MemoryArgs,
    /// Runs no background jobs (deliveries, mail): they wait in the database for a start without
    /// it. For benchmarks that measure what a write costs on its own.
    #[arg(long, hide = true)]
    pub jobs_paused: bool,
}

#[derive(Args, Debug, Clone)]
pub struct AccountArgs {
    /// Data directory (created 0700 when absent); the directory lives in `account/`.
    #[arg(long, env = "SHOPCELL_DATA", default_value = "./shopcell-data")]
    pub data: PathBuf,
    /// Address to listen on, `HOST:PORT`; a host name is resolved (IPv4 first).
    #[arg(long, env = "SHOPCELL_LISTEN", default_value = "127.0.0.1:8081", value_parser = parse_listen)]
    pub listen: SocketAddr,
    /// The base of links in mail (password resets, invitations): an http or https URL; default:
    /// the URL this process prints once it listens.
    #[arg(long, env = "SHOPCELL_PUBLIC_URL", value_parser = crate::account::links::parse_public_url)]
    pub public_url: Option<String>,
    /// A cell stores can be placed in, as NAME=URL (repeat for each cell, or comma-separate).
    #[arg(long = "cell", env = "SHOPCELL_CELL_URLS", value_delimiter = ',', value_parser = parse_named_url)]
    pub cells: Vec<(String, String)>,
    /// Whether anyone may register (`open`), or accounts come only from `shopcell admin
    /// create-user` and invitations (`closed`).
    #[arg(long, env = "SHOPCELL_SIGNUP", value_enum, default_value_t = Signup::Open)]
    pub signup: Signup,
    /// How sessions rotate their tokens.
    #[command(flatten)]
    pub sessions: SessionArgs,
    /// Sign-in options: CORS origins, social providers, rate limits.
    #[command(flatten)]
    pub auth: AuthArgs,
    /// Connection limits (idle and body timeouts, caps) and the metrics listener.
    #[command(flatten)]
    pub connections: ConnectionArgs,
    /// JSON file with the platform plan catalogue (see `docs/plans.md`, "Plans"); the built-in free,
    /// basic and pro plans when absent.
    #[arg(long, env = "SHOPCELL_PLANS")]
    pub plans: Option<PathBuf>,
    /// The memory budget.
    #[command(flatten)]
    pub memory: MemoryArgs,
    /// How mail is sent (password resets, invitations).
    #[command(flatten)]
    pub mail: MailArgs,
    /// Trusted roots (`--outbound-ca`), for the SMTP server's certificate.
    #[command(flatten)]
    pub outbound: OutboundArgs,
}

#[derive(Args, Debug, Clone)]
pub struct CellArgs {
    /// The cell's name, as the account service and routers know it.
    #[arg(long, env = "SHOPCELL_CELL_NAME")]
    pub name: String,
    /// Data directory (created 0700 when absent); the cell lives in `cells/NAME/`.
    #[arg(long, env = "SHOPCELL_DATA", default_value = "./shopcell-data")]
    pub data: PathBuf,
    /// Address to listen on, `HOST:PORT`; a host name is resolved (IPv4 first).
    #[arg(long, env = "SHOPCELL_LISTEN", default_value = "127.0.0.1:8082", value_parser = parse_listen)]
    pub listen: SocketAddr,
    /// Base URL of the account service.
    #[arg(long, env = "SHOPCELL_ACCOUNT_URL")]
    pub account: String,
    /// File holding the platform service key (the account service writes it to its data
    /// directory as `account/service.key`).
    #[arg(long, env = "SHOPCELL_SERVICE_KEY_FILE")]
    pub service_key_file: PathBuf,
    /// Payment provider options.
    #[command(flatten)]
    pub payments: PaymentArgs,
    /// Answer cache options.
    #[command(flatten)]
    pub caches: CacheArgs,
    /// How long closed stores are kept and checkouts wait.
    #[command(flatten)]
    pub retention: RetentionArgs,
    /// Calls out to URLs merchants name (webhooks).
    #[command(flatten)]
    pub outbound: OutboundArgs,
    /// How mail is sent.
    #[command(flatten)]
    pub mail: MailArgs,
    /// Connection limits (idle and body timeouts, caps) and the metrics listener.
    #[command(flatten)]
    pub connections: ConnectionArgs,
    /// The memory budget.
    #[command(flatten)]
    pub memory: MemoryArgs,
}

#[derive(Args, Debug, Clone)]
pub struct RouterArgs {
    /// Address to listen on, `HOST:PORT`; a host name is resolved (IPv4 first).
    #[arg(long, env = "SHOPCELL_LISTEN", default_value = "127.0.0.1:8080", value_parser = parse_listen)]
    pub listen: SocketAddr,
    /// Base URL of the account service.
    #[arg(long, env = "SHOPCELL_ACCOUNT_URL")]
    pub account: String,
    /// A cell, as NAME=URL (repeat for each cell, or comma-separate).
    #[arg(long = "cell", env = "SHOPCELL_CELL_URLS", value_delimiter = ',', value_parser = parse_named_url)]
    pub cells: Vec<(String, String)>,
    /// File holding the platform service key (the account service's `account/service.key`).
    #[arg(long, env = "SHOPCELL_SERVICE_KEY_FILE")]
    pub service_key_file: PathBuf,
    /// Sign-in options: CORS origins, social providers, rate limits.
    #[command(flatten)]
    pub auth: AuthArgs,
    /// Connection limits (idle and body timeouts, caps) and the metrics listener.
    #[command(flatten)]
    pub connections: ConnectionArgs,
}

/// How the account service's sessions behave, shared by `serve` and `account`.
#[derive(Args, Debug, Clone)]
pub struct SessionArgs {
    /// How long after a refresh the refresh token it spent still answers the same new pair
    /// (browser tabs refreshing together), up to 60s; `0s` ends the session on any reuse. See
    /// `docs/auth.md`, "Tokens".
    #[arg(long, env = "SHOPCELL_REFRESH_GRACE", default_value = "10s", value_parser = parse_refresh_grace)]
    pub refresh_grace: std::time::Duration,
}

impl Default for SessionArgs {
    /// The flags' defaults, for processes built in code (tests, benchmarks).
    fn default() -> Self {
        SessionArgs { refresh_grace: crate::account::sessions::DEFAULT_REFRESH_GRACE }
    }
}

fn parse_refresh_grace(s: &str) -> Result<std::time::Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| e.to_string())?;
    let max = crate::account::sessions::MAX_REFRESH_GRACE;
    if d > max {
        return Err(format!("at most {}s: a longer window lets a stolen refresh token go unnoticed", max.as_secs()));
    }
    Ok(d)
}

/// Options of the identity side, shared by `serve`, `account` and `router`.
#[derive(Args, Debug, Clone)]
pub struct AuthArgs {
    /// A browser origin allowed to call the API with credentials, e.g. `https://shop.example.com`
    /// (repeat for each origin). Other origins get no CORS headers.
    #[arg(long = "cors-origin", env = "SHOPCELL_CORS_ORIGINS", value_delimiter = ',')]
    pub cors_origins: Vec<String>,
    /// JSON file configuring social sign-in (OpenID Connect providers, client ids and secrets,
    /// redirect base, client URL); see `docs/auth.md`. Without it the real Google and Apple
    /// endpoints are used with client ids from the environment.
    #[arg(long, env = "SHOPCELL_OIDC_CONFIG")]
    pub oidc_config: Option<PathBuf>,
    /// Failed sign-in steps allowed per account per minute (password, MFA code, refresh token).
    #[arg(long, env = "SHOPCELL_RATE_ACCOUNT", default_value_t = 10)]
    pub rate_per_account: u32,
    /// Sign-in calls (login, MFA verify, refresh, key validation) allowed per client address per minute.
    #[arg(long, env = "SHOPCELL_RATE_ADDRESS", default_value_t = 60)]
    pub rate_per_address: u32,
    /// Sign-ups allowed per client address per minute (all at once, then refilled evenly).
    #[arg(long, env = "SHOPCELL_RATE_REGISTER", default_value_t = 20)]
    pub rate_register: u32,
    /// A proxy in front of this process (a load balancer, a TLS terminator) whose
    /// `X-Forwarded-For` is believed: a CIDR network or one address, repeatable. Without one,
    /// the peer is the client (see `docs/contract.md`, "Behind a proxy").
    #[arg(long = "trusted-proxy", env = "SHOPCELL_TRUSTED_PROXIES", value_delimiter = ',', value_parser = crate::http::forwarded::parse_proxy)]
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

impl Default for AuthArgs {
    /// The flags' defaults, for processes built in code (tests, benchmarks).
    fn default() -> Self {
        AuthArgs {
            cors_origins: Vec::new(),
            oidc_config: None,
            rate_per_account: 10,
            rate_per_address: 60,
            rate_register: 20,
            trusted_proxies: Vec::new(),
        }
    }
}

/// Where the cells create payment intents.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PaymentProviderKind {
    /// The built-in offline test provider (test card tokens; no network).
    #[default]
    Test,
    /// A Stripe-compatible API at `--stripe-api-base`.
    Stripe,
}

/// The process's memory budget, shared by `serve`, `account` and `cell`.
#[derive(Args, Debug, Clone, Default)]
pub struct MemoryArgs {
    /// Memory the process's caches may hold together, e.g. `512MB` or `4GB` (binary units),
    /// divided among them at start (`docs/memory.md`). Default: half of the cgroup's memory
    /// limit, or of physical memory.
    #[arg(long, env = "SHOPCELL_MEMORY")]
    pub memory: Option<String>,
}

/// Options of a cell's answer caches, shared by `serve` and `cell`.
#[derive(Args, Debug, Clone)]
pub struct CacheArgs {
    /// Keep recent product search answers and product list pages in memory, each served only
    /// while its store and the search index are unchanged (`docs/search.md`, "Answer cache"); `false`
    /// computes every answer afresh.
    #[arg(long, env = "SHOPCELL_ANSWER_CACHE", default_value_t = true, action = clap::ArgAction::Set)]
    pub answer_cache: bool,
}

impl Default for CacheArgs {
    /// The flags' defaults, for processes built in code (tests, benchmarks).
    fn default() -> Self {
        CacheArgs { answer_cache: true }
    }
}

/// What one connection may hold, shared by every serving role (`docs/contract.md`,
/// "Connections").
#[derive(Args, Debug, Clone)]
pub struct ConnectionArgs {
    /// A connection with no request under way and nothing sent either way for this long is
    /// closed, counted from accept.
    #[arg(long, env = "SHOPCELL_IDLE_TIMEOUT", default_value = "60s", value_parser = humantime::parse_duration)]
    pub idle_timeout: std::time::Duration,
    /// A request body must arrive within this long (else 408).
    #[arg(long, env = "SHOPCELL_BODY_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    pub body_timeout: std::time::Duration,
    /// Open connections in all; past it, 503 with Retry-After.
    #[arg(long, env = "SHOPCELL_MAX_CONNECTIONS", default_value_t = 10_000)]
    pub max_connections: usize,
    /// Open connections from one client address; past it, 503 with Retry-After.
    #[arg(long, env = "SHOPCELL_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = 256)]
    pub max_connections_per_address: usize,
    /// Concurrent streams of one HTTP/2 connection.
    #[arg(long, env = "SHOPCELL_H2_MAX_STREAMS", default_value_t = 128)]
    pub h2_max_streams: u32,
    /// A second address serving `GET /metrics` alone, without a key (for a scraper on a private
    /// network); on the API port `/metrics` needs the service key.
    #[arg(long, env = "SHOPCELL_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
}

impl Default for ConnectionArgs {
    /// The flags' defaults, for processes built in code (tests, benchmarks).
    fn default() -> Self {
        let d = crate::http::connections::ConnectionLimits::default();
        ConnectionArgs {
            idle_timeout: d.idle,
            body_timeout: d.body_timeout,
            max_connections: d.max_connections,
            max_connections_per_address: d.max_per_address,
            h2_max_streams: d.h2_streams,
            metrics_listen: None,
        }
    }
}

impl ConnectionArgs {
    pub fn limits(&self) -> crate::http::connections::ConnectionLimits {
        crate::http::connections::ConnectionLimits {
            idle: self.idle_timeout,
            body_timeout: self.body_timeout,
            max_connections: self.max_connections,
            max_per_address: self.max_connections_per_address,
            h2_streams: self.h2_max_streams,
        }
    }
}

/// How long a cell waits on what is gone or left, shared by `serve` and `cell`.
#[derive(Args, Debug, Clone)]
pub struct RetentionArgs {
    /// How long a closed store's data is kept, during which `shopcell admin reopen-store` brings
    /// it back (`30d`, `12h`; see `docs/stores-and-members.md`, "Closing a store").
    #[arg(long, env = "SHOPCELL_CLOSED_STORE_GRACE", default_value = "30d", value_parser = humantime::parse_duration)]
    pub closed_store_grace: std::time::Duration,
    /// How long after its last change a checkout with an email and no order is reported
    /// abandoned (the `checkout.abandoned` event, once; see `docs/webhooks.md`).
    #[arg(long, env = "SHOPCELL_CHECKOUT_ABANDONED_AFTER", default_value = "1h", value_parser = humantime::parse_duration)]
    pub checkout_abandoned_after: std::time::Duration,
}

impl Default for RetentionArgs {
    /// The flags' defaults, for processes built in code (tests, benchmarks).
    fn default() -> Self {
        RetentionArgs {
            closed_store_grace: std::time::Duration::from_secs(30 * 24 * 3600),
            checkout_abandoned_after: std::time::Duration::from_secs(3600),
        }
    }
}

/// Options of the payment providers, shared by `serve` and `cell`.
#[derive(Args, Debug, Clone)]
pub struct PaymentArgs {
    /// Where payment intents are created: `test` (built-in, offline) or `stripe`.
    #[arg(long, env = "SHOPCELL_PAYMENT_PROVIDER", value_enum, default_value_t = PaymentProviderKind::Test)]
    pub payment_provider: PaymentProviderKind,
    /// Base URL of the Stripe-compatible API.
    #[arg(long, env = "SHOPCELL_STRIPE_API_BASE", default_value = "https://api.stripe.com")]
    pub stripe_api_base: String,
    /// The Stripe secret key (`sk_…`); required with `--payment-provider stripe`. Prefer the
    /// environment variable: command lines are visible to other users of the host.
    #[arg(long, env = "SHOPCELL_STRIPE_SECRET_KEY", hide_env_values = true)]
    pub stripe_secret_key: Option<String>,
}

impl Default for PaymentArgs {
    /// The flags' defaults, for processes built in code (tests, benchmarks).
    fn default() -> Self {
        PaymentArgs {
            payment_provider: PaymentProviderKind::Test,
            stripe_api_base: "https://api.stripe.com".into(),
            stripe_secret_key: None,
        }
    }
}

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

/// `--listen`: an address, or `HOST:PORT` with a host name resolved now; IPv4 is preferred, as
/// `localhost` often resolves to `::1` first on hosts where nothing else listens on IPv6.
fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = s.parse() {
        return Ok(addr);
    }
    use std::net::ToSocketAddrs;
    let addrs: Vec<SocketAddr> =
        s.to_socket_addrs().map_err(|e| format!("cannot resolve {s:?} (expected HOST:PORT): {e}"))?.collect();
    addrs.iter().find(|a| a.is_ipv4()).or(addrs.first()).copied().ok_or_else(|| format!("{s:?} resolves to no address"))
}

fn parse_named_url(s: &str) -> Result<(String, String), String> {
    let (name, url) = s.split_once('=').ok_or_else(|| format!("expected NAME=URL, got {s:?}"))?;
    if name.is_empty() || !url.starts_with("http://") {
        return Err(format!("expected NAME=http://HOST:PORT, got {s:?}"));
    }
    Ok((name.to_string(), url.to_string()))
}

/// How the platform sends mail (see `docs/mail.md`).
#[derive(Args, Debug, Clone, Default)]
pub struct MailArgs {
    /// SMTP server to send mail through: `smtps://USER:PASS@HOST:465` (implicit TLS) or
    /// `smtp://USER:PASS@HOST:587` (STARTTLS required). Without it, mail is written to
    /// `<data>/mail/*.eml`.
    #[arg(long, env = "SHOPCELL_SMTP_URL")]
    pub smtp_url: Option<String>,
    /// The platform's sender, `Name <address>`; store mail from other domains uses its address.
    #[arg(long, env = "SHOPCELL_MAIL_FROM", default_value = "shopcell <no-reply@localhost>")]
    pub mail_from: String,
    /// A domain stores may send from under their own address, because this server's mail passes
    /// its SPF and DKIM (repeat or comma-separate).
    #[arg(long = "mail-sender-domain", env = "SHOPCELL_MAIL_SENDER_DOMAINS", value_delimiter = ',')]
    pub mail_sender_domains: Vec<String>,
}

impl MailArgs {
    /// The mailer's configuration: `.eml` files under `<data>/mail`, `ca_files` trusted beside
    /// the webpki roots (the operator's `--outbound-ca`).
    pub fn config(&self, data: &std::path::Path, ca_files: Vec<PathBuf>) -> crate::mail::MailConfig {
        // `Default` leaves the field empty; clap always fills it.
        let mail_from = if self.mail_from.is_empty() { "shopcell <no-reply@localhost>" } else { &self.mail_from };
        crate::mail::MailConfig {
            // An empty SHOPCELL_SMTP_URL means none, as the variable left unset does.
            smtp_url: self.smtp_url.clone().filter(|url| !url.trim().is_empty()),
            mail_from: mail_from.to_string(),
            sender_domains: self.mail_sender_domains.clone(),
            dir: data.join("mail"),
            ca_files,
            timeout: std::time::Duration::from_secs(30),
            connect_to: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn answer_caches_are_on_unless_turned_off() {
        let serve = |args: &[&str]| match Cli::try_parse_from([&["shopcell", "serve"], args].concat()).unwrap().command {
            Command::Serve(a) => a.caches.answer_cache,
            _ => unreachable!("a serve command"),
        };
        assert!(serve(&[]));
        assert!(!serve(&["--answer-cache", "false"]));
        assert!(Cli::try_parse_from(["shopcell", "serve", "--answer-cache", "maybe"]).is_err());
    }

    #[test]
    fn every_flag_and_command_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments().filter(|a| !matches!(a.get_id().as_str(), "help" | "version")) {
                if a.get_help().is_none() {
                    missing.push(format!("{path} {}", a.get_id()));
                }
            }
            for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
                if sub.get_about().is_none() {
                    missing.push(format!("{path} {}", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&<Cli as clap::CommandFactory>::command(), "shopcell", &mut missing);
        assert!(missing.is_empty(), "without help: {missing:?}");
    }

    #[test]
    fn every_role_reads_every_flag_from_the_environment() {
        let cli = <Cli as clap::CommandFactory>::command();
        let mut missing = Vec::new();
        for role in ["serve", "account", "cell", "router"] {
            let cmd = cli.find_subcommand(role).expect("a role");
            // `--demo` seeds once: a variable left set would refuse every later start.
            let skip = |id: &str| matches!(id, "help" | "demo" | "jobs_paused");
            for a in cmd.get_arguments().filter(|a| !skip(a.get_id().as_str()) && a.get_env().is_none()) {
                missing.push(format!("{role} --{}", a.get_long().unwrap_or_default()));
            }
        }
        assert!(missing.is_empty(), "without an environment variable: {missing:?}");
    }

    #[test]
    fn listen_takes_an_address_or_a_host_name() {
        let listen = |l: &str| match Cli::try_parse_from(["shopcell", "serve", "--listen", l]).map(|c| c.command) {
            Ok(Command::Serve(a)) => Some(a.listen),
            _ => None,
        };
        assert_eq!(listen("127.0.0.1:9000"), Some("127.0.0.1:9000".parse().unwrap()));
        assert_eq!(listen("[::1]:9000"), Some("[::1]:9000".parse().unwrap()));
        assert_eq!(listen("localhost:9000").map(|a| a.port()), Some(9000));
        assert!(listen("localhost:9000").is_some_and(|a| a.ip().is_loopback()));
        assert_eq!(listen("localhost"), None, "a port is needed");
    }

    #[test]
    fn a_public_url_is_http_or_https() {
        let url = |role: &str, url: &str| match Cli::try_parse_from(["shopcell", role, "--public-url", url]).map(|c| c.command) {
            Ok(Command::Serve(a)) => a.public_url,
            Ok(Command::Account(a)) => a.public_url,
            _ => None,
        };
        assert_eq!(url("serve", "https://shop.example/").as_deref(), Some("https://shop.example"));
        assert_eq!(url("account", "http://10.0.0.5:8081").as_deref(), Some("http://10.0.0.5:8081"));
        assert_eq!(url("serve", "ftp://shop.example"), None);
        assert_eq!(url("account", "shop.example"), None);
    }

    #[test]
    fn the_refresh_grace_is_ten_seconds_unless_set_and_at_most_a_minute() {
        let grace = |args: &[&str]| match Cli::try_parse_from(args).map(|c| c.command) {
            Ok(Command::Serve(a)) => Ok(a.sessions.refresh_grace),
            Ok(Command::Account(a)) => Ok(a.sessions.refresh_grace),
            Ok(_) => unreachable!(),
            Err(e) => Err(e.to_string()),
        };
        assert_eq!(grace(&["shopcell", "serve"]), Ok(Duration::from_secs(10)));
        assert_eq!(grace(&["shopcell", "account", "--refresh-grace", "0s"]), Ok(Duration::ZERO));
        assert_eq!(grace(&["shopcell", "serve", "--refresh-grace", "1m"]), Ok(Duration::from_secs(60)));
        let long = grace(&["shopcell", "serve", "--refresh-grace", "61s"]).unwrap_err();
        assert!(long.contains("at most 60s"), "{long}");
    }
}

/// The outbound client: calls to URLs merchants give (webhooks, downloads), `docs/outbound.md`.
#[derive(Args, Debug, Clone, Default)]
pub struct OutboundArgs {
    /// A host outbound calls may reach whatever its addresses (loopback, private network), over
    /// plain http too: `HOST` (any port) or `HOST:PORT`, exact, repeatable or comma-separated.
    #[arg(long = "outbound-allow", env = "SHOPCELL_OUTBOUND_ALLOW", value_delimiter = ',', value_name = "HOST[:PORT]")]
    pub outbound_allow: Vec<String>,
    /// A PEM file of root certificates trusted for outbound https besides the public ones
    /// (repeatable).
    #[arg(long = "outbound-ca", env = "SHOPCELL_OUTBOUND_CA", value_name = "FILE")]
    pub outbound_ca: Vec<PathBuf>,
    /// Longest wait to resolve a host, to connect, and for the TLS handshake, e.g. `5s` [default: 5s].
    #[arg(long, env = "SHOPCELL_OUTBOUND_CONNECT_TIMEOUT", value_parser = humantime::parse_duration)]
    pub outbound_connect_timeout: Option<std::time::Duration>,
    /// Longest an outbound call may take in all, redirects and answer included, e.g. `15s`
    /// [default: 15s].
    #[arg(long, env = "SHOPCELL_OUTBOUND_TIMEOUT", value_parser = humantime::parse_duration)]
    pub outbound_timeout: Option<std::time::Duration>,
    /// Largest answer body an outbound call reads, in bytes; a larger one fails the call
    /// [default: 1048576].
    #[arg(long, env = "SHOPCELL_OUTBOUND_MAX_RESPONSE", value_name = "BYTES")]
    pub outbound_max_response: Option<usize>,
}

impl OutboundArgs {
    /// The client settings: the flags given, the defaults of [`crate::outbound::OutboundConfig`] for
    /// the rest.
    pub fn config(&self) -> crate::outbound::OutboundConfig {
        let default = crate::outbound::OutboundConfig::default();
        crate::outbound::OutboundConfig {
            allow: self.outbound_allow.clone(),
            ca_files: self.outbound_ca.clone(),
            connect_timeout: self.outbound_connect_timeout.unwrap_or(default.connect_timeout),
            total_timeout: self.outbound_timeout.unwrap_or(default.total_timeout),
            max_response_bytes: self.outbound_max_response.unwrap_or(default.max_response_bytes),
        }
    }
}
