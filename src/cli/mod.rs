//! The command line: one binary, one subcommand per role, and operator commands.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use crate::account::provisioning::Signup;
pub use admin::{AdminCommand, ServiceCall, TaxonomyCommand};

mod admin;
#[cfg(test)]
mod tests;

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
    /// Names of the cells to run (comma-separated).
    #[arg(long, env = "SHOPCELL_CELLS", value_delimiter = ',', default_value = "cell-1")]
    pub cells: Vec<String>,
    /// On an empty or absent data directory: create a merchant (password printed once) and a
    /// demo store of a few hundred products. Refused on a directory that holds anything.
    #[arg(long)]
    pub demo: bool,
    /// What the process's account service takes: its public URL, sign-up, sessions, sign-in,
    /// plans.
    #[command(flatten)]
    pub account: AccountOptions,
    /// Connection limits (idle and body timeouts, caps) and the metrics listener.
    #[command(flatten)]
    pub connections: ConnectionArgs,
    /// What the process's cells take: payments, caches, retention, outbound calls, mail.
    #[command(flatten)]
    pub cell: CellOptions,
    /// The memory budget.
    #[command(flatten)]
    pub memory: MemoryArgs,
    /// Runs no background jobs (deliveries, mail): they wait in the database for a start without
    /// it. For benchmarks that measure what a write costs on its own.
    #[arg(long, hide = true)]
    pub jobs_paused: bool,
}

/// The options of the account service a process runs: `serve` and `account` take the same.
#[derive(Args, Debug, Clone, Default)]
pub struct AccountOptions {
    /// The base of links in mail (password resets, invitations): an http or https URL; default:
    /// the URL this process prints once it listens.
    #[arg(long, env = "SHOPCELL_PUBLIC_URL", value_parser = crate::account::links::parse_public_url)]
    pub public_url: Option<String>,
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
    /// JSON file with the platform plan catalogue (see `docs/plans.md`, "Plans"); the built-in free,
    /// basic and pro plans when absent.
    #[arg(long, env = "SHOPCELL_PLANS")]
    pub plans: Option<PathBuf>,
}

/// The options of the cells a process runs: `serve` and `cell` take the same.
#[derive(Args, Debug, Clone, Default)]
pub struct CellOptions {
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
}

#[derive(Args, Debug, Clone)]
pub struct AccountArgs {
    /// Data directory (created 0700 when absent); the directory lives in `account/`.
    #[arg(long, env = "SHOPCELL_DATA", default_value = "./shopcell-data")]
    pub data: PathBuf,
    /// Address to listen on, `HOST:PORT`; a host name is resolved (IPv4 first).
    #[arg(long, env = "SHOPCELL_LISTEN", default_value = "127.0.0.1:8081", value_parser = parse_listen)]
    pub listen: SocketAddr,
    /// A cell stores can be placed in, as NAME=URL (repeat for each cell, or comma-separate).
    #[arg(long = "cell", env = "SHOPCELL_CELL_URLS", value_delimiter = ',', value_parser = parse_named_url)]
    pub cells: Vec<(String, String)>,
    /// Its public URL, sign-up, sessions, sign-in, plans.
    #[command(flatten)]
    pub account: AccountOptions,
    /// Connection limits (idle and body timeouts, caps) and the metrics listener.
    #[command(flatten)]
    pub connections: ConnectionArgs,
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
    /// What the process's cells take: payments, caches, retention, outbound calls, mail.
    #[command(flatten)]
    pub cell: CellOptions,
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
    /// while what it shows is unchanged (`docs/search.md`, "Answer cache"); `false` computes
    /// every answer afresh.
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
