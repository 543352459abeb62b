//! Builds the process for each role and runs it. Tests and benchmarks start servers through
//! [`spawn`], exactly as `main` does through [`serve_until_signal`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::account::AccountService;
use crate::account::directory::DirectoryLink;
use crate::account::keys::{public_keys_from_jwks, read_service_key};
use crate::account::oidc::Social;
use crate::cells::Cell;
use crate::cells::payments;
use crate::cli::{
    AccountArgs, AccountOptions, AuthArgs, CellArgs, CellOptions, MailArgs, MemoryArgs, OutboundArgs, RouterArgs, ServeArgs,
};
use crate::clock::Clock;
use crate::error::BoxError;
use crate::http::auth::TokenVerifier;
use crate::http::cors::Cors;
use crate::http::forwarded::TrustedProxies;
use crate::http::ratelimit::RateLimits;
use crate::http::upstream::{Body, Upstream};
use crate::mail::Mailer;
use crate::memory::{Budget, CellShares, Shares, human};
use crate::node::{Mode, Node};

fn valid_cell_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn open_cells(
    data: &Path,
    names: &[String],
    options: &CellOptions,
    mailer: &Mailer,
    memory: &CellShares,
    clock: &Clock,
) -> Result<BTreeMap<String, Arc<Cell>>, BoxError> {
    let (caches, retention) = (&options.caches, &options.retention);
    let providers = crate::payments::Providers::from_args(&options.payments)?;
    let outbound = crate::outbound::Outbound::new(options.outbound.config(), Arc::new(crate::outbound::SystemResolver))?;
    let mut cells = BTreeMap::new();
    for name in names {
        if !valid_cell_name(name) {
            return Err(format!("invalid cell name {name:?}: use letters, digits, - and _").into());
        }
        let mut cell =
            payments::with_payments(Cell::open(name, &cell_dir(data, name), clock.clone(), memory)?, providers.clone())
                .with_outside(outbound.clone(), mailer.clone());
        cell.abandoned_after_ms = i64::try_from(retention.checkout_abandoned_after.as_millis()).unwrap_or(i64::MAX);
        cell.search.answers.set_enabled(caches.answer_cache);
        cell.pages.set_enabled(caches.answer_cache);
        let cell = Arc::new(cell);
        // In the background: readiness does not wait for the warm-up.
        cell.warm();
        cells.insert(name.clone(), cell);
    }
    Ok(cells)
}

/// Creates the data directory when absent (0700, by the process's umask) and checks that this
/// user can write in it, naming it: a later failure deep in a database open would not say which
/// path was wrong.
pub fn prepare_data_dir(data: &Path) -> Result<(), BoxError> {
    std::fs::create_dir_all(data).map_err(|e| format!("cannot create the data directory {}: {e}", data.display()))?;
    let probe = data.join(".shopcell-write-check");
    std::fs::write(&probe, b"")
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| format!("cannot write in the data directory {}: {e}", data.display()))?;
    Ok(())
}

pub fn account_dir(data: &Path) -> PathBuf {
    data.join("account")
}

pub fn cell_dir(data: &Path, name: &str) -> PathBuf {
    data.join("cells").join(name)
}

/// Serves the taxonomy imported into `data` (`taxonomy.json`), when there is one.
fn load_taxonomy(node: &Node, data: &Path) -> Result<(), BoxError> {
    let taxonomy = crate::domain::taxonomy::files::load(data)?;
    if let Ok(mut t) = node.taxonomy.write() {
        *t = taxonomy;
    }
    Ok(())
}

/// `shopcell serve`: account, router and cells in one process, on the system clock.
pub fn build_serve(args: &ServeArgs) -> Result<Node, BoxError> {
    build_serve_with_clock(args, Clock::system())
}

