//! What the addition filter adds to a location's responses (NGINX's
//! `ngx_http_addition_filter_module`): `add_before_body`,
//! `add_after_body` and `addition_types` fill one [`AdditionSettings`],
//! nested in `LocSettings` (`addition`). The filter is
//! `handlers/addition.rs`; the directives `config/directives/addition.rs`.

use std::sync::Arc;

use super::group::settings_group;

settings_group! {
    /// The addition settings as one config level wrote them.
    AdditionBuilder =>
    /// The addition settings after merging with outer levels.
    AdditionSettings;
    /// `add_before_body URI` (empty: none).
    before: String = String::new();
    /// `add_after_body URI` (empty: none).
    after: String = String::new();
    /// `addition_types` (lowercase, text/html always in; `*` any).
    types: Arc<Vec<String>> = Arc::new(vec!["text/html".to_string()]);
}
