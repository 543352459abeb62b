//! The account service's side of a portable store: it owns placement and the directory, so it
//! runs both ends, relaying rows between the caller and the cell that holds (or receives) the
//! store, in this process or another, one chunk per request.

use uuid::Uuid;

use crate::cells::moves::{Chunk, Cursor};
use crate::cells::portable::{Finished, Opened};
use crate::error::{ApiError, ApiResult, Code};
use crate::node::Node;
use crate::portable::state::{IMPORT_IDLE_MS, Run};
use crate::portable::{BeginImport, ExportBegun, Header, ImportBegun, ImportReport, ReEnter};
use crate::storage::FORMAT_VERSION;
use crate::storage::codec::{decode, encode};

fn account(node: &Node) -> ApiResult<&crate::account::AccountService> {
    node.account.as_deref().ok_or_else(|| ApiError::msg(Code::NOT_FOUND, "portable stores are run by the account service"))
}

/// Opens an export of `store` at its cell: the file's header, with the export id the rows are
/// read under. A store not in the directory (closed, or never here) is 404.
pub async fn begin_export(node: &Node, store: Uuid) -> ApiResult<ExportBegun> {
    let account = account(node)?;
    let refs = account.export_refs(store)?;
    let entry = account.store_entry(store)?.ok_or_else(ApiError::not_found)?;
    let id = node.clock.new_id();
    let opened: Opened = decode(&node.cell_link(&entry.cell)?.portable_step(store, id, "open", None).await?)?;
    let mut to_reenter = vec![ReEnter {
        feature: "payments".into(),
        what: format!(
            "payment settings: the store's payments went to the {} provider of the installation it left, whose keys stay there; payments are refused where it is imported until they are entered again",
            opened.payment_provider
        ),
    }];
    if let Some(n) = opened.counts.get("webhooks") {
        to_reenter.push(ReEnter {
            feature: "webhooks".into(),
            what: format!(
                "webhook secrets: its {n} subscription(s) arrive disabled, each with a new secret; give each receiver its new secret, then enable it"
            ),
        });
    }
    let header = Header {
        data_format: FORMAT_VERSION,
        store_id: store,
        store_name: opened.settings.name,
        exported_at_ms: node.clock.now_ms(),
        counts: opened.counts,
        owner_email: refs.owner_email,
        members: refs.members,
        publishable_keys: refs.keys,
        to_reenter,
    };
    tracing::info!(%store, export = %id, rows = header.rows(), "store export opened");
    Ok(ExportBegun { export_id: id, header })
}

/// The rows of export `id` of `store` from `from` on (an encoded [`Chunk`]).
pub async fn export_rows(node: &Node, store: Uuid, id: Uuid, from: &Cursor) -> ApiResult<Vec<u8>> {
    let cell = account(node)?.locate(store)?.ok_or_else(ApiError::not_found)?;
    node.cell_link(&cell)?.portable_step(store, id, "read", Some(encode(from)?)).await
}

/// Ends export `id` of `store` (done, or its caller failed).
pub async fn end_export(node: &Node, store: Uuid, id: Uuid) -> ApiResult<()> {
    let cell = account(node)?.locate(store)?.ok_or_else(ApiError::not_found)?;
    node.cell_link(&cell)?.portable_step(store, id, "close", None).await.map(|_| ())
}

/// Checks everything an import is refused for, before anything is written, and picks the cell
/// that receives the store.
pub async fn begin_import(node: &Node, req: BeginImport) -> ApiResult<ImportBegun> {
    let account = account(node)?;
    let header = req.header;
    if header.data_format != FORMAT_VERSION {
        return Err(ApiError::field(
            "header.dataFormat",
            format!("rows of data format {}; this service stores format {FORMAT_VERSION}", header.data_format),
        ));
    }
    let store = header.store_id;
    let mut imports = node.imports.0.lock().await;
    let now = node.clock.now_ms();
    if imports.get(&store).is_some_and(|r| now - r.last_used_ms < IMPORT_IDLE_MS) {
        return Err(ApiError::msg(Code::CONFLICT, format!("an import of store {store} is under way")));
    }
    let mapping = account.check_import(&header, req.owner.as_deref())?;
    let cell = account.pick_cell(&node.cell_names())?;
    let begun = ImportBegun { store_id: store, cell: cell.clone(), owner: mapping.owner_email.clone() };
    imports.insert(store, Run { header, cell, mapping, seq: 0, rows: 0, last_used_ms: now });
    Ok(begun)
}

