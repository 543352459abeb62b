//! `shopcell serve --demo`: a merchant and a store to try the platform with, on an empty data
//! directory. Everything but the merchant's password comes from a fixed-seed generator (the
//! same catalogue on every machine, no network), and every record is written through the
//! functions the API's handlers call, with their validation: nothing here touches a table.

use std::path::Path;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::task::JoinSet;
use uuid::Uuid;

use crate::cells::{Cell, collections, discounts, products, shipping, taxes};
use crate::domain::stock::Actor;
use crate::domain::store::CreateStore;
use crate::error::{ApiError, ApiResult, BoxError};
use crate::node::Node;

/// The demo merchant's sign-in email.
pub const EMAIL: &str = "demo@example.com";
/// How many products the demo store holds.
pub const PRODUCTS: usize = 300;
/// The generator's seed: the demo catalogue is this number's.
const SEED: u64 = 0x005e_ed0f_de70_ca7a;
/// Products written at once: the cell's writer commits concurrent writes together.
const CONCURRENT_WRITES: usize = 32;

/// What the operator is told once the process listens.
pub struct Seeded {
    pub email: &'static str,
    /// Generated for this data directory, printed once, stored only as its hash.
    pub password: String,
    pub store_id: Uuid,
    pub products: usize,
}

impl Seeded {
    /// The lines printed after the listening line.
    pub fn announce(&self, url: &str) -> String {
        format!(
            "demo merchant: {} password: {} (shown once; change it with `shopcell admin reset-password`)\n\
             demo store {} with {} products: sign in at {url}/api/v1/auth/login",
            self.email, self.password, self.store_id, self.products
        )
    }
}

/// `--demo` only starts on a directory that is absent or empty: demo records never mix with a
/// real installation's, and a restart with `--demo` does not seed twice.
pub fn refuse_unless_empty(data: &Path) -> Result<(), BoxError> {
    let mut entries = match std::fs::read_dir(data) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("--demo: cannot read the data directory {}: {e}", data.display()).into()),
    };
    match entries.next() {
        None => Ok(()),
        Some(entry) => {
            let found = entry.map(|e| e.file_name().to_string_lossy().into_owned()).unwrap_or_default();
            Err(format!(
                "--demo needs an empty or absent data directory, and {} is not empty (it holds {found:?}): \
                 start without --demo to serve it, or give another --data",
                data.display()
            )
            .into())
        }
    }
}

/// Creates the merchant and the demo store in `node` (a `serve` process, before it listens).
pub async fn seed(node: &Node) -> Result<Seeded, BoxError> {
    seed_store(node).await.map_err(|e| format!("--demo: {}", e.message).into())
}

async fn seed_store(node: &Node) -> ApiResult<Seeded> {
    let account = node.account.as_deref().ok_or_else(|| ApiError::internal("--demo needs the account service"))?;
    let made = account.create_user(EMAIL, "Demo Merchant", None).await?;
    let password = made.generated_password.ok_or_else(|| ApiError::internal("no password was generated"))?;
    let body =
        CreateStore { name: "Demo Outfitters".into(), currency: "USD".into(), country: "US".into(), timezone: "UTC".into() };
    let store = crate::api::stores::open_store(node, made.user_id, body).await?;
    let placed = node.directory.locate(store.id).await?.unwrap_or_default();
    let cell = node.cells.get(&placed).cloned().ok_or_else(|| ApiError::internal("the demo store has no cell here"))?;
    let owner = Actor::Member(made.user_id);

    let mut rng = Rng(SEED);
    let catalogue: Vec<(usize, Value)> = (0..PRODUCTS).map(|i| product(&mut rng, i)).collect();
    let mut by_kind: Vec<Vec<Uuid>> = vec![Vec::new(); KINDS.len()];
    for chunk in catalogue.chunks(CONCURRENT_WRITES) {
        let mut writes = JoinSet::new();
        for (kind, body) in chunk {
            let (cell, input, kind) = (cell.clone(), parse(body.clone())?, *kind);
            writes.spawn(async move { products::create_product(&cell, store.id, input, owner).await.map(|(p, _)| (kind, p.id)) });
        }
        while let Some(done) = writes.join_next().await {
            let (kind, id) = done.map_err(ApiError::internal)??;
            by_kind[kind].push(id);
        }
    }
    for (kind, ids) in KINDS.iter().zip(by_kind) {
        let c = collections::create_collection(&cell, store.id, parse(json!({"title": kind.collection, "status": "published"}))?)
            .await?;
        collections::add_collection_products(&cell, store.id, c.id, ids).await?;
    }
    extras(&cell, store.id).await?;
    Ok(Seeded { email: EMAIL, password, store_id: store.id, products: PRODUCTS })
}

/// A discount code, shipping to the United States and Canada, and their taxes.
async fn extras(cell: &Arc<Cell>, store: Uuid) -> ApiResult<()> {
    discounts::create(
        cell,
        store,
        parse(json!({"title": "Welcome 10 %", "code": "WELCOME10", "valueType": "percentage", "value": 1000}))?,
    )
    .await?;
    let days = |min: u32, max: u32| json!({"minDays": min, "maxDays": max});
    shipping::create(
        cell,
        store,
        parse(json!({"name": "United States", "countries": [{"code": "US"}], "rates": [
            {"name": "Standard", "price": 599, "estimatedDelivery": days(3, 5)},
            {"name": "Express", "price": 1499, "estimatedDelivery": days(1, 2)},
        ]}))?,
    )
    .await?;
    shipping::create(
        cell,
        store,
        parse(json!({"name": "Canada", "countries": [{"code": "CA"}], "rates": [
            {"name": "Standard", "price": 1500, "estimatedDelivery": days(4, 8)},
        ]}))?,
    )
    .await?;
    for rate in [
        json!({"country": "US", "rate": 725, "name": "Sales tax"}),
        json!({"country": "CA", "rate": 500, "name": "GST", "shipping": true}),
    ] {
        taxes::create(cell, store, parse(rate)?).await?;
    }
    Ok(())
}

