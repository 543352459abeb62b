//! The account service's side of a backup: takes the cut across its own writer and every
//! cell's (in this process or another), then answers the caller chunk by chunk, relaying each
//! cell's rows.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use uuid::Uuid;

use crate::backup::snapshot::Snapshot;
use crate::backup::state::{Ahead, Run, Source};
use crate::backup::{BACKUP_FORMAT, Begun, CHUNK_BYTES, Chunk, Database, IDLE_MS, Part, account_path, cell_path};
use crate::cells::link::CellLink;
use crate::error::{ApiError, ApiResult, Code};
use crate::node::Node;
use crate::storage::FORMAT_VERSION;

/// Takes the cut and answers what follows. A backup under way (one used within [`IDLE_MS`])
/// is a 409.
pub async fn begin(node: &Arc<Node>) -> ApiResult<Begun> {
    let account = node.account.clone().ok_or_else(|| ApiError::msg(Code::NOT_FOUND, "backups are run by the account service"))?;
    // Waits for a request paging a backup out, or the end of a lapsed one, rather than calling
    // the backup under way: which it is, is decided from the run itself, just below.
    let mut slot = node.backups.0.lock().await;
    let now = node.clock.now_ms();
    if let Some(run) = slot.take() {
        if now - run.last_used_ms < IDLE_MS {
            *slot = Some(run);
            return Err(under_way());
        }
        run.end().await;
    }
    let id = node.clock.new_id();
    let files = key_files(&account.dir())?;
    let mut cells = VecDeque::new();
    for name in node.cell_names() {
        cells.push_back((name.clone(), node.cell_link(&name)?));
    }
    // Its own task: a caller that hangs up mid-cut does not leave writers held.
    let cut = tokio::spawn(take_cut(node.clone(), account, cells.clone(), id));
    let (snapshot, cut_at_ms, held_us) = cut.await.map_err(ApiError::internal)??;
    let mut databases = vec![Database { path: account_path(), kind: "account".into() }];
    databases.extend(cells.iter().map(|(name, _)| Database { path: cell_path(name), kind: "cell".into() }));
    tracing::info!(backup = %id, held_us, cells = cells.len(), "backup cut taken");
    let source = Source { id, files, account: Some(snapshot), cells };
    *slot = Some(Run { id, seq: 0, last_used_ms: now, ahead: Ahead::Ready(Box::new(source)) });
    drop(slot);
    lapse_when_idle(node.clone(), id);
    Ok(Begun { id, backup_format: BACKUP_FORMAT, data_format: FORMAT_VERSION, cut_at_ms, held_us, databases })
}

/// Holds every cell's writer and the directory's, opens each database's read transaction while
/// all are held, then releases them: the snapshot of the directory, when, and how long the
/// writers were held. On failure every part taken so far ends (which ends its hold).
async fn take_cut(
    node: Arc<Node>,
    account: Arc<crate::account::AccountService>,
    cells: VecDeque<(String, CellLink)>,
    id: Uuid,
) -> ApiResult<(Snapshot, i64, u64)> {
    let started = Instant::now();
    let mut held: Vec<&(String, CellLink)> = Vec::new();
    let cut = async {
        for cell in &cells {
            cell.1.backup_step(id, "hold").await.map_err(|e| about_cell(&cell.0, e))?;
            held.push(cell);
        }
        let hold = account.writer.hold().await?;
        let snapshot = Snapshot::open(&account.db, "account")?;
        let cut_at_ms = node.clock.now_ms();
        drop(hold);
        for cell in &cells {
            cell.1.backup_step(id, "release").await.map_err(|e| about_cell(&cell.0, e))?;
        }
        Ok::<_, ApiError>((snapshot, cut_at_ms))
    }
    .await;
    let held_us = started.elapsed().as_micros() as u64;
    match cut {
        Ok((snapshot, cut_at_ms)) => Ok((snapshot, cut_at_ms, held_us)),
        Err(e) => {
            for (name, link) in held {
                if let Err(end) = link.backup_step(id, "end").await {
                    tracing::warn!(cell = %name, error = %end, "a cell did not end its part of a failed backup; it lapses");
                }
            }
            Err(e)
        }
    }
}

/// The chunk numbered `seq` of backup `id`, read ahead while the one before it was sent; the
/// chunk after it is read ahead in turn. A failure (a cell that does not answer) ends the
/// backup everywhere and names the cell.
pub async fn next(node: &Node, id: Uuid, seq: u64) -> ApiResult<Chunk> {
    let mut slot = node.backups.0.lock().await;
    let run = match slot.as_mut() {
        Some(r) if r.id == id => r,
        _ => return Err(ApiError::msg(Code::NOT_FOUND, "no such backup (it ended, or lapsed after a minute unused)")),
    };
    if seq != run.seq {
        return Err(ApiError::msg(Code::CONFLICT, format!("chunk {seq} asked for, chunk {} is next", run.seq)));
    }
    run.last_used_ms = node.clock.now_ms();
    let (source, parts) = match std::mem::replace(&mut run.ahead, Ahead::Taken) {
        Ahead::Ready(source) => read_chunk(*source).await,
        Ahead::Reading(task) => match task.await {
            Ok(read) => read,
            Err(e) => {
                // The read panicked with the snapshots: the cells' parts lapse.
                *slot = None;
                return Err(ApiError::internal(format!("a backup chunk's read failed: {e}")));
            }
        },
        Ahead::Taken => {
            *slot = None;
            return Err(ApiError::internal("a backup chunk was read twice"));
        }
    };
    let parts = match parts {
        Ok(parts) => parts,
        Err(e) => {
            *slot = None;
            source.end().await;
            return Err(e);
        }
    };
    run.seq += 1;
    let last = source.finished();
    if last {
        *slot = None;
    } else {
        run.ahead = Ahead::Reading(tokio::spawn(read_chunk(source)));
    }
    Ok(Chunk { seq, parts, last })
}

