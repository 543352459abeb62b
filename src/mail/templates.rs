//! The mail templates: a subject, a plain-text body and an HTML body per template and language,
//! compiled into the binary and rendered with minijinja.
//!
//! minijinja rather than a hand-written `{{name}}` replacer: an order confirmation loops over its
//! lines and shows optional rows (discount, the storefront link), which a replacer cannot, and the
//! HTML parts are escaped by the engine itself (auto-escaping by the `.html` extension), so no
//! template can forget to escape a value. Undefined values are errors, so a caller that forgets
//! a field learns it at once instead of sending a mail with a hole in it.

use minijinja::{Environment, UndefinedBehavior};
use serde::{Deserialize, Serialize};

/// The mails the platform sends. Each variant's documentation lists the fields of
/// [`Letter::values`](super::Letter::values) it reads; money arrives pre-formatted as strings,
/// and fields marked optional may be left out or `null`. Every field ending in `_url` must be an
/// `http://` or `https://` URL.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Template {
    /// `store_name`, `order_number`, `lines` (a list of `{title, quantity, amount}`),
    /// `subtotal`, `discount` (optional), `shipping` (optional), `tax` (optional), `total`,
    /// `shipping_address` (a list of address lines), `storefront_url` (optional).
    OrderConfirmation,
    /// `reset_url` (valid for one hour), `name` (optional).
    PasswordReset,
    /// `changed_at` (pre-formatted date and time), `reset_url` (to take the account back),
    /// `name` (optional).
    PasswordChanged,
    /// `store_name`, `inviter_name`, `role`, `accept_url` (valid for seven days).
    Invitation,
    /// `store_name`, `role`, `admin_url`.
    MemberAdded,
    /// `store_name`, `subscription_url`, `failing_since` (pre-formatted), `reenable_url`.
    WebhookDisabled,
    /// `store_name`, `order_number`, `lines` (a list of `{title, quantity}`), `tracking` (a list
    /// of `{number, company, url}`, the last two optional), `shipping_address` (a list of
    /// address lines), `storefront_url` (optional).
    ShippingConfirmation,
    /// `store_name`, `order_number`, `shipment_status` (readable: "In transit"), `tracking` (a
    /// list of `{number, company, url}`, the last two optional), `storefront_url` (optional).
    TrackingUpdate,
}

impl Template {
    /// Every template, for tests and tools that walk them all.
    pub const ALL: [Template; 8] = [
        Template::OrderConfirmation,
        Template::PasswordReset,
        Template::PasswordChanged,
        Template::Invitation,
        Template::MemberAdded,
        Template::WebhookDisabled,
        Template::ShippingConfirmation,
        Template::TrackingUpdate,
    ];

    /// The template's file stem under `src/mail/templates/<language>/`.
    pub fn name(self) -> &'static str {
        match self {
            Template::OrderConfirmation => "order_confirmation",
            Template::PasswordReset => "password_reset",
            Template::PasswordChanged => "password_changed",
            Template::Invitation => "invitation",
            Template::MemberAdded => "member_added",
            Template::WebhookDisabled => "webhook_disabled",
            Template::ShippingConfirmation => "shipping_confirmation",
            Template::TrackingUpdate => "tracking_update",
        }
    }
}

/// The language used when a letter's language has no templates.
pub const DEFAULT_LANGUAGE: &str = "en";

/// One file per part: `<name>.subject.txt`, `<name>.txt`, `<name>.html`, plus a shared layout.
macro_rules! language {
    ($lang:literal: $($name:literal),* $(,)?) => {
        &[
            (concat!($lang, "/layout.html"), include_str!(concat!("templates/", $lang, "/layout.html"))),
            $(
                (concat!($lang, "/", $name, ".subject.txt"), include_str!(concat!("templates/", $lang, "/", $name, ".subject.txt"))),
                (concat!($lang, "/", $name, ".txt"), include_str!(concat!("templates/", $lang, "/", $name, ".txt"))),
                (concat!($lang, "/", $name, ".html"), include_str!(concat!("templates/", $lang, "/", $name, ".html"))),
            )*
        ]
    };
}

/// The shipped languages and their files. A new language is a folder and a line here; a test
/// holds every language to every template.
const LANGUAGES: &[(&str, &[(&str, &str)])] = &[(
    "en",
    language!(
        "en": "order_confirmation",
        "password_reset",
        "password_changed",
        "invitation",
        "member_added",
        "webhook_disabled",
        "shipping_confirmation",
        "tracking_update",
    ),
)];

/// A rendered template: what the message is built from.
#[derive(Debug)]
pub struct Rendered {
    pub subject: String,
    pub text: String,
    pub html: String,
}

/// The compiled templates of every language.
pub struct Templates {
    env: Environment<'static>,
}

impl Templates {
    /// Parses every shipped template; an error here is a broken template in the source tree.
    pub fn load() -> Result<Templates, String> {
        let mut env = Environment::new();
        // `{% if discount %}` on a missing field is false, `{{ missing }}` is an error.
        env.set_undefined_behavior(UndefinedBehavior::SemiStrict);
        // Block tags on their own lines leave no blank lines behind (the text parts are read as is).
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| format!("mail template syntax: {e}"))?;
        env.set_syntax(syntax);
        for (_, files) in LANGUAGES {
            for (name, source) in *files {
                env.add_template(name, source).map_err(|e| format!("mail template {name}: {e}"))?;
            }
        }
        Ok(Templates { env })
    }

    /// The shipped language for a requested one: `en-GB` and `EN` are `en`; anything unknown is
    /// [`DEFAULT_LANGUAGE`].
    pub fn language(requested: &str) -> &'static str {
        let primary = requested.split(['-', '_']).next().unwrap_or_default().to_ascii_lowercase();
        LANGUAGES.iter().map(|(lang, _)| *lang).find(|lang| *lang == primary).unwrap_or(DEFAULT_LANGUAGE)
    }

    /// Renders the three parts of `template` in `language` (falling back to the default).
    pub fn render(&self, language: &str, template: Template, values: &serde_json::Value) -> Result<Rendered, String> {
        let lang = Templates::language(language);
        let ctx = minijinja::Value::from(minijinja::value::Serde(values));
        let part = |suffix: &str| -> Result<String, String> {
            let name = format!("{lang}/{}.{suffix}", template.name());
            let tmpl = self.env.get_template(&name).map_err(|e| format!("template {name}: {e}"))?;
            tmpl.render(&ctx).map_err(|e| format!("template {name}: {e}"))
        };
        Ok(Rendered { subject: part("subject.txt")?, text: part("txt")?, html: part("html")? })
    }
}
