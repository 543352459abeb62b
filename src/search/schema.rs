//! The tantivy schema of a cell's product index, its analyzers, and the document of a product.
//!
//! One document per product. Every query is filtered by the `store` term, so one index serves
//! all the stores of a cell. Ids are kept in fast fields (two u64 halves) so a search answers ids
//! without touching the document store; the product rows themselves are read from redb.

use tantivy::schema::Term;
use tantivy::schema::{FAST, Field, INDEXED, IndexRecordOption, STRING, Schema, SchemaBuilder, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::{AsciiFoldingFilter, LowerCaser, RawTokenizer, RemoveLongFilter, SimpleTokenizer, TextAnalyzer};
use tantivy::{Index, TantivyDocument};
use uuid::Uuid;

use crate::domain::product::{DEFAULT_VARIANT_TITLE, Product, Variant};

/// Analyzer of titles and variant titles: words, lower-cased, accents folded (`Café` → `cafe`).
pub const WORDS: &str = "shop_words";
/// Analyzer of codes (sku, barcode, product type): the whole value, lower-cased.
pub const CODE: &str = "shop_code";
/// Bytes of the lower-cased title kept for sorting: the same cut as the product list's title key.
const TITLE_SORT_BYTES: usize = 64;

/// The fields of the schema, resolved once.
#[derive(Debug, Clone, Copy)]
pub struct Fields {
    /// `store ‖ product id` (32 bytes): the one term that names a product's document. Raw
    /// bytes rather than hex: every document adds a distinct term, and the term dictionaries
    /// built at each commit and merge grow with their length.
    pub key: Field,
    /// The store id (hex): the filter of every query and the purge of a moved store.
    pub store: Field,
    pub id_hi: Field,
    pub id_lo: Field,
    pub title: Field,
    pub variant_title: Field,
    /// Title and variant titles together: `searchBy=all` matches words here, one automaton per
    /// word instead of one per word and field.
    pub all_words: Field,
    pub sku: Field,
    pub barcode: Field,
    /// `DRAFT`, `ACTIVE` or `ARCHIVED`.
    pub status: Field,
    /// Lower-cased product type.
    pub product_type: Field,
    /// Lowest variant price, minor units (sorting only: a fast field, no terms).
    pub price: Field,
    /// Creation time, ms since the epoch (sorting only).
    pub created: Field,
    /// Lower-cased title prefix, a string fast field for title sorts.
    pub title_sort: Field,
}

/// The field names; changing any of them changes the index format (rebuild with `admin reindex`).
pub fn build() -> (Schema, Fields) {
    let mut b = SchemaBuilder::new();
    let words = TextOptions::default()
        .set_indexing_options(TextFieldIndexing::default().set_tokenizer(WORDS).set_index_option(IndexRecordOption::WithFreqs));
    let code = TextOptions::default()
        .set_indexing_options(TextFieldIndexing::default().set_tokenizer(CODE).set_index_option(IndexRecordOption::Basic));
    let fields = Fields {
        key: b.add_bytes_field("key", INDEXED),
        store: b.add_text_field("store", STRING),
        id_hi: b.add_u64_field("id_hi", FAST),
        id_lo: b.add_u64_field("id_lo", FAST),
        title: b.add_text_field("title", words.clone()),
        variant_title: b.add_text_field("variant_title", words.clone()),
        all_words: b.add_text_field("all_words", words),
        sku: b.add_text_field("sku", code.clone()),
        barcode: b.add_text_field("barcode", code.clone()),
        status: b.add_text_field("status", STRING),
        product_type: b.add_text_field("product_type", code),
        price: b.add_i64_field("price", FAST),
        created: b.add_i64_field("created", FAST),
        title_sort: b.add_text_field("title_sort", TextOptions::default().set_fast("raw")),
    };
    (b.build(), fields)
}

/// Registers the analyzers on an opened index (tantivy does not persist them).
pub fn register_analyzers(index: &Index) {
    let words = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .build();
    let code = TextAnalyzer::builder(RawTokenizer::default()).filter(LowerCaser).build();
    index.tokenizers().register(WORDS, words);
    index.tokenizers().register(CODE, code);
}

/// The term naming one product's document.
pub fn key(f: &Fields, store: Uuid, id: Uuid) -> Term {
    Term::from_field_bytes(f.key, &key_bytes(store, id))
}

fn key_bytes(store: Uuid, id: Uuid) -> [u8; 32] {
    let mut k = [0; 32];
    k[..16].copy_from_slice(store.as_bytes());
    k[16..].copy_from_slice(id.as_bytes());
    k
}

/// The term text of a store.
pub fn store_term(store: Uuid) -> String {
    store.simple().to_string()
}

/// The lower-cased title prefix used for title sorts (cut at a character boundary).
pub fn title_sort_key(title: &str) -> String {
    let lower = title.to_lowercase();
    let mut end = lower.len().min(TITLE_SORT_BYTES);
    while !lower.is_char_boundary(end) {
        end -= 1;
    }
    lower[..end].to_string()
}

/// Codes are matched lower-cased and trimmed, as the `CODE` analyzer indexes them.
pub fn code_text(raw: &str) -> String {
    raw.trim().to_lowercase()
}

/// What a product's document is made of, borrowed from the product: [`document`] reads nothing
/// else, so two versions of a product with equal ones have the same document. Borrowed whole
/// (nothing collected): the one product writer compares two of them on every write.
struct Indexed<'a> {
    id: Uuid,
    title: &'a str,
    variants: &'a [Variant],
    /// Variants are titled by a placeholder (a product without options).
    placeholder_titles: bool,
    status: &'static str,
    product_type: &'a str,
    price: i64,
    created_at: i64,
}

