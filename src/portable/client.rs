//! `shopcell admin export-store` and `import-store`: page a store out of a running service into
//! a file on this host, and give a file to a running service, one chunk per request (never
//! the store whole in memory on either side).

use std::path::Path;

use hyper::Method;
use uuid::Uuid;

use crate::cells::moves::{Chunk, Cursor};
use crate::error::BoxError;
use crate::http::upstream::{Body, Upstream};
use crate::portable::file::{FileReader, FileWriter, verify};
use crate::portable::{BeginExport, BeginImport, CHUNK_BYTES, ExportBegun, Header, ImportBegun, ImportReport};
use crate::storage::codec::{decode, encode};

/// What a finished export reports.
#[derive(Debug)]
pub struct Exported {
    pub header: Header,
    pub rows: u64,
    pub bytes: u64,
}

/// Exports `store` from the service at `url` into the new file `to`.
pub async fn export(url: &str, service_key: &str, store: Uuid, to: &Path) -> Result<Exported, BoxError> {
    if to.exists() {
        return Err(format!("{} exists: export into a new file", to.display()).into());
    }
    let up = Upstream::new(url, service_key);
    let body = Body::json(&BeginExport { store_id: store })?;
    let begun: ExportBegun =
        up.call(Method::POST, "/internal/v1/store-exports", body).await.map_err(|e| format!("export not started: {e}"))?;
    let id = begun.export_id;
    let written = write_file(&up, store, id, &begun.header, to).await;
    // The service's read transaction ends now rather than when it lapses.
    let end = format!("/internal/v1/store-exports/{store}/{id}");
    if let Err(e) = up.call_raw(Method::DELETE, &end, Body::Empty).await {
        tracing::debug!(error = %e, "the export's end was not acknowledged; it lapses");
    }
    let rows = written?;
    let bytes = std::fs::metadata(to)?.len();
    Ok(Exported { header: begun.header, rows, bytes })
}

async fn write_file(up: &Upstream, store: Uuid, id: Uuid, header: &Header, to: &Path) -> Result<u64, BoxError> {
    let mut file = FileWriter::create(to, header)?;
    let copied = async {
        let mut from = Cursor::start(CHUNK_BYTES);
        let path = format!("/internal/v1/store-exports/{store}/{id}/rows");
        loop {
            let bytes = up.call_raw(Method::POST, &path, Body::Raw(encode(&from)?)).await?;
            let chunk: Chunk = decode(&bytes)?;
            file.rows(&chunk.rows)?;
            match chunk.next {
                Some(next) => from = next,
                None => return Ok::<_, BoxError>(()),
            }
        }
    }
    .await;
    match copied {
        Ok(()) => file.finish(),
        Err(e) => {
            file.discard();
            Err(format!("export failed, no file written: {e}").into())
        }
    }
}

/// Imports the file `from` into the service at `url`, owned by `owner` (default: the account
/// with the exported owner's email). The whole file is verified before the service is asked
/// anything.
pub async fn import(url: &str, service_key: &str, from: &Path, owner: Option<String>) -> Result<ImportReport, BoxError> {
    let header = verify(from)?;
    let store = header.store_id;
    let up = Upstream::new(url, service_key);
    let body = Body::json(&BeginImport { header, owner })?;
    let begun: ImportBegun =
        up.call(Method::POST, "/internal/v1/store-imports", body).await.map_err(|e| format!("import refused: {e}"))?;
    match send(&up, store, from).await {
        Ok(()) => {
            let path = format!("/internal/v1/store-imports/{store}/finish");
            Ok(up.call(Method::POST, &path, Body::Empty).await.map_err(|e| format!("import not completed: {e}"))?)
        }
        Err(e) => {
            let _ = up.call_raw(Method::DELETE, &format!("/internal/v1/store-imports/{store}"), Body::Empty).await;
            Err(format!("import of store {store} into cell {} failed, nothing kept: {e}", begun.cell).into())
        }
    }
}

/// Sends every chunk of the file, reading it again (and checking its checksum again at the end,
/// before the import is finished).
async fn send(up: &Upstream, store: Uuid, from: &Path) -> Result<(), BoxError> {
    let mut file = FileReader::open(from)?;
    if file.header.store_id != store {
        return Err(format!("{} changed while it was imported", from.display()).into());
    }
    let mut seq = 0u64;
    while let Some(rows) = file.next_rows()? {
        let chunk = Chunk { first: seq == 0, rows, next: None };
        let path = format!("/internal/v1/store-imports/{store}/rows?seq={seq}");
        up.call_raw(Method::POST, &path, Body::Raw(encode(&chunk)?)).await.map_err(|e| format!("chunk {seq}: {e}"))?;
        seq += 1;
    }
    Ok(())
}
