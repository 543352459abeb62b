//! Markets in a cell. [`write_market`] is the one function that writes a market row and its
//! secondary rows (list orders, country claims, counter).

use std::sync::Arc;

use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::catalogs::market_in_use;
use crate::cells::collections::{Rows, sync_rows};
use crate::domain::market::*;
use crate::error::{ApiError, ApiResult, Check, Code};
use crate::http::query::Paging;
use crate::storage::codec::{decode, encode};
use crate::storage::keys::{Key, trailing_id};
use crate::storage::read;
use crate::storage::tables::{COUNTERS, MARKET_COUNTRIES, MARKET_ORDER, MARKETS};
use crate::storage::writer::Tx;

/// The sortable fields of the market list, in index-field order.
pub const SORT_FIELDS: &[&str] = &["createdAt", "updatedAt", "name"];

fn row_key(store: Uuid, id: Uuid) -> Vec<u8> {
    Key::store(store).id(id).into_vec()
}

fn counter_key(store: Uuid) -> Vec<u8> {
    Key::store(store).str("markets").into_vec()
}

fn country_key(store: Uuid, code: &str) -> Vec<u8> {
    Key::store(store).str(code).into_vec()
}

fn order_rows(store: Uuid, m: &Market) -> Rows {
    let k = |field: u8| Key::store(store).u8(field);
    let name: String = m.name.to_lowercase().chars().take(64).collect();
    vec![
        (k(0).i64(m.created_at).id(m.id).into_vec(), Vec::new()),
        (k(1).i64(m.updated_at).id(m.id).into_vec(), Vec::new()),
        (k(2).str(&name).id(m.id).into_vec(), Vec::new()),
    ]
}

fn country_rows(store: Uuid, m: &Market) -> Rows {
    m.countries.iter().map(|c| (country_key(store, c), m.id.as_bytes().to_vec())).collect()
}

/// Writes `new` in place of `old` (either may be absent) with every secondary row.
pub fn write_market(tx: &mut Tx, store: Uuid, old: Option<&Market>, new: Option<&Market>) -> ApiResult<()> {
    let rows = |m: Option<&Market>, f: fn(Uuid, &Market) -> Rows| m.map(|m| f(store, m)).unwrap_or_default();
    sync_rows(tx, MARKET_ORDER, &rows(old, order_rows), &rows(new, order_rows))?;
    sync_rows(tx, MARKET_COUNTRIES, &rows(old, country_rows), &rows(new, country_rows))?;
    match (old, new) {
        (None, Some(n)) => {
            tx.bump(COUNTERS, &counter_key(store), 1)?;
            tx.put(MARKETS, &row_key(store, n.id), &encode(n)?)
        }
        (Some(_), Some(n)) => tx.put(MARKETS, &row_key(store, n.id), &encode(n)?),
        (Some(o), None) => {
            tx.bump(COUNTERS, &counter_key(store), -1)?;
            tx.delete(MARKETS, &row_key(store, o.id))
        }
        (None, None) => Ok(()),
    }
}

/// Each country of `m` must be free or already `m`'s: a 409 naming `countries[i]` otherwise.
fn check_countries_free(tx: &Tx, store: Uuid, m: &Market) -> ApiResult<()> {
    let mut c = Check::new();
    for (i, code) in m.countries.iter().enumerate() {
        let owner = tx.get(MARKET_COUNTRIES, &country_key(store, code))?.and_then(|b| Uuid::from_slice(&b).ok());
        if let Some(other) = owner.filter(|o| *o != m.id) {
            let name = match tx.get(MARKETS, &row_key(store, other))? {
                Some(b) => decode::<Market>(&b)?.name,
                None => other.to_string(),
            };
            c.fail(&format!("countries[{i}]"), format!("{code} already belongs to market {name:?}"));
        }
    }
    c.finish().map_err(|e| e.with_code(Code::COUNTRY_TAKEN))
}

/// Whether `id` is a market of the store (catalogs name one).
pub(crate) fn market_exists(tx: &Tx, store: Uuid, id: Uuid) -> ApiResult<bool> {
    Ok(tx.get(MARKETS, &row_key(store, id))?.is_some())
}

fn load(tx: &Tx, store: Uuid, id: Uuid) -> ApiResult<Market> {
    let bytes = tx.get(MARKETS, &row_key(store, id))?.ok_or_else(ApiError::not_found)?;
    decode(&bytes)
}

impl Cell {
    /// Creates a market; its countries must be in no other market of the store.
    pub async fn create_market(&self, store: Uuid, input: CreateMarket) -> ApiResult<Market> {
        let currency = self.store_settings(store)?.currency;
        let m = build(&input, currency, self.clock.new_id(), self.clock.now_ms())?;
        self.writer
            .write(Some(store), move |tx| {
                check_countries_free(tx, store, &m)?;
                write_market(tx, store, None, Some(&m))?;
                Ok(m.clone())
            })
            .await
    }

    pub fn market(&self, store: Uuid, id: Uuid) -> ApiResult<Market> {
        read::get(&self.read()?, MARKETS, &row_key(store, id))?.ok_or_else(ApiError::not_found)
    }

    /// A page of markets in the requested order, with the total, from the order index.
    pub fn list_markets(&self, store: Uuid, paging: &Paging) -> ApiResult<(Vec<Market>, u64)> {
        let txn = self.read()?;
        let field = SORT_FIELDS.iter().position(|f| *f == paging.sort_by).unwrap_or(0) as u8;
        let total = read::counter(&txn, COUNTERS, &counter_key(store))?;
        let mut ids = Vec::with_capacity(paging.limit as usize);
        let prefix = Key::store(store).u8(field);
        read::scan(&txn, MARKET_ORDER, prefix.bytes(), paging.desc, paging.offset(), paging.limit as usize, |k, _| {
            ids.extend(trailing_id(k));
            Ok(())
        })?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(m) = read::get(&txn, MARKETS, &row_key(store, id))? {
                out.push(m);
            }
        }
        Ok((out, total))
    }

    pub async fn update_market(&self, store: Uuid, id: Uuid, update: UpdateMarket) -> ApiResult<Market> {
        let now = self.clock.now_ms();
        apply_update(&update, &self.market(store, id)?, now)?;
        let update = Arc::new(update);
        self.writer
            .write(Some(store), move |tx| {
                let old = load(tx, store, id)?;
                let m = apply_update(&update, &old, now)?;
                check_countries_free(tx, store, &m)?;
                write_market(tx, store, Some(&old), Some(&m))?;
                Ok(m)
            })
            .await
    }

    /// Deletes a market that no catalog uses (409 otherwise: catalogs must name a market).
    pub async fn delete_market(&self, store: Uuid, id: Uuid) -> ApiResult<()> {
        self.writer
            .write(Some(store), move |tx| {
                let old = load(tx, store, id)?;
                if market_in_use(tx, store, id)? {
                    return Err(ApiError::msg(
                        Code::CONFLICT,
                        "catalogs use this market; delete them or move them to another market first",
                    ));
                }
                write_market(tx, store, Some(&old), None)
            })
            .await
    }
}