/// A request body, read as the API reads it (unknown fields refused).
fn parse<T: DeserializeOwned>(v: Value) -> ApiResult<T> {
    serde_json::from_value(v).map_err(ApiError::internal)
}

/// One kind of product: its collection, its names, its price range and its options.
struct Kind {
    collection: &'static str,
    nouns: &'static [&'static str],
    /// Cents, lowest and highest.
    price: (i64, i64),
    grams: u32,
    options: &'static [(&'static str, &'static [&'static str])],
}

const KINDS: [Kind; 6] = [
    Kind {
        collection: "T-shirts",
        nouns: &["Tee", "Crew Tee", "Pocket Tee", "Long Sleeve"],
        price: (1800, 3900),
        grams: 180,
        options: &[("Size", &["S", "M", "L", "XL"]), ("Color", &["Black", "White", "Sand"])],
    },
    Kind {
        collection: "Mugs",
        nouns: &["Mug", "Camp Mug", "Travel Mug"],
        price: (1200, 2800),
        grams: 350,
        options: &[("Color", &["White", "Blue", "Green"])],
    },
    Kind {
        collection: "Notebooks",
        nouns: &["Notebook", "Journal", "Sketchbook"],
        price: (900, 2400),
        grams: 250,
        options: &[("Paper", &["Lined", "Dotted", "Blank"])],
    },
    Kind {
        collection: "Posters",
        nouns: &["Poster", "Print", "Map Print"],
        price: (1500, 6000),
        grams: 120,
        options: &[("Size", &["A3", "A2", "A1"])],
    },
    Kind {
        collection: "Socks",
        nouns: &["Socks", "Hiking Socks", "Wool Socks"],
        price: (800, 2200),
        grams: 80,
        options: &[("Size", &["S", "M", "L"])],
    },
    Kind {
        collection: "Candles",
        nouns: &["Candle", "Tin Candle", "Pillar Candle"],
        price: (1400, 4200),
        grams: 400,
        options: &[("Scent", &["Cedar", "Fig", "Sea Salt", "Smoke"])],
    },
];

const ADJECTIVES: [&str; 12] =
    ["Harbor", "Alpine", "Desert", "Meadow", "Northern", "Copper", "Granite", "Fern", "Lighthouse", "Canyon", "Orchard", "Tidal"];
const VENDORS: [&str; 4] = ["Outfitters Co", "Field & Ferry", "North Loom", "Small Batch Works"];

/// Product `i`: its kind, and its `POST S/products` body. Every option value is a variant (up
/// to twelve), each priced and stocked.
fn product(rng: &mut Rng, i: usize) -> (usize, Value) {
    let k = i % KINDS.len();
    let kind = &KINDS[k];
    let title = format!("{} {} #{}", ADJECTIVES[rng.below(ADJECTIVES.len())], kind.nouns[rng.below(kind.nouns.len())], i + 1);
    // Prices end in .00 or .50, as shops price.
    let steps = (kind.price.1 - kind.price.0) / 50;
    let price = kind.price.0 + 50 * rng.below(steps as usize + 1) as i64;
    let money = |amount: i64| json!({"amount": amount, "currency": "USD"});
    let mut combos: Vec<Vec<&str>> = vec![Vec::new()];
    for (_, values) in kind.options {
        combos = combos.iter().flat_map(|c| values.iter().map(move |v| [c.as_slice(), &[*v]].concat())).collect();
    }
    let variants: Vec<Value> = combos
        .iter()
        .enumerate()
        .map(|(n, values)| {
            // Larger sizes cost a little more.
            let price = price + 100 * (n % kind.options[0].1.len()) as i64;
            json!({
                "title": values.join(" / "),
                "sku": format!("DEMO-{:03}-{:02}", i + 1, n + 1),
                "price": money(price),
                "weightGrams": kind.grams,
                "optionValues": values,
                "inventoryTracked": true,
                "inventoryQuantity": 5 + rng.below(96) as i64,
            })
        })
        .collect();
    let options: Vec<Value> = kind.options.iter().map(|(name, values)| json!({"name": name, "values": values})).collect();
    let body = json!({
        "title": title,
        "status": "ACTIVE",
        "description": format!("{title}, from the demo catalogue."),
        "vendor": VENDORS[rng.below(VENDORS.len())],
        "productType": kind.collection,
        "tags": ["demo", kind.collection.to_lowercase()],
        "options": options,
        "variants": variants,
    });
    (k, body)
}

/// SplitMix64: a small generator whose fixed seed makes the same catalogue every time.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogue_is_the_same_every_time_and_reads_as_the_api_reads_it() {
        let make = || {
            let mut rng = Rng(SEED);
            (0..PRODUCTS).map(|i| product(&mut rng, i).1).collect::<Vec<_>>()
        };
        let (a, b) = (make(), make());
        assert_eq!(a, b);
        for body in &a {
            let p: crate::domain::product::CreateProduct = parse(body.clone()).unwrap();
            assert!((3..=12).contains(&p.variants.len()), "{}", p.title);
        }
        let titles: std::collections::HashSet<&str> = a.iter().filter_map(|p| p["title"].as_str()).collect();
        assert_eq!(titles.len(), PRODUCTS, "titles are distinct");
    }
}
