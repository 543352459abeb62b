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
use crate::account::keys::{public_keys_from_jwks, read_service_key};
use crate::cells::Cell;
use crate::cells::forward::{Body, Upstream};
use crate::cli::{AccountArgs, CellArgs, RouterArgs, ServeArgs};
use crate::http::auth::TokenVerifier;
use crate::node::{Mode, Node};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn valid_cell_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn open_cells(data: &Path, names: &[String]) -> Result<BTreeMap<String, Arc<Cell>>, BoxError> {
    let mut cells = BTreeMap::new();
    for name in names {
        if !valid_cell_name(name) {
            return Err(format!("invalid cell name {name:?}: use letters, digits, - and _").into());
        }
        let cell = Cell::open(name, &cell_dir(data, name))?;
        cells.insert(name.clone(), Arc::new(cell));
    }
    Ok(cells)
}

pub fn account_dir(data: &Path) -> PathBuf {
    data.join("account")
}

pub fn cell_dir(data: &Path, name: &str) -> PathBuf {
    data.join("cells").join(name)
}

/// `shopcell serve`: account, router and cells in one process.
pub fn build_serve(args: &ServeArgs) -> Result<Node, BoxError> {
    if args.cells.is_empty() {
        return Err("at least one cell is needed".into());
    }
    let account = Arc::new(AccountService::open(&account_dir(&args.data))?);
    let verifier = TokenVerifier::new(vec![account.key.public_key()]);
    let cells = open_cells(&args.data, &args.cells)?;
    let key = account.service_key.clone();
    Ok(Node::new(Mode::Serve, crate::api::routes(), verifier, Some(account), None, cells, BTreeMap::new(), key)?)
}

/// `shopcell account`.
pub fn build_account(args: &AccountArgs) -> Result<Node, BoxError> {
    let account = Arc::new(AccountService::open(&account_dir(&args.data))?);
    let verifier = TokenVerifier::new(vec![account.key.public_key()]);
    let key = account.service_key.clone();
    let remote = args.cells.iter().map(|(n, u)| (n.clone(), Upstream::new(u, &key))).collect();
    Ok(Node::new(Mode::Account, crate::api::routes(), verifier, Some(account), None, BTreeMap::new(), remote, key)?)
}

/// `shopcell cell`: fetches the token issuer's public keys from the account service.
pub async fn build_cell(args: &CellArgs) -> Result<Node, BoxError> {
    let key = read_service_key(&args.service_key_file)?;
    let account = Upstream::new(&args.account, &key);
    let verifier = TokenVerifier::new(fetch_keys(&account).await?);
    let cells = open_cells(&args.data, std::slice::from_ref(&args.name))?;
    Ok(Node::new(Mode::Cell, crate::api::routes(), verifier, None, Some(account), cells, BTreeMap::new(), key)?)
}

/// `shopcell router`.
pub fn build_router(args: &RouterArgs) -> Result<Node, BoxError> {
    let key = read_service_key(&args.service_key_file)?;
    let account = Upstream::new(&args.account, &key);
    let remote = args.cells.iter().map(|(n, u)| (n.clone(), Upstream::new(u, &key))).collect();
    let verifier = TokenVerifier::new(Vec::new());
    Ok(Node::new(Mode::Router, crate::api::routes(), verifier, None, Some(account), BTreeMap::new(), remote, key)?)
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
    pub node: Arc<Node>,
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
    }
}

/// Binds `listen` and serves `node` until [`Running::stop`].
pub async fn spawn(node: Node, listen: SocketAddr) -> Result<Running, BoxError> {
    let listener = TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    let node = Arc::new(node);
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(crate::server::run(node.clone(), listener, async move {
        let _ = stopped.await;
    }));
    Ok(Running { addr, node, stop: Some(stop), task: Some(task) })
}

/// Binds `listen`, prints the URL, and serves until Ctrl-C or SIGTERM.
pub async fn serve_until_signal(node: Node, listen: SocketAddr, what: &str) -> Result<(), BoxError> {
    let listener = TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    println!("shopcell {what} listening on {}", crate::server::url(addr));
    tracing::info!(%addr, mode = what, "listening");
    crate::server::run(Arc::new(node), listener, crate::server::shutdown_signal()).await;
    Ok(())
}
