//! Variables: NGINX's `$name` values compiled once into [`template::Template`]s
//! and rendered per request (`$uri`, `$arg_NAME`, `$upstream_cache_status`,
//! …), and the variables a configuration defines itself
//! ([`split_clients`], [`map`], [`geo`], `set` and named captures of [`regex`]es);
//! the `$ssl_*` names are in [`ssl_var`], the stream-only ones in [`stream_names`].
//! A base the configuration, the logs and the
//! upstreams all use: it imports none of them.

pub mod families;
pub mod geo;
pub mod map;
pub mod regex;
pub mod split_clients;
pub mod ssl_var;
pub mod stream_names;
pub mod template;
