//! Markets in a cell: the record declaration (list orders, the country claims) and the rules of
//! its writes. A country belongs to at most one market of a store.

use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::catalogs::market_in_use;
use crate::cells::stores;
use crate::domain::market::*;
use crate::error::{ApiError, ApiResult, Check, Code};
use crate::storage::keys::Key;
use crate::storage::record::{self, Claim, List, Record, Sort};
use crate::storage::tables::{MARKET_COUNTRIES, MARKET_ORDER, MARKETS, StoreTable};
use crate::storage::tx::Tx;

impl Record for Market {
    const TABLE: StoreTable = MARKETS;
    const NAME: &'static str = "markets";
    const LIST: List<Self> = List::sorted(
        MARKET_ORDER,
        &[
            Sort { name: "createdAt", tag: 0, key: |m, k| k.i64(m.created_at) },
            Sort { name: "updatedAt", tag: 1, key: |m, k| k.i64(m.updated_at) },
            Sort { name: "name", tag: 2, key: |m, k| k.str(&m.name.to_lowercase().chars().take(64).collect::<String>()) },
        ],
        "createdAt",
    );

    fn id(&self) -> Uuid {
        self.id
    }

    /// `store ‖ country → market id`: who holds each country.
    fn claims(&self, store: Uuid) -> ApiResult<Vec<Claim>> {
        Ok(self.countries.iter().map(|c| (MARKET_COUNTRIES, country_key(store, c), self.id.as_bytes().to_vec())).collect())
    }
}

fn country_key(store: Uuid, code: &str) -> Vec<u8> {
    Key::store(store).str(code).into_vec()
}

/// Each country of `m` must be free or already `m`'s: a 409 naming `countries[i]` otherwise.
fn check_countries_free(tx: &Tx, store: Uuid, m: &Market) -> ApiResult<()> {
    let mut c = Check::new();
    for (i, code) in m.countries.iter().enumerate() {
        let owner = tx.get(MARKET_COUNTRIES, &country_key(store, code))?.and_then(|b| Uuid::from_slice(&b).ok());
        if let Some(other) = owner.filter(|o| *o != m.id) {
            let name = match record::load::<Market>(tx, store, other)? {
                Some(o) => o.name,
                None => other.to_string(),
            };
            c.fail(&format!("countries[{i}]"), format!("{code} already belongs to market {name:?}"));
        }
    }
    c.finish().map_err(|e| e.with_code(Code::COUNTRY_TAKEN))
}

/// Creates a market; its countries must be in no other market of the store.
pub async fn create(cell: &Cell, store: Uuid, input: CreateMarket) -> ApiResult<Market> {
    let currency = stores::store_settings(cell, store)?.currency;
    let m = build(&input, currency, cell.clock.new_id(), cell.clock.now_ms())?;
    cell.writer
        .write(Some(store), move |tx| {
            check_countries_free(tx, store, &m)?;
            record::write(tx, store, None, Some(&m))?;
            Ok(m.clone())
        })
        .await
}

pub async fn update(cell: &Cell, store: Uuid, id: Uuid, update: UpdateMarket) -> ApiResult<Market> {
    // Validate before queueing: a bad field never reaches the writer.
    let now = cell.clock.now_ms();
    apply_update(&update, &cell.get::<Market>(store, id)?, now)?;
    cell.writer
        .write(Some(store), move |tx| {
            let old = record::must_load::<Market>(tx, store, id)?;
            let m = apply_update(&update, &old, now)?;
            check_countries_free(tx, store, &m)?;
            record::write(tx, store, Some(&old), Some(&m))?;
            Ok(m)
        })
        .await
}

/// Deletes a market that no catalog uses (409 otherwise: catalogs must name a market).
pub async fn delete(cell: &Cell, store: Uuid, id: Uuid) -> ApiResult<()> {
    cell.writer
        .write(Some(store), move |tx| {
            let old = record::must_load::<Market>(tx, store, id)?;
            if market_in_use(tx, store, id)? {
                return Err(ApiError::msg(
                    Code::CONFLICT,
                    "catalogs use this market; delete them or move them to another market first",
                ));
            }
            record::write(tx, store, Some(&old), None)
        })
        .await
}
