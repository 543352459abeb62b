//! `shopcell admin …`: operator commands.

use hyper::Method;

use crate::account::AccountService;
use crate::account::keys::read_service_key;
use crate::account::passwords::AdminReset;
use crate::account::provisioning::CreatedUser;
use crate::cells::product_search;
use crate::cli::{AdminCommand, TaxonomyCommand};
use crate::clock::Clock;
use crate::error::BoxError;
use crate::http::upstream::{Body, Upstream};
use crate::run::account_dir;
use crate::storage::{self};

pub async fn run(cmd: AdminCommand) -> Result<(), BoxError> {
    match cmd {
        AdminCommand::MoveStore { service, store, to, chunk_bytes } => {
            let up = Upstream::new(&service.url, &read_service_key(&service.key_file())?);
            let body = Body::json(&serde_json::json!({ "storeId": store, "to": to, "chunkBytes": chunk_bytes }))?;
            let answer: serde_json::Value = up.call(Method::POST, "/internal/v1/moves", body).await?;
            println!("{answer}");
            Ok(())
        }
        AdminCommand::ReopenStore { service, store } => {
            let up = Upstream::new(&service.url, &read_service_key(&service.key_file())?);
            let path = format!("/internal/v1/closed-stores/{store}/reopen");
            let answer: serde_json::Value = up.call(Method::POST, &path, Body::Empty).await?;
            println!("{answer}");
            Ok(())
        }
        AdminCommand::ResetPassword { email, url, password_stdin, public_url, service_key_file, data } => {
            let password = if password_stdin { Some(read_password()?) } else { None };
            let done = match url {
                Some(url) => {
                    let key_file = service_key_file.unwrap_or_else(|| account_dir(&data).join("service.key"));
                    let up = Upstream::new(&url, &read_service_key(&key_file)?);
                    let body = Body::json(&serde_json::json!({ "email": email, "password": password }))?;
                    up.call(Method::POST, "/internal/v1/users/reset-password", body).await?
                }
                None => reset_password_offline(&data, &email, password, public_url.as_deref()).await?,
            };
            println!("user {}: sessions ended: {}", done.user_id, done.sessions_ended);
            match done.reset_url {
                Some(url) => println!("one-use reset link (valid 1 h): {url}"),
                None => println!("password set"),
            }
            Ok(())
        }
        AdminCommand::CreateUser { email, name, url, password_stdin, service_key_file, data } => {
            let password = if password_stdin { Some(read_password()?) } else { None };
            let made: CreatedUser = match url {
                Some(url) => {
                    let key_file = service_key_file.unwrap_or_else(|| account_dir(&data).join("service.key"));
                    let up = Upstream::new(&url, &read_service_key(&key_file)?);
                    let body = Body::json(&serde_json::json!({ "email": email, "name": name, "password": password }))?;
                    up.call(Method::POST, "/internal/v1/users", body).await?
                }
                None => {
                    let account = open_account_offline(&data, None)?;
                    let made = account.create_user(&email, &name, password).await;
                    account.close();
                    made.map_err(|e| e.message)?
                }
            };
            println!("user {} created: {}", made.user_id, made.email);
            if let Some(p) = made.generated_password {
                println!("password (shown once): {p}");
            }
            Ok(())
        }
        AdminCommand::Backup { service, to } => {
            let key = read_service_key(&service.key_file())?;
            let report = crate::backup::client::backup(&service.url, &key, &to).await?;
            let m = &report.manifest;
            for entry in &m.files {
                let rows: u64 = entry.tables.iter().flatten().map(|(_, n)| n).sum();
                match &entry.kind {
                    Some(kind) => println!("{}: {kind} database, {rows} rows, {} bytes", entry.path, entry.bytes),
                    None => println!("{}: {} bytes", entry.path, entry.bytes),
                }
            }
            println!(
                "backup of {} written to {} in {:.1} s (writers held {} µs at the cut)",
                m.cut_at,
                to.display(),
                report.elapsed.as_secs_f64(),
                m.held_us
            );
            Ok(())
        }
        AdminCommand::ExportStore { service, store, to } => {
            let key = read_service_key(&service.key_file())?;
            let done = crate::portable::client::export(&service.url, &key, store, &to).await?;
            let h = &done.header;
            println!(
                "store {} ({}) written to {}: {} rows, {} bytes",
                h.store_id,
                h.store_name,
                to.display(),
                done.rows,
                done.bytes
            );
            println!("members: {} · publishable keys: {}", h.members.len(), h.publishable_keys.len());
            for r in &h.to_reenter {
                println!("to re-enter where it is imported ({}): {}", r.feature, r.what);
            }
            Ok(())
        }
        AdminCommand::ImportStore { file, service, owner } => {
            let key = read_service_key(&service.key_file())?;
            let r = crate::portable::client::import(&service.url, &key, &file, owner).await?;
            let rows: u64 = r.counts.values().sum();
            println!("store {} imported into cell {}: {rows} rows, owner {}", r.store_id, r.cell, r.owner);
            for m in &r.members_joined {
                println!("member joined: {} ({})", m.email, m.role);
            }
            for m in &r.members_not_found {
                println!("member not found (no account with this email here; invite them again): {} ({})", m.email, m.role);
            }
            println!(
                "publishable keys: {} (unchanged) · webhooks disabled with new secrets: {}",
                r.publishable_keys, r.webhooks_disabled
            );
            for t in &r.to_reenter {
                println!("to re-enter ({}): {}", t.feature, t.what);
            }
            Ok(())
        }
        AdminCommand::Restore { from, data, replace } => {
            let started = std::time::Instant::now();
            let done = crate::backup::restore::restore(&from, &data, replace)?;
            if let Some(aside) = &done.kept_aside {
                println!("the directory that was there is kept as {}", aside.display());
            }
            for (cell, store) in &done.unplaced {
                println!("cell {cell}: store {store} was not placed there at the cut; its copy is dropped at start");
            }
            for (cell, n) in &done.indexed {
                println!("cell {cell}: search rebuilt, {n} products");
            }
            println!(
                "backup of {} restored into {} in {:.1} s",
                done.manifest.cut_at,
                data.display(),
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
        AdminCommand::Check { data: _, backup: Some(dir) } => check_backup(&dir),
        AdminCommand::Check { data, backup: None } => check(&data),
        AdminCommand::Reindex { data, cell } => reindex(&data, cell.as_deref()),
        AdminCommand::Compact { data, cell } => compact(&data, cell.as_deref()),
        AdminCommand::Openapi => {
            let doc = crate::http::openapi::document(&crate::api::routes());
            println!("{}", serde_json::to_string_pretty(&doc)?);
            Ok(())
        }
        AdminCommand::Taxonomy(TaxonomyCommand::Import { file, data }) => {
            let n = crate::domain::taxonomy::files::import(&file, &data)?;
            let path = crate::domain::taxonomy::files::taxonomy_path(&data);
            println!("taxonomy of {n} categories installed as {}; served from the next start", path.display());
            Ok(())
        }
    }
}

/// The new password: the first line of stdin, without its line ending.
fn read_password() -> Result<String, BoxError> {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let password = line.trim_end_matches(['\r', '\n']).to_string();
    if password.is_empty() {
        return Err("no password on stdin".into());
    }
    Ok(password)
}

/// `admin reset-password` without a running service: opens the account database under `data`
/// (refused while a process holds it), ends the user's sessions and sets `password` or makes a
/// reset link starting with `public_url`.
pub async fn reset_password_offline(
    data: &std::path::Path,
    email: &str,
    password: Option<String>,
    public_url: Option<&str>,
) -> Result<AdminReset, BoxError> {
    let account = open_account_offline(data, public_url)?;
    let done = account.admin_reset_password(email, password).await;
    account.close();
    Ok(done.map_err(|e| e.message)?)
}

/// The account service of a stopped data directory, for an offline operator command (refused
/// while a process holds it). Close it when done.
fn open_account_offline(data: &std::path::Path, public_url: Option<&str>) -> Result<AccountService, BoxError> {
    let dir = account_dir(data);
    if !dir.join("account.redb").exists() {
        return Err(format!("no account database under {}", dir.display()).into());
    }
    let shares = crate::memory::Shares::of_one_cell(64 << 20).account;
    let account = AccountService::open(&dir, Clock::system(), &shares)
        .map_err(|e| format!("{}: {e} (is a process serving it? use --url, or stop it first)", dir.display()))?
        .with_public_url(public_url);
    Ok(account)
}

fn check(data: &std::path::Path) -> Result<(), BoxError> {
    let account = account_dir(data).join("account.redb");
    if account.exists() {
        let db = storage::open(&account, crate::account::DATABASE, crate::storage::ONE_OFF_CACHE)?;
        println!("{}: account, format {}, tables {:?}", account.display(), storage::FORMAT_VERSION, storage::table_names(&db)?);
    }
    let cells = data.join("cells");
    if cells.exists() {
        for entry in std::fs::read_dir(&cells)? {
            let path = entry?.path().join("cell.redb");
            if path.exists() {
                let db = storage::open(&path, crate::cells::DATABASE, crate::storage::ONE_OFF_CACHE)?;
                println!("{}: cell, format {}, tables {:?}", path.display(), storage::FORMAT_VERSION, storage::table_names(&db)?);
                report_recount(&path, &redb::ReadableDatabase::begin_read(&db)?)?;
            }
        }
    }
    if account.exists() {
        let cells = match cell_names(data, None) {
            Ok(names) => names.into_iter().map(|n| (n.clone(), crate::run::cell_dir(data, &n).join("cell.redb"))).collect(),
            Err(_) => Default::default(),
        };
        report_placement(&account, &cells)?;
    }
    Ok(())
}

/// Verifies the backup in `dir`: manifest, checksums, rows, placement.
fn check_backup(dir: &std::path::Path) -> Result<(), BoxError> {
    let manifest = crate::backup::manifest::verify(dir)?;
    println!(
        "{}: backup of {}, backup format {}, data format {}, {} files match their checksums and row counts",
        dir.display(),
        manifest.cut_at,
        manifest.backup_format,
        manifest.data_format,
        manifest.files.len()
    );
    if manifest.backup_format == 1 {
        // The backup holds the redb files themselves.
        let (account, cells) = crate::backup::restore::databases(dir, &manifest)?;
        return check_databases(&account, &cells);
    }
    // Its rows are built into redb files beside it, checked, and removed.
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "backup".into());
    let scratch = dir.with_file_name(format!(".{name}.checking-{}", std::process::id()));
    let checked = crate::backup::restore::materialize(dir, &manifest, &scratch)
        .and_then(|(account, cells)| check_databases(&account, &cells));
    let _ = std::fs::remove_dir_all(&scratch);
    checked
}

/// Each cell's counters against its rows, then placement.
fn check_databases(
    account: &std::path::Path,
    cells: &std::collections::BTreeMap<String, std::path::PathBuf>,
) -> Result<(), BoxError> {
    for file in cells.values() {
        let db = redb::ReadOnlyDatabase::open(file).map_err(|e| format!("{}: {e}", file.display()))?;
        report_recount(file, &redb::ReadableDatabase::begin_read(&db)?)?;
    }
    report_placement(account, cells)
}

/// Fails when a counter of the cell `file` disagrees with its rows.
fn report_recount(file: &std::path::Path, txn: &redb::ReadTransaction) -> Result<(), BoxError> {
    let wrong = crate::cells::recount::recount(txn).map_err(|e| format!("{}: {}", file.display(), e.message))?;
    if !wrong.is_empty() {
        return Err(format!("{}: {}", file.display(), wrong.join("; ")).into());
    }
    println!("{}: every counter agrees with its rows", file.display());
    Ok(())
}

/// Prints whether the directory and the cells agree on each store's place; a store placed in
/// a cell that does not hold it fails the check.
fn report_placement(
    account: &std::path::Path,
    cells: &std::collections::BTreeMap<String, std::path::PathBuf>,
) -> Result<(), BoxError> {
    let p = crate::backup::restore::placement(account, cells)?;
    for (cell, store) in &p.unplaced {
        println!("cell {cell} holds store {store}, which the directory does not place there (dropped at its next start)");
    }
    if !p.problems.is_empty() {
        return Err(p.problems.join("; ").into());
    }
    println!("directory and cells agree on the place of {} stores", p.placed);
    Ok(())
}

/// The cells under `data` (or `only`, which must exist), by name.
fn cell_names(data: &std::path::Path, only: Option<&str>) -> Result<Vec<String>, BoxError> {
    let cells = data.join("cells");
    let names: Vec<String> = match only {
        Some(name) => vec![name.to_string()],
        None => {
            let mut names = Vec::new();
            if cells.exists() {
                for entry in std::fs::read_dir(&cells)? {
                    let entry = entry?;
                    if entry.path().join("cell.redb").exists() {
                        names.push(entry.file_name().to_string_lossy().into_owned());
                    }
                }
            }
            names.sort();
            names
        }
    };
    if names.is_empty() {
        return Err(format!("no cells under {}", cells.display()).into());
    }
    for name in &names {
        if !crate::run::cell_dir(data, name).join("cell.redb").exists() {
            return Err(format!("no cell {name:?} under {}", cells.display()).into());
        }
    }
    Ok(names)
}

/// Rebuilds the search index of each cell under `data` (or of `only`) from its `cell.redb`.
fn reindex(data: &std::path::Path, only: Option<&str>) -> Result<(), BoxError> {
    for name in cell_names(data, only)? {
        let dir = crate::run::cell_dir(data, &name);
        let n = product_search::reindex_offline(&dir)?;
        println!("{name}: search index rebuilt, {n} products");
    }
    Ok(())
}

/// Compacts the account database (unless one cell is named) and each cell's database, printing
/// each file's size before and after.
fn compact(data: &std::path::Path, only: Option<&str>) -> Result<(), BoxError> {
    let mut files = Vec::new();
    let account = account_dir(data).join("account.redb");
    if only.is_none() && account.exists() {
        files.push((account, crate::account::DATABASE));
    }
    for name in cell_names(data, only)? {
        files.push((crate::run::cell_dir(data, &name).join("cell.redb"), crate::cells::DATABASE));
    }
    for (path, kind) in files {
        let before = std::fs::metadata(&path)?.len();
        let mut db = storage::open(&path, kind, crate::storage::ONE_OFF_CACHE)
            .map_err(|e| format!("{}: {e} (is a process serving it? stop it first)", path.display()))?;
        // Each pass moves pages towards the start of the file; repeat until nothing moves.
        while db.compact().map_err(|e| format!("{}: {e}", path.display()))? {}
        drop(db);
        let after = std::fs::metadata(&path)?.len();
        println!("{}: {} → {}", path.display(), crate::memory::human(before), crate::memory::human(after));
    }
    Ok(())
}
