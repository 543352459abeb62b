//! Handles: URL slugs unique per store, in a `store ‖ handle → owner id` table.

use uuid::Uuid;

use crate::error::{ApiError, ApiResult, Code};
use crate::storage::keys::Key;
use crate::storage::tables::StoreTable;
use crate::storage::tx::Tx;

pub fn handle_key(store: Uuid, handle: &str) -> Vec<u8> {
    Key::store(store).str(handle).into_vec()
}

/// Picks the handle of record `id`: a requested one must be free (or already its own); otherwise
/// `base` gets the first free numeric suffix (`shirt`, `shirt-2`, …). `noun` names the kind of
/// record in the conflict message.
pub fn resolve_handle(
    tx: &Tx,
    table: StoreTable,
    store: Uuid,
    id: Uuid,
    requested: Option<&str>,
    base: &str,
    noun: &str,
) -> ApiResult<String> {
    let owner = |h: &str| -> ApiResult<Option<Uuid>> {
        Ok(tx.get(table, &handle_key(store, h))?.and_then(|b| Uuid::from_slice(&b).ok()))
    };
    if let Some(h) = requested {
        return match owner(h)? {
            Some(other) if other != id => {
                Err(ApiError::field("handle", format!("is already used by another {noun}")).with_code(Code::HANDLE_TAKEN))
            }
            _ => Ok(h.to_string()),
        };
    }
    for n in 1u32.. {
        let candidate = if n == 1 { base.to_string() } else { format!("{base}-{n}") };
        match owner(&candidate)? {
            Some(other) if other != id => {}
            _ => return Ok(candidate),
        }
    }
    Err(ApiError::internal("handle space exhausted"))
}
