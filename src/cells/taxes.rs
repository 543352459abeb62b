//! Tax rates in a cell: the record declaration and the rules of its writes. A calculation with a
//! shipping address reads every rate of the store, so a store keeps at most [`MAX_RATES`].

use redb::ReadTransaction;
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::pricing_version::pricing_changed;
use crate::domain::pricing::tax::{TaxRate, TaxRateInput};
use crate::error::{ApiError, ApiResult, Code};
use crate::storage::codec::decode;
use crate::storage::keys::Key;
use crate::storage::read;
use crate::storage::record::{self, Filter, FilterValue, List, Record, Sort};
use crate::storage::tables::{StoreTable, TAX_RATE_ORDER, TAX_RATES};
use crate::storage::tx::Tx;

/// Most tax rates in one store: every taxed calculation reads them all.
pub const MAX_RATES: usize = 1000;

impl Record for TaxRate {
    const TABLE: StoreTable = TAX_RATES;
    const NAME: &'static str = "tax_rates";
    const LIST: List<Self> = List {
        order: Some(TAX_RATE_ORDER),
        sorts: &[
            Sort { name: "created_at", tag: 0, key: |r, k| k.i64(r.created_at) },
            Sort { name: "updated_at", tag: 1, key: |r, k| k.i64(r.updated_at) },
            Sort { name: "country", tag: 2, key: |r, k| k.str(&r.country).str(r.province.as_deref().unwrap_or("")) },
            Sort { name: "name", tag: 3, key: |r, k| k.str(&r.name.to_lowercase()) },
        ],
        default_sort: "created_at",
        summaries: "updated_at",
        own_order: false,
        filters: &[Filter::code(
            "country",
            country_code,
            "must be a two-letter country code",
            "^[A-Za-z]{2}$",
            |r: &TaxRate| Some(FilterValue::Code(r.country.to_ascii_uppercase())),
            "only the rates of this two-letter country",
        )],
        ranges: &[],
        search: None,
    };

    fn id(&self) -> Uuid {
        self.id
    }
}

fn country_code(raw: &str) -> Option<String> {
    (raw.len() == 2 && raw.bytes().all(|b| b.is_ascii_alphabetic())).then(|| raw.to_ascii_uppercase())
}

/// Writes `new` in place of `old` through the record layer; calculations read the rates, so the
/// store's pricing version moves on too.
fn write_rate(tx: &mut Tx, store: Uuid, old: Option<&TaxRate>, new: Option<&TaxRate>) -> ApiResult<()> {
    pricing_changed(tx, store)?;
    record::write(tx, store, old, new)
}

/// Every tax rate of a store, in a read transaction (calculations).
pub fn all_rates(txn: &ReadTransaction, store: Uuid) -> ApiResult<Vec<TaxRate>> {
    let mut out = Vec::new();
    read::scan(txn, TAX_RATES, Key::store(store).bytes(), false, 0, usize::MAX, |_, v| {
        out.push(decode(v)?);
        Ok(())
    })?;
    Ok(out)
}

/// A rate of the same jurisdiction and name would be charged twice: refused with a 409.
fn check_unique(tx: &Tx, store: Uuid, rate: &TaxRate) -> ApiResult<()> {
    for (_, v) in tx.scan_prefix(TAX_RATES, Key::store(store).bytes(), None, usize::MAX)? {
        let other: TaxRate = decode(&v)?;
        if other.id != rate.id
            && other.country == rate.country
            && other.province == rate.province
            && other.name.eq_ignore_ascii_case(&rate.name)
        {
            return Err(
                ApiError::field("name", "this jurisdiction already has a tax rate of this name").with_code(Code::CONFLICT)
            );
        }
    }
    Ok(())
}

pub async fn create(cell: &Cell, store: Uuid, input: TaxRateInput) -> ApiResult<TaxRate> {
    let now = cell.clock.now_ms();
    let rate = TaxRate::create(&input, cell.clock.new_id(), now, now)?;
    cell.writer
        .write(Some(store), move |tx| {
            check_unique(tx, store, &rate)?;
            if record::count::<TaxRate>(tx, store, None)? >= MAX_RATES as u64 {
                return Err(ApiError::msg(Code::BUSINESS_RULE, format!("a store has at most {MAX_RATES} tax rates")));
            }
            write_rate(tx, store, None, Some(&rate))?;
            Ok(rate.clone())
        })
        .await
}

/// Replaces a rate by `input` (the whole rate), keeping its id and creation time.
pub async fn update(cell: &Cell, store: Uuid, id: Uuid, input: TaxRateInput) -> ApiResult<TaxRate> {
    input.validate()?;
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            let old = record::must_load::<TaxRate>(tx, store, id)?;
            let rate = TaxRate::create(&input, id, old.created_at, now)?;
            check_unique(tx, store, &rate)?;
            write_rate(tx, store, Some(&old), Some(&rate))?;
            Ok(rate)
        })
        .await
}

pub async fn delete(cell: &Cell, store: Uuid, id: Uuid) -> ApiResult<()> {
    cell.writer
        .write(Some(store), move |tx| {
            let old = record::must_load::<TaxRate>(tx, store, id)?;
            write_rate(tx, store, Some(&old), None)
        })
        .await
}
