//! `shopcell admin …`: operator commands.

use hyper::Method;

use crate::account::keys::read_service_key;
use crate::cells::forward::{Body, Upstream};
use crate::cli::AdminCommand;
use crate::run::{BoxError, account_dir};
use crate::storage::{self, DbKind};

pub async fn run(cmd: AdminCommand) -> Result<(), BoxError> {
    match cmd {
        AdminCommand::MoveStore { url, store, to, service_key_file, data } => {
            let key_file = service_key_file.unwrap_or_else(|| account_dir(&data).join("service.key"));
            let key = read_service_key(&key_file)?;
            let up = Upstream::new(&url, &key);
            let body = Body::json(&serde_json::json!({ "storeId": store, "to": to }))?;
            let answer: serde_json::Value = up.call(Method::POST, "/internal/v1/moves", body).await?;
            println!("{answer}");
            Ok(())
        }
        AdminCommand::Check { data } => check(&data),
    }
}

fn check(data: &std::path::Path) -> Result<(), BoxError> {
    let account = account_dir(data).join("account.redb");
    if account.exists() {
        let db = storage::open(&account, DbKind::Account)?;
        println!("{}: account, format {}, tables {:?}", account.display(), storage::FORMAT_VERSION, storage::table_names(&db)?);
    }
    let cells = data.join("cells");
    if cells.exists() {
        for entry in std::fs::read_dir(&cells)? {
            let path = entry?.path().join("cell.redb");
            if path.exists() {
                let db = storage::open(&path, DbKind::Cell)?;
                println!("{}: cell, format {}, tables {:?}", path.display(), storage::FORMAT_VERSION, storage::table_names(&db)?);
            }
        }
    }
    Ok(())
}
