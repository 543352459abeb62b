//! Webhook subscriptions as the API takes them, and how deliveries are signed: Standard
//! Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256 of
//! "id.timestamp.body">`, secrets `whsec_<base64>`).

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::{ApiError, ApiResult, Check};

/// Most subscriptions of one store.
pub const MAX_PER_STORE: u64 = 50;
/// Longest URL a subscription takes.
pub const MAX_URL: usize = 2048;
/// Most topics one subscription names.
pub const MAX_TOPICS: usize = 50;
/// The wait after a failed first attempt (API.md, Conventions: 5 s, then [`RETRIES`]).
pub const FIRST_RETRY: Duration = Duration::from_secs(5);
/// The waits after each failed retry: 5 min, 30 min, 2 h, 5 h, 10 h, 10 h; the delivery has
/// failed after the last (eight attempts in all, over about 28 hours).
pub const RETRIES: &[Duration] = &[
    Duration::from_secs(5 * 60),
    Duration::from_secs(30 * 60),
    Duration::from_secs(2 * 3600),
    Duration::from_secs(5 * 3600),
    Duration::from_secs(10 * 3600),
    Duration::from_secs(10 * 3600),
];
/// A subscription failing this long without a success is disabled.
pub const DISABLE_AFTER_MS: i64 = 5 * 24 * 3600 * 1000;
/// How much of a receiver's answer the delivery log keeps.
pub const ANSWER_KEPT: usize = 1024;

/// `POST S/webhooks`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateWebhook {
    /// Topics to deliver: names (`order.created`), a prefix with `.*` (`order.*`), or `*`.
    #[schemars(schema_with = "topics_schema")]
    pub topics: Vec<String>,
    /// Where deliveries are POSTed: https (plain http only for a host the operator allows).
    pub url: String,
}

/// `PATCH S/webhooks/{webhookId}`: any of the fields.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateWebhook {
    #[serde(default)]
    #[schemars(schema_with = "optional_topics_schema")]
    pub topics: Option<Vec<String>>,
    pub url: Option<String>,
    /// `true` re-enables a disabled subscription: every kept event of its topics not yet
    /// delivered is sent, in order.
    pub enabled: Option<bool>,
}

/// Every event topic's name (`cells::events::TOPICS` lists them in this order; a test there keeps
/// them in step).
pub const TOPIC_NAMES: &[&str] = &[
    "product.created",
    "product.updated",
    "product.deleted",
    "inventory.updated",
    "checkout.created",
    "checkout.abandoned",
    "order.created",
    "order.paid",
    "order.partially_fulfilled",
    "order.fulfilled",
    "location.created",
    "location.updated",
    "fulfillment_order.held",
    "fulfillment_order.released",
    "fulfillment_order.moved",
    "fulfillment_order.cancelled",
    "fulfillment_order.opened",
    "fulfillment.created",
    "fulfillment.updated",
];

/// A subscription's topics in the document, as [`check_topics`] reads them against
/// [`TOPIC_NAMES`]: 1 to [`MAX_TOPICS`] of a name, a prefix with `.*`, or `*` (read in any case).
fn topics_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut names: Vec<String> = vec!["*".into()];
    for t in TOPIC_NAMES {
        let prefix = format!("{}.*", t.split('.').next().unwrap_or(t));
        if !names.contains(&prefix) {
            names.push(prefix);
        }
    }
    names.extend(TOPIC_NAMES.iter().map(|t| t.to_string()));
    schemars::json_schema!({"type": "array", "minItems": 1, "maxItems": MAX_TOPICS, "items": {"type": "string", "enum": names}})
}

fn optional_topics_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    crate::domain::fields::or_null(topics_schema(g))
}

/// The topics of a subscription, checked against `known` (every topic there is) and put in one
/// form: trimmed, lower-cased, without repeats.
pub fn check_topics(c: &mut Check, topics: &[String], known: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if topics.is_empty() || topics.len() > MAX_TOPICS {
        c.fail("topics", format!("name 1 to {MAX_TOPICS} topics"));
        return out;
    }
    for (i, t) in topics.iter().enumerate() {
        let t = t.trim().to_ascii_lowercase();
        let ok = t == "*"
            || known.contains(&t.as_str())
            || t.strip_suffix(".*").is_some_and(|p| known.iter().any(|k| k.split('.').next() == Some(p)));
        if !ok {
            c.fail(
                &format!("topics[{i}]"),
                format!("unknown topic '{t}'; topics are {}, a prefix such as order.*, or *", known.join(", ")),
            );
        } else if !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// Whether a subscription to `topics` receives events of `topic`.
pub fn matches(topics: &[String], topic: &str) -> bool {
    topics.iter().any(|t| {
        t == "*" || t == topic || t.strip_suffix(".*").is_some_and(|p| topic.strip_prefix(p).is_some_and(|r| r.starts_with('.')))
    })
}

/// A new signing secret: `whsec_` and 32 random bytes in base64.
pub fn new_secret() -> ApiResult<String> {
    let mut bytes = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .map_err(|_| ApiError::internal("no randomness"))?;
    Ok(format!("whsec_{}", STANDARD.encode(bytes)))
}

/// `webhook-signature` of a delivery: `v1,` and the base64 HMAC-SHA256, under the secret's
/// bytes, of `id.timestamp.body`.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> ApiResult<String> {
    let raw = secret.strip_prefix("whsec_").unwrap_or(secret);
    let key_bytes = STANDARD.decode(raw).map_err(|_| ApiError::internal("a stored secret is not base64"))?;
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key_bytes);
    let mut ctx = ring::hmac::Context::with_key(&key);
    ctx.update(id.as_bytes());
    ctx.update(b".");
    ctx.update(timestamp.to_string().as_bytes());
    ctx.update(b".");
    ctx.update(body);
    Ok(format!("v1,{}", STANDARD.encode(ctx.sign().as_ref())))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: &[&str] = &["order.created", "order.paid", "product.created"];

    #[test]
    fn the_published_vector_of_standard_webhooks() {
        // From the Standard Webhooks specification's reference libraries.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(sign(secret, id, 1614265330, body).unwrap(), "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn topics_are_names_prefixes_or_everything() {
        let mut c = Check::new();
        let t = check_topics(&mut c, &["Order.*".into(), "product.created".into(), "order.*".into()], KNOWN);
        assert!(c.finish().is_ok());
        assert_eq!(t, vec!["order.*", "product.created"]);
        assert!(matches(&t, "order.paid") && matches(&t, "product.created") && !matches(&t, "product.updated"));
        assert!(!matches(&["order.*".into()], "orders.created"), "a prefix ends at a dot");
        assert!(matches(&["*".into()], "anything.at_all"));

        for bad in [vec![], vec!["order.shipped".to_string()], vec!["nothing.*".to_string()], vec!["".to_string()]] {
            let mut c = Check::new();
            check_topics(&mut c, &bad, KNOWN);
            assert!(c.finish().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn secrets_are_32_random_bytes() {
        let (a, b) = (new_secret().unwrap(), new_secret().unwrap());
        assert_ne!(a, b);
        assert_eq!(STANDARD.decode(a.strip_prefix("whsec_").unwrap()).unwrap().len(), 32);
    }
}
