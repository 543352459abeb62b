//! Format 7: events, jobs and webhooks (store tables 42–49, made empty when the database opens,
//! as every table is), and store settings gain `storefront_url`, `email_from` and `reply_to`
//! (every `stores` row rewritten with them unset).

use redb::{ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::money::Currency;
use crate::domain::store::{StoreAddress, StoreSettings};
use crate::storage::codec::{decode, encode};
use crate::storage::tables::STORES;

/// A `stores` row as format 6 wrote it.
#[derive(Serialize, Deserialize)]
struct SettingsV6 {
    id: Uuid,
    name: String,
    currency: Currency,
    country: String,
    timezone: String,
    address: StoreAddress,
    taxes_included: bool,
    weight_unit: String,
    owner_id: Uuid,
    created_at: i64,
    updated_at: i64,
}

pub(super) fn events_jobs_and_store_mail(txn: &WriteTransaction) -> Result<(), redb::Error> {
    let corrupt = |e: crate::error::ApiError| redb::Error::Corrupted(format!("stores: {e}"));
    let mut stores = txn.open_table(STORES.def)?;
    let mut rows = Vec::new();
    for item in stores.iter()? {
        let (k, v) = item?;
        let old: SettingsV6 = decode(v.value()).map_err(corrupt)?;
        let new = StoreSettings {
            id: old.id,
            name: old.name,
            currency: old.currency,
            country: old.country,
            timezone: old.timezone,
            address: old.address,
            taxes_included: old.taxes_included,
            weight_unit: old.weight_unit,
            owner_id: old.owner_id,
            created_at: old.created_at,
            updated_at: old.updated_at,
            storefront_url: None,
            email_from: None,
            reply_to: None,
        };
        rows.push((k.value().to_vec(), encode(&new).map_err(corrupt)?));
    }
    for (k, v) in rows {
        stores.insert(k.as_slice(), v.as_slice())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::keys::Key;

    #[test]
    fn settings_of_format_6_gain_the_mail_fields_unset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cell.redb");
        let store = Uuid::from_u128(42);
        let old = SettingsV6 {
            id: store,
            name: "Shop".into(),
            currency: Currency::parse("EUR").unwrap(),
            country: "FR".into(),
            timezone: "Europe/Paris".into(),
            address: StoreAddress { city: "Lyon".into(), ..Default::default() },
            taxes_included: true,
            weight_unit: "g".into(),
            owner_id: Uuid::from_u128(7),
            created_at: 1,
            updated_at: 2,
        };
        {
            let db = crate::storage::open(&path, crate::cells::DATABASE, crate::storage::ONE_OFF_CACHE).unwrap();
            let txn = db.begin_write().unwrap();
            txn.open_table(STORES.def).unwrap().insert(Key::store(store).bytes(), encode(&old).unwrap().as_slice()).unwrap();
            txn.open_table(crate::storage::tables::META)
                .unwrap()
                .insert("format_version", 6u32.to_le_bytes().as_slice())
                .unwrap();
            txn.commit().unwrap();
        }
        let db = crate::storage::open(&path, crate::cells::DATABASE, crate::storage::ONE_OFF_CACHE).unwrap();
        let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
        let s: StoreSettings = crate::storage::read::get(&txn, STORES, Key::store(store).bytes()).unwrap().unwrap();
        assert_eq!((s.name.as_str(), s.address.city.as_str(), s.taxes_included, s.updated_at), ("Shop", "Lyon", true, 2));
        assert_eq!((s.storefront_url, s.email_from, s.reply_to), (None, None, None));
    }
}
