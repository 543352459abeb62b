//! `admin check`'s recount: every record kind's rows against its total counter, per store (and
//! per parent, for records that live under another). A counter the writer keeps in the same
//! transaction as the rows can only disagree after damage, so any difference is reported.

use std::collections::BTreeMap;

use redb::{ReadTransaction, ReadableTable};
use uuid::Uuid;

use crate::cells::kinds::KINDS;
use crate::error::{ApiError, ApiResult};
use crate::storage::codec::decode;
use crate::storage::record::{Record, total_key};
use crate::storage::tables::{COUNTERS, STORES};
use crate::storage::tx::read_u64;

/// The counters of a cell that disagree with their rows, described.
pub fn recount(txn: &ReadTransaction) -> ApiResult<Vec<String>> {
    let mut stores = Vec::new();
    for row in txn.open_table(STORES.def)?.iter()? {
        let (k, _) = row?;
        stores.push(store_of(k.value())?);
    }
    let mut wrong = Vec::new();
    for kind in KINDS {
        wrong.extend((kind.recount)(txn, &stores)?);
    }
    Ok(wrong)
}

fn store_of(key: &[u8]) -> ApiResult<Uuid> {
    key.get(..16).and_then(|b| Uuid::from_slice(b).ok()).ok_or_else(|| ApiError::internal("a store row's key is short"))
}

/// The rows of `R` by store and parent against their total counters; a store with no rows
/// must count none.
pub(crate) fn totals<R: Record>(txn: &ReadTransaction, stores: &[Uuid]) -> ApiResult<Vec<String>> {
    let mut counted: BTreeMap<Vec<u8>, (Uuid, u64)> = BTreeMap::new();
    for s in stores {
        counted.insert(total_key::<R>(*s, None), (*s, 0));
    }
    for row in txn.open_table(R::TABLE.def)?.iter()? {
        let (k, v) = row?;
        let store = store_of(k.value())?;
        let r: R = decode(v.value())?;
        counted.entry(total_key::<R>(store, r.scope())).or_insert((store, 0)).1 += 1;
    }
    let counters = txn.open_table(COUNTERS.def)?;
    let mut wrong = Vec::new();
    for (key, (store, rows)) in counted {
        let stored = counters.get(key.as_slice())?.map(|v| read_u64(v.value())).unwrap_or(0);
        if stored != rows {
            wrong.push(format!("store {store}: the {} counter says {stored}, there are {rows} rows", R::NAME));
        }
    }
    Ok(wrong)
}