/// Hands chunk `seq` of the import of `store` to its cell, which holds the rows as a move's
/// target does: `Incoming`, not served. The first chunk replaces a copy an earlier attempt left.
pub async fn import_rows(node: &Node, store: Uuid, seq: u64, body: &[u8]) -> ApiResult<()> {
    let mut imports = node.imports.0.lock().await;
    let run = imports.get_mut(&store).ok_or_else(no_import)?;
    if seq != run.seq {
        return Err(ApiError::msg(Code::CONFLICT, format!("chunk {seq} sent, chunk {} is next", run.seq)));
    }
    let mut chunk: Chunk = decode(body).map_err(|_| ApiError::field("body", "not a chunk of rows"))?;
    chunk.first = seq == 0;
    let n = chunk.rows.len() as u64;
    node.cell_link(&run.cell)?.move_write(store, "import", &chunk).await?;
    run.seq += 1;
    run.rows += n;
    run.last_used_ms = node.clock.now_ms();
    Ok(())
}

/// Serves the received copy at its cell (owned here, secrets stripped, search built), then
/// records it in the directory; if that write is refused, the copy is dropped.
pub async fn finish_import(node: &Node, store: Uuid) -> ApiResult<ImportReport> {
    let account = account(node)?;
    let run = node.imports.0.lock().await.remove(&store).ok_or_else(no_import)?;
    let link = node.cell_link(&run.cell)?;
    let done = async {
        if run.rows != run.header.rows() {
            return Err(ApiError::msg(
                Code::BUSINESS_RULE,
                format!("{} rows arrived, the header counts {}", run.rows, run.header.rows()),
            ));
        }
        let finished: Finished =
            decode(&link.portable_step(store, Uuid::nil(), "finish", Some(encode(&run.mapping.owner)?)).await?)?;
        account.record_import(&run.header, run.cell.clone(), &run.mapping).await?;
        Ok(finished)
    }
    .await;
    let finished = match done {
        Ok(f) => f,
        Err(e) => {
            if let Err(drop) = link.portable_step(store, Uuid::nil(), "abandon", None).await {
                tracing::warn!(%store, error = %drop, "an import's copy was not dropped; the cell's next start drops it");
            }
            return Err(e);
        }
    };
    node.directory.forget_placement(store);
    tracing::info!(%store, cell = %run.cell, rows = run.rows, "store imported");
    let Run { header, cell, mapping, .. } = run;
    Ok(ImportReport {
        store_id: store,
        cell,
        owner: mapping.owner_email,
        counts: header.counts,
        publishable_keys: header.publishable_keys.len(),
        members_joined: mapping.joined.into_iter().map(|(_, m)| m).collect(),
        members_not_found: mapping.not_found,
        webhooks_disabled: finished.webhooks_disabled,
        to_reenter: header.to_reenter,
    })
}

/// Abandons the import of `store`: the copy received so far is dropped.
pub async fn abort_import(node: &Node, store: Uuid) -> ApiResult<()> {
    let run = node.imports.0.lock().await.remove(&store).ok_or_else(no_import)?;
    node.cell_link(&run.cell)?.portable_step(store, Uuid::nil(), "abandon", None).await.map(|_| ())
}

fn no_import() -> ApiError {
    ApiError::msg(Code::NOT_FOUND, "no import of this store is under way")
}
