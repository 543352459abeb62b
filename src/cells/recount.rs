//! `admin check`'s recount: every record kind's rows against its total counter, per store (and
//! per parent, for records that live under another). A counter the writer keeps in the same
//! transaction as the rows can only disagree after damage, so any difference is reported.

use redb::{ReadTransaction, ReadableTable};

use crate::cells::kinds::KINDS;
use crate::error::{ApiError, ApiResult};
use crate::storage::tables::STORES;

/// The counters of a cell that disagree with their rows, described.
pub fn recount(txn: &ReadTransaction) -> ApiResult<Vec<String>> {
    let mut stores = Vec::new();
    for row in txn.open_table(STORES.def)?.iter()? {
        let (k, _) = row?;
        stores.push(
            crate::storage::keys::leading_store(k.value()).ok_or_else(|| ApiError::internal("a store row's key is short"))?,
        );
    }
    let mut wrong = Vec::new();
    for kind in KINDS {
        wrong.extend((kind.recount)(txn, &stores)?);
    }
    Ok(wrong)
}