/// `shopcell serve` with every "now" of the process read from `clock` (tests move it).
pub fn build_serve_with_clock(args: &ServeArgs, clock: Clock) -> Result<Node, BoxError> {
    if args.cells.is_empty() {
        return Err("at least one cell is needed".into());
    }
    if args.demo {
        crate::demo::refuse_unless_empty(&args.data)?;
    }
    prepare_data_dir(&args.data)?;
    let (budget, shares) = divide_memory(&args.memory, args.cells.len())?;
    let mailer = mailer(&args.cell.mail, &args.data, &args.cell.outbound)?;
    let account = Arc::new(open_account(&args.data, &args.account, &mailer, &shares, &clock)?);
    let verifier = TokenVerifier::new(vec![account.key.public_key()], clock.clone());
    let cells = open_cells(&args.data, &args.cells, &args.cell, &mailer, &shares.cell, &clock)?;
    if !args.jobs_paused {
        start_jobs(Some(&account), &cells)?;
    }
    let key = account.service_key.clone();
    let directory = DirectoryLink::Local(account);
    let mut node = Node::new(Mode::Serve, crate::api::routes(), verifier, directory, cells, BTreeMap::new(), key, clock)?;
    node.memory = Some(budget);
    node.closed_store_grace = args.cell.retention.closed_store_grace;
    load_taxonomy(&node, &args.data)?;
    node.connections = args.connections.limits();
    node.metrics_listen = args.connections.metrics_listen;
    Ok(with_auth(node, &args.account.auth))
}

/// `shopcell account`.
pub fn build_account(args: &AccountArgs) -> Result<Node, BoxError> {
    let clock = Clock::system();
    prepare_data_dir(&args.data)?;
    // The directory alone: the account service's share, and no cell.
    let (budget, shares) = divide_memory(&args.memory, 0)?;
    let mailer = mailer(&args.mail, &args.data, &args.outbound)?;
    let account = Arc::new(open_account(&args.data, &args.account, &mailer, &shares, &clock)?);
    account.start_jobs()?;
    let verifier = TokenVerifier::new(vec![account.key.public_key()], clock.clone());
    let key = account.service_key.clone();
    let remote = args.cells.iter().map(|(n, u)| (n.clone(), Upstream::new(u, &key))).collect();
    let directory = DirectoryLink::Local(account);
    let mut node = Node::new(Mode::Account, crate::api::routes(), verifier, directory, BTreeMap::new(), remote, key, clock)?;
    node.memory = Some(budget);
    load_taxonomy(&node, &args.data)?;
    node.connections = args.connections.limits();
    node.metrics_listen = args.connections.metrics_listen;
    Ok(with_auth(node, &args.account.auth))
}

/// `shopcell cell`: fetches the token issuer's public keys from the account service.
pub async fn build_cell(args: &CellArgs) -> Result<Node, BoxError> {
    let clock = Clock::system();
    prepare_data_dir(&args.data)?;
    let key = read_service_key(&args.service_key_file)?;
    let account = Upstream::new(&args.account, &key);
    let verifier = TokenVerifier::new(fetch_keys(&account).await?, clock.clone());
    let (budget, shares) = divide_memory(&args.memory, 1)?;
    let mailer = mailer(&args.cell.mail, &args.data, &args.cell.outbound)?;
    let cells = open_cells(&args.data, std::slice::from_ref(&args.name), &args.cell, &mailer, &shares.cell, &clock)?;
    start_jobs(None, &cells)?;
    let directory = DirectoryLink::remote(account);
    let mut node = Node::new(Mode::Cell, crate::api::routes(), verifier, directory, cells, BTreeMap::new(), key, clock)?;
    node.memory = Some(budget);
    node.closed_store_grace = args.cell.retention.closed_store_grace;
    node.connections = args.connections.limits();
    node.metrics_listen = args.connections.metrics_listen;
    load_taxonomy(&node, &args.data)?;
    Ok(node)
}

