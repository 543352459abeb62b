//! Tax rates in a cell: one row per rate, read whole by a calculation with a shipping address.

use std::sync::Arc;

use redb::ReadTransaction;
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::calculate::pricing_changed;
use crate::cells::collections::tx_scan;
use crate::cells::shipping::page_of;
use crate::domain::pricing::tax::{TaxRate, TaxRateInput};
use crate::error::{ApiError, ApiResult, Code};
use crate::http::query::Paging;
use crate::storage::codec::{decode, encode};
use crate::storage::keys::Key;
use crate::storage::read;
use crate::storage::tables::TAX_RATES;
use crate::storage::writer::Tx;

/// The sortable fields of the tax-rate list.
pub const SORT_FIELDS: &[&str] = &["created_at", "updated_at", "country", "name"];
/// Most tax rates in one store: every taxed calculation reads them all.
pub const MAX_RATES: usize = 1000;

fn row_key(store: Uuid, id: Uuid) -> Vec<u8> {
    Key::store(store).id(id).into_vec()
}

/// Writes (with `None`, deletes) a tax rate: the one writer of the table. Calculations read the
/// rates, so the store's pricing version moves on too.
fn write_tax_rate(tx: &mut Tx, store: Uuid, id: Uuid, rate: Option<&TaxRate>) -> ApiResult<()> {
    pricing_changed(tx, store)?;
    match rate {
        Some(r) => tx.put(TAX_RATES, &row_key(store, id), &encode(r)?),
        None => tx.delete(TAX_RATES, &row_key(store, id)),
    }
}

fn load(tx: &Tx, store: Uuid, id: Uuid) -> ApiResult<TaxRate> {
    let bytes = tx.get(TAX_RATES, &row_key(store, id))?.ok_or_else(ApiError::not_found)?;
    decode(&bytes)
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
fn check_unique(tx: &Tx, store: Uuid, rate: &TaxRate) -> ApiResult<usize> {
    let rows = tx_scan(tx, TAX_RATES, Key::store(store).bytes(), None, usize::MAX)?;
    for (_, v) in &rows {
        let other: TaxRate = decode(v)?;
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
    Ok(rows.len())
}

impl Cell {
    pub async fn create_tax_rate(&self, store: Uuid, input: TaxRateInput) -> ApiResult<TaxRate> {
        let now = self.clock.now_ms();
        let rate = TaxRate::create(&input, self.clock.new_id(), now, now)?;
        self.writer
            .write(Some(store), move |tx| {
                if check_unique(tx, store, &rate)? >= MAX_RATES {
                    return Err(ApiError::msg(Code::BUSINESS_RULE, format!("a store has at most {MAX_RATES} tax rates")));
                }
                write_tax_rate(tx, store, rate.id, Some(&rate))?;
                Ok(rate.clone())
            })
            .await
    }

    pub fn tax_rate(&self, store: Uuid, id: Uuid) -> ApiResult<TaxRate> {
        read::get(&self.read()?, TAX_RATES, &row_key(store, id))?.ok_or_else(ApiError::not_found)
    }

    /// A page of tax rates, optionally of one country, with the total.
    pub fn list_tax_rates(&self, store: Uuid, country: Option<&str>, paging: &Paging) -> ApiResult<(Vec<TaxRate>, u64)> {
        let mut rates = all_rates(&self.read()?, store)?;
        if let Some(c) = country {
            rates.retain(|r| r.country.eq_ignore_ascii_case(c));
        }
        Ok(page_of(rates, paging, |r, field| match field {
            "name" => (r.name.to_lowercase(), 0, r.id),
            "country" => (format!("{}\u{0}{}", r.country, r.province.as_deref().unwrap_or("")), 0, r.id),
            "updated_at" => (String::new(), r.updated_at, r.id),
            _ => (String::new(), r.created_at, r.id),
        }))
    }

    /// Replaces a rate by `input` (the whole rate), keeping its id and creation time.
    pub async fn update_tax_rate(&self, store: Uuid, id: Uuid, input: TaxRateInput) -> ApiResult<TaxRate> {
        input.validate()?;
        let input = Arc::new(input);
        let now = self.clock.now_ms();
        self.writer
            .write(Some(store), move |tx| {
                let old = load(tx, store, id)?;
                let rate = TaxRate::create(&input, id, old.created_at, now)?;
                check_unique(tx, store, &rate)?;
                write_tax_rate(tx, store, id, Some(&rate))?;
                Ok(rate)
            })
            .await
    }

    pub async fn delete_tax_rate(&self, store: Uuid, id: Uuid) -> ApiResult<()> {
        self.writer
            .write(Some(store), move |tx| {
                load(tx, store, id)?;
                write_tax_rate(tx, store, id, None)
            })
            .await
    }
}