impl<'a> Indexed<'a> {
    fn of(p: &'a Product) -> Indexed<'a> {
        Indexed {
            id: p.id,
            title: &p.title,
            variants: &p.variants,
            placeholder_titles: p.options.is_empty(),
            status: p.status.name(),
            product_type: &p.product_type,
            price: p.price(),
            created_at: p.created_at,
        }
    }

    /// Each variant's searchable title, SKU and barcode.
    fn variants(&self) -> impl Iterator<Item = (Option<&'a str>, Option<&'a str>, Option<&'a str>)> + use<'a> {
        let placeholder = self.placeholder_titles;
        self.variants.iter().map(move |v| {
            // A placeholder title is not indexed: no shopper searches for it, and indexed it
            // would match nearly every product.
            let title = (!(placeholder && v.title == DEFAULT_VARIANT_TITLE)).then_some(v.title.as_str());
            (title, v.sku.as_deref(), v.barcode.as_deref())
        })
    }
}

impl PartialEq for Indexed<'_> {
    fn eq(&self, other: &Self) -> bool {
        // Every field named, so one added to the view cannot be left out of the comparison; the
        // variants (and whether their titles are placeholders) compare as the document reads them.
        let Indexed { id, title, variants: _, placeholder_titles: _, status, product_type, price, created_at } = self;
        (*id, *title, *status, *product_type, *price, *created_at)
            == (other.id, other.title, other.status, other.product_type, other.price, other.created_at)
            && self.variants().eq(other.variants())
    }
}

/// Whether `old` and `new` (a product before and after a write) have the same document: a write
/// that changes nothing a search reads (a change of stock, of a description) leaves the index as
/// it is.
pub fn same_document(old: &Product, new: &Product) -> bool {
    Indexed::of(old) == Indexed::of(new)
}

/// The document of `p` in `store`.
pub fn document(f: &Fields, store: Uuid, p: &Product) -> TantivyDocument {
    let p = Indexed::of(p);
    let mut d = TantivyDocument::default();
    let id = p.id.as_u128();
    d.add_bytes(f.key, &key_bytes(store, p.id));
    d.add_text(f.store, store_term(store));
    d.add_u64(f.id_hi, (id >> 64) as u64);
    d.add_u64(f.id_lo, id as u64);
    d.add_text(f.title, p.title);
    d.add_text(f.all_words, p.title);
    for (title, sku, barcode) in p.variants() {
        if let Some(t) = title {
            d.add_text(f.variant_title, t);
            d.add_text(f.all_words, t);
        }
        if let Some(s) = sku {
            d.add_text(f.sku, s);
        }
        if let Some(b) = barcode {
            d.add_text(f.barcode, b);
        }
    }
    d.add_text(f.status, p.status);
    d.add_text(f.product_type, p.product_type);
    d.add_i64(f.price, p.price);
    d.add_i64(f.created, p.created_at);
    d.add_text(f.title_sort, title_sort_key(p.title));
    d
}

#[cfg(test)]
mod tests {
    use tantivy::Document;

    use super::*;
    use crate::domain::product::Status;

    /// A document as the index keeps it, comparable.
    fn doc(p: &Product) -> String {
        let (schema, f) = build();
        document(&f, Uuid::from_u128(9), p).to_json(&schema)
    }

    #[test]
    fn a_write_is_indexed_again_exactly_when_its_document_changes() {
        let before = Product::sample();
        type Change = fn(&mut Product);
        let unseen: [(&str, Change); 5] = [
            ("stock", |p| p.variants[0].inventory_quantity -= 1),
            ("description", |p| p.description = "Folds flat, weatherproof".into()),
            ("tags", |p| p.tags.push("sale".into())),
            ("a dearer variant than the cheapest", |p| p.variants[1].price = 1500),
            ("updated time", |p| p.updated_at = 2),
        ];
        let seen: [(&str, Change); 8] = [
            ("title", |p| p.title = "Garden Bench".into()),
            ("variant title", |p| p.variants[1].title = "Large".into()),
            ("sku", |p| p.variants[0].sku = None),
            ("barcode", |p| p.variants[0].barcode = Some("0123".into())),
            ("status", |p| p.status = Status::Archived),
            ("product type", |p| p.product_type = "Seating".into()),
            ("lowest price", |p| p.variants[0].price = 900),
            ("a variant more", |p| p.variants.push(p.variants[0].clone())),
        ];
        for (what, change) in unseen.iter().chain(&seen) {
            let mut after = before.clone();
            change(&mut after);
            let same = doc(&before) == doc(&after);
            assert_eq!(same_document(&before, &after), same, "{what}");
            assert_eq!(same, unseen.iter().any(|(w, _)| w == what), "{what}");
        }
    }
}