/// `shopcell router`.
pub fn build_router(args: &RouterArgs) -> Result<Node, BoxError> {
    let key = read_service_key(&args.service_key_file)?;
    let account = Upstream::new(&args.account, &key);
    let remote = args.cells.iter().map(|(n, u)| (n.clone(), Upstream::new(u, &key))).collect();
    let clock = Clock::system();
    let verifier = TokenVerifier::new(Vec::new(), clock.clone());
    let directory = DirectoryLink::remote(account);
    let mut node = Node::new(Mode::Router, crate::api::routes(), verifier, directory, BTreeMap::new(), remote, key, clock)?;
    node.connections = args.connections.limits();
    node.metrics_listen = args.connections.metrics_listen;
    Ok(with_auth(node, &args.auth))
}

/// The plan catalogue: the `--plans` file, or the built-in one.
fn plans(path: Option<&Path>) -> Result<crate::account::plans::Catalogue, BoxError> {
    match path {
        Some(p) => Ok(crate::account::plans::Catalogue::load(p)?),
        None => Ok(crate::account::plans::Catalogue::default()),
    }
}

/// The `--memory` budget (or the machine's default) divided among the account service and
/// `cells` cells, printed with where it came from.
fn divide_memory(args: &MemoryArgs, cells: usize) -> Result<(Budget, Shares), BoxError> {
    let budget = Budget::choose(args.memory.as_deref())?;
    let shares = budget.divide(cells)?;
    let per_cell = if cells > 0 { format!(", {} per cell", human(shares.cell.total())) } else { String::new() };
    println!("shopcell memory budget {} ({}){per_cell}", human(budget.bytes), budget.origin);
    Ok((budget, shares))
}

/// Opens the account service with its social sign-in configuration.
/// Starts the job runners of the directory (when this process hosts it) and of every cell.
fn start_jobs(account: Option<&Arc<AccountService>>, cells: &BTreeMap<String, Arc<Cell>>) -> std::io::Result<()> {
    if let Some(a) = account {
        a.start_jobs()?;
    }
    cells.values().try_for_each(|c| c.start_jobs())
}

/// The process's mailer: `--smtp-url`, or `.eml` files under `<data>/mail`; the operator's
/// `--outbound-ca` roots are trusted for the SMTP server too.
fn mailer(mail: &MailArgs, data: &Path, outbound: &OutboundArgs) -> Result<Mailer, BoxError> {
    Ok(Mailer::new(mail.config(data, outbound.outbound_ca.clone()))?)
}

fn open_account(
    data: &Path,
    options: &AccountOptions,
    mailer: &Mailer,
    shares: &Shares,
    clock: &Clock,
) -> Result<AccountService, BoxError> {
    let mut account = AccountService::open(&account_dir(data), clock.clone(), &shares.account)?
        .with_mailer(mailer.clone())
        .with_plans(plans(options.plans.as_deref())?)
        .with_public_url(options.public_url.as_deref());
    account.social = Social::load(options.auth.oidc_config.as_deref())?;
    account.signup = options.signup;
    account.refresh_grace = options.sessions.refresh_grace;
    Ok(account)
}

/// Applies the flags every HTTP-facing role shares: CORS origins, rate limits, trusted proxies.
fn with_auth(mut node: Node, auth: &AuthArgs) -> Node {
    node.cors = Cors::new(&auth.cors_origins);
    node.limits = RateLimits::new(auth.rate_per_account, auth.rate_per_address, auth.rate_register);
    node.proxies = TrustedProxies::new(auth.trusted_proxies.clone());
    node
}