/// The parts of the next chunk: the files first, then about [`CHUNK_BYTES`] of rows of the
/// first database not yet read out.
async fn read_chunk(mut source: Source) -> (Source, ApiResult<Vec<Part>>) {
    let mut parts: Vec<Part> =
        std::mem::take(&mut source.files).into_iter().map(|(path, bytes)| Part::File { path, bytes }).collect();
    let read = read_rows(&mut source, &mut parts).await;
    (source, read.map(|()| parts))
}

async fn read_rows(source: &mut Source, parts: &mut Vec<Part>) -> ApiResult<()> {
    if let Some(snapshot) = source.account.as_mut() {
        let rows = snapshot.read(CHUNK_BYTES).await?;
        if rows.done.is_some() {
            source.account = None;
        }
        rows.into_parts(&account_path(), parts);
        return Ok(());
    }
    let Some((name, link)) = source.cells.front() else { return Ok(()) };
    let rows = link.backup_read(source.id).await.map_err(|e| about_cell(name, e))?;
    let done = rows.done.is_some();
    rows.into_parts(&cell_path(name), parts);
    if done
        && let Some((name, link)) = source.cells.pop_front()
        && let Err(e) = link.backup_step(source.id, "end").await
    {
        tracing::warn!(cell = %name, error = %e, "a cell did not end its part of a backup; it lapses");
    }
    Ok(())
}

/// Abandons backup `id` (the caller failed): every part of it ends.
pub async fn abort(node: &Node, id: Uuid) -> ApiResult<()> {
    let mut slot = node.backups.0.lock().await;
    match slot.take() {
        Some(run) if run.id == id => {
            run.end().await;
            Ok(())
        }
        other => {
            *slot = other;
            Err(ApiError::msg(Code::NOT_FOUND, "no such backup (it ended, or lapsed after a minute unused)"))
        }
    }
}

/// Ends backup `id` once no request has touched it for [`IDLE_MS`] (its caller died), so its
/// read transactions do not pin old pages for ever. It holds the process weakly: a process
/// that stops meanwhile closes its databases.
fn lapse_when_idle(node: Arc<Node>, id: Uuid) {
    let (clock, node) = (node.clock.clone(), Arc::downgrade(&node));
    tokio::spawn(async move {
        let mut at = clock.now_ms() + IDLE_MS;
        loop {
            clock.sleep_until(at).await;
            let Some(node) = node.upgrade() else { return };
            let mut slot = node.backups.0.lock().await;
            match slot.as_ref() {
                Some(run) if run.id == id => {
                    if node.clock.now_ms() - run.last_used_ms >= IDLE_MS {
                        tracing::warn!(backup = %id, "backup abandoned by its caller; ended");
                        let run = slot.take();
                        // Ended outside the lock: a new backup need not wait for the old reads.
                        drop(slot);
                        if let Some(run) = run {
                            run.end().await;
                        }
                        return;
                    }
                    at = run.last_used_ms + IDLE_MS;
                }
                _ => return,
            }
        }
    });
}

/// The signing key, the service key and the taxonomy, by their paths in the data directory.
fn key_files(account_dir: &std::path::Path) -> ApiResult<Vec<(String, Vec<u8>)>> {
    let mut files = Vec::new();
    for name in crate::account::keys::KEY_FILES {
        let bytes = std::fs::read(account_dir.join(name)).map_err(|e| ApiError::internal(format!("{name}: {e}")))?;
        files.push((format!("account/{name}"), bytes));
    }
    if let Some(data) = account_dir.parent() {
        let taxonomy = crate::domain::taxonomy::files::taxonomy_path(data);
        if taxonomy.exists() {
            let bytes = std::fs::read(&taxonomy).map_err(|e| ApiError::internal(format!("taxonomy.json: {e}")))?;
            files.push(("taxonomy.json".into(), bytes));
        }
    }
    Ok(files)
}

fn under_way() -> ApiError {
    ApiError::msg(Code::CONFLICT, "another backup is under way (an abandoned one lapses a minute after its last request)")
}

fn about_cell(name: &str, e: ApiError) -> ApiError {
    let code = if e.code == Code::NOT_FOUND { Code::BAD_GATEWAY } else { e.code };
    ApiError::msg(code, format!("cell {name}: {}", e.message))
}
