//! The one error table: every error the API can answer, its HTTP status and its default message.
//!
//! Handlers return [`ApiError`]; the HTTP layer turns it into the JSON shape of `API.md`:
//! `{"success": false, "error": {"code", "message", "fields"}, "message"}`.

use serde::Serialize;

/// An error of a start-up, an offline command or a background task, reported as text.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

macro_rules! error_table {
    ($($name:ident => $status:literal, $msg:literal;)*) => {
        /// Machine-readable error codes (`error.code` in responses).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        pub enum Code { $($name),* }

        impl Code {
            /// The HTTP status this code is answered with.
            pub fn status(self) -> u16 { match self { $(Code::$name => $status),* } }
            /// The code as it appears on the wire.
            pub fn as_str(self) -> &'static str { match self { $(Code::$name => stringify!($name)),* } }
            /// The message used when the caller gives none.
            pub fn default_message(self) -> &'static str { match self { $(Code::$name => $msg),* } }
            /// Every code, for the OpenAPI document and tests.
            pub const ALL: &'static [Code] = &[$(Code::$name),*];
        }
    };
}

error_table! {
    INVALID_JSON => 400, "the request body is not valid JSON";
    VALIDATION_FAILED => 400, "the request has invalid fields";
    UNAUTHORIZED => 401, "authentication is required";
    INVALID_TOKEN => 401, "the access token is invalid";
    TOKEN_EXPIRED => 401, "the access token has expired";
    INVALID_CREDENTIALS => 401, "the email or password is wrong";
    INVALID_PUBLISHABLE_KEY => 401, "the publishable key is invalid or revoked";
    INVALID_MFA_CODE => 401, "the verification code is wrong or was already used";
    FORBIDDEN => 403, "you are not allowed to do this";
    SIGNUP_CLOSED => 403, "sign-up is closed here; ask the operator for an account";
    INVALID_SESSION_TOKEN => 403, "the checkout's sessionToken is missing or wrong";
    NOT_FOUND => 404, "not found";
    METHOD_NOT_ALLOWED => 405, "this method is not allowed on this path";
    REQUEST_TIMEOUT => 408, "the request body did not arrive in time";
    CONFLICT => 409, "the request conflicts with the current state";
    EMAIL_TAKEN => 409, "an account with this email already exists";
    HANDLE_TAKEN => 409, "another record already uses this handle";
    COUNTRY_TAKEN => 409, "a country belongs to another market of this store";
    DISCOUNT_CODE_TAKEN => 409, "another discount of this store already has this code";
    DISCOUNT_USAGE_LIMIT_REACHED => 409, "the discount has reached its usage limit";
    GIFT_CARD_CODE_TAKEN => 409, "another gift card of this store already has this code";
    CHECKOUT_COMPLETED => 409, "the checkout is already completed";
    OUT_OF_STOCK => 409, "not enough stock for an item of the checkout";
    PRICE_CHANGED => 409, "a price changed since the checkout was priced; review it and try again";
    PAYLOAD_TOO_LARGE => 413, "the request body is too large";
    UNSUPPORTED_MEDIA_TYPE => 415, "the request body must be application/json";
    BUSINESS_RULE => 422, "the request breaks a business rule";
    PAYMENT_DECLINED => 422, "the payment was declined; try another payment method";
    IDEMPOTENCY_KEY_REUSED => 422, "this Idempotency-Key was already used with a different request";
    RATE_LIMITED => 429, "too many requests; retry later";
    INTERNAL => 500, "an internal error occurred";
    BAD_GATEWAY => 502, "an upstream service did not answer";
    UNAVAILABLE => 503, "the service is unavailable; retry later";
    STORE_MOVING => 503, "the store is being moved; retry shortly";
}

/// One invalid field: where it is and what is wrong with it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

/// An error answered to the client. Internal details never reach `message`: they go to the log.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: Code,
    pub message: String,
    pub fields: Vec<FieldError>,
    /// Seconds for the `Retry-After` header (429, 503).
    pub retry_after: Option<u32>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(code: Code) -> Self {
        ApiError { code, message: code.default_message().to_string(), fields: Vec::new(), retry_after: None }
    }

    pub fn msg(code: Code, message: impl Into<String>) -> Self {
        ApiError { message: message.into(), ..ApiError::new(code) }
    }

    /// A 400 naming one invalid field.
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        let field = field.into();
        let message = message.into();
        ApiError {
            message: format!("{field}: {message}"),
            fields: vec![FieldError { field, message }],
            ..ApiError::new(Code::VALIDATION_FAILED)
        }
    }

    /// A 400 naming several invalid fields.
    pub fn fields(fields: Vec<FieldError>) -> Self {
        let message = fields.iter().map(|f| format!("{}: {}", f.field, f.message)).collect::<Vec<_>>().join("; ");
        ApiError { message, fields, ..ApiError::new(Code::VALIDATION_FAILED) }
    }

    /// The same error under another code (keeps message and fields).
    pub fn with_code(mut self, code: Code) -> Self {
        self.code = code;
        self
    }

    pub fn not_found() -> Self {
        ApiError::new(Code::NOT_FOUND)
    }

    pub fn retry_after(mut self, seconds: u32) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// Logs the cause and answers a bare 500: internals never reach the client.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(%cause, "internal error");
        ApiError::new(Code::INTERNAL)
    }

    /// The response body of `API.md`.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({
            "success": false,
            "error": { "code": self.code.as_str(), "message": self.message, "fields": self.fields },
            "message": self.message,
        })
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for ApiError {}

macro_rules! internal_from {
    ($($t:ty),*) => {$(
        impl From<$t> for ApiError {
            fn from(e: $t) -> Self { ApiError::internal(e) }
        }
    )*};
}

internal_from!(
    redb::Error,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::DatabaseError,
    std::io::Error
);

/// Accumulates field errors so a request reports all its invalid fields at once.
#[derive(Default)]
pub struct Check(Vec<FieldError>);

impl Check {
    pub fn new() -> Self {
        Check(Vec::new())
    }

    /// Records `message` for `field` unless `ok`.
    pub fn ensure(&mut self, ok: bool, field: &str, message: impl Into<String>) -> &mut Self {
        if !ok {
            self.0.push(FieldError { field: field.to_string(), message: message.into() });
        }
        self
    }

    pub fn fail(&mut self, field: &str, message: impl Into<String>) {
        self.0.push(FieldError { field: field.to_string(), message: message.into() });
    }

    /// Takes `inner`'s errors, each field put under `at` (`shippingAddress.city`): a part's
    /// fields are checked under their own names, and the path is written only for a failure.
    pub fn nest(&mut self, at: &str, inner: Check) {
        self.0.extend(inner.0.into_iter().map(|e| FieldError { field: format!("{at}.{}", e.field), ..e }));
    }

    pub fn finish(self) -> ApiResult<()> {
        if self.0.is_empty() { Ok(()) } else { Err(ApiError::fields(self.0)) }
    }
}