/// Reads the JWKS of the account service, waiting for it to come up (30 s at most).
async fn fetch_keys(account: &Upstream) -> Result<Vec<crate::http::auth::PublicKey>, BoxError> {
    let mut last = String::new();
    for _ in 0..60 {
        match account.call::<serde_json::Value>(Method::GET, "/.well-known/jwks.json", Body::Empty).await {
            Ok(jwks) => {
                let keys = public_keys_from_jwks(&jwks);
                if !keys.is_empty() {
                    return Ok(keys);
                }
                last = "the JWKS has no RSA key".into();
            }
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(format!("could not read the account service's keys from {}: {last}", account.base).into())
}

/// A server running in this process.
pub struct Running {
    pub addr: SocketAddr,
    /// Where `--metrics-listen` serves `/metrics`, when given.
    pub metrics_addr: Option<SocketAddr>,
    pub node: Arc<Node>,
    metrics: Option<JoinHandle<()>>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Running {
    pub fn url(&self) -> String {
        crate::server::url(self.addr)
    }

    /// Shuts down gracefully and waits until every writer has stopped.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        if let Some(m) = self.metrics.take() {
            m.abort();
        }
    }
}

/// What every role does once its node is built and its port bound: registers the node's metric
/// sources, starts the `--metrics-listen` listener (its address and task) and the sweeps, and
/// sets the base of links in mail.
async fn start(node: Node, addr: SocketAddr) -> Result<(Arc<Node>, Option<(SocketAddr, JoinHandle<()>)>), BoxError> {
    default_public_url(&node, addr);
    crate::metrics::sources::register(&node);
    let metrics = match node.metrics_listen {
        Some(listen) => {
            let listener = bind(listen).await.map_err(|e| format!("--metrics-listen: {e}"))?;
            Some((listener.local_addr()?, listener))
        }
        None => None,
    };
    let node = Arc::new(node);
    crate::node::closing::spawn_sweeps(&node);
    crate::node::owners::attach(&node, &public_url(&node, addr));
    let metrics = metrics.map(|(addr, l)| (addr, tokio::spawn(crate::metrics::listener::run(node.clone(), l))));
    Ok((node, metrics))
}

/// Binds `listen`; the error names the address ("address already in use" alone does not say which).
pub async fn bind(listen: SocketAddr) -> Result<TcpListener, BoxError> {
    TcpListener::bind(listen).await.map_err(|e| format!("cannot listen on {listen}: {e}").into())
}

/// The base of links in mail: the account service's (`--public-url`, or the URL it listens on),
/// else the URL this process listens on.
fn public_url(node: &Node, addr: SocketAddr) -> String {
    node.account.as_ref().map(|a| a.public_url().to_string()).unwrap_or_else(|| crate::server::url(addr))
}

/// Without `--public-url`, links in mail start with the URL the process listens on (the one it
/// prints): known only once the address is bound (`--listen` may name port 0).
fn default_public_url(node: &Node, addr: SocketAddr) {
    if let Some(a) = &node.account {
        a.default_public_url(&crate::server::url(addr));
    }
}

/// Binds `listen` and serves `node` until [`Running::stop`].
pub async fn spawn(node: Node, listen: SocketAddr) -> Result<Running, BoxError> {
    let listener = bind(listen).await?;
    let addr = listener.local_addr()?;
    let (node, metrics) = start(node, addr).await?;
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(crate::server::run(node.clone(), listener, async move {
        let _ = stopped.await;
    }));
    let (metrics_addr, metrics) = metrics.unzip();
    Ok(Running { addr, metrics_addr, node, metrics, stop: Some(stop), task: Some(task) })
}

/// Seeds the demo store when `demo` (`serve --demo`), prints the URL (and the demo merchant's
/// password), and serves on `listener` (bound with [`bind`] before `node` was built, so an
/// address in use leaves the data directory untouched) until Ctrl-C or SIGTERM.
pub async fn serve_until_signal(node: Node, listener: TcpListener, what: &str, demo: bool) -> Result<(), BoxError> {
    let addr = listener.local_addr()?;
    // Before accepting: nobody sees the store half made.
    let seeded = if demo { Some(crate::demo::seed(&node).await?) } else { None };
    let (node, metrics) = start(node, addr).await?;
    println!("shopcell {what} listening on {}", crate::server::url(addr));
    if let Some(d) = seeded {
        println!("{}", d.announce(&crate::server::url(addr)));
    }
    tracing::info!(%addr, mode = what, "listening");
    if let Some((metrics_addr, _)) = &metrics {
        println!("shopcell metrics on {}/metrics", crate::server::url(*metrics_addr));
    }
    crate::server::run(node, listener, crate::server::shutdown_signal()).await;
    if let Some((_, task)) = metrics {
        task.abort();
    }
    Ok(())
}
